"""The kernel fact the hugepage report rests on is measured, and the measurement works."""

from __future__ import annotations

import pytest

from collectors.thp_probe import prctl_blocks_madvise
from suites import thp


@pytest.mark.integration
@pytest.mark.skipif(
    thp.current()["enabled"] == "never", reason="THP is off system-wide: nothing to probe"
)
def test_probe_sees_advised_hugepages_and_measures_the_prctl():
    got = prctl_blocks_madvise()
    assert got["advised_kb"] and got["advised_kb"] >= 2048, (
        got
    )  # madvise/always gives advised memory huge pages
    assert got["blocks_madvise"] in (True, False)
    assert got["blocks_madvise"] == (got["advised_with_prctl_kb"] == 0)
