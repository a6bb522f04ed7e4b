"""The kernel fact the hugepage report rests on is measured, and the measurement works — also when
the system setting is `never` (the probe switches THP on for itself and puts `never` back)."""

from __future__ import annotations

from pathlib import Path

import pytest

from collectors.thp_probe import PROBE_MODE, prctl_blocks_madvise
from suites.runner import thp

ENABLED = Path("/sys/kernel/mm/transparent_hugepage/enabled")
# The second test sets THP never system-wide for a moment.
pytestmark = pytest.mark.system_settings


def check_measured(got: dict) -> None:
    assert got["advised_kb"] and got["advised_kb"] >= 2048, got  # advised memory got huge pages
    assert got["blocks_madvise"] in (True, False)
    assert got["blocks_madvise"] == (got["advised_with_prctl_kb"] == 0)


@pytest.mark.integration
@pytest.mark.skipif(
    thp.current()["enabled"] == "never", reason="THP is off system-wide: covered by the next test"
)
def test_probe_sees_advised_hugepages_and_measures_the_prctl():
    got = prctl_blocks_madvise()
    check_measured(got)
    assert got["forced"] is False and got["probe_mode"] == thp.current()["enabled"]


@pytest.mark.integration
@pytest.mark.skipif(not thp.writable(), reason="THP sysfs is not writable: needs root")
def test_probe_under_system_never_sets_madvise_for_itself_and_restores():
    original = thp.current()["enabled"]
    try:
        ENABLED.write_text("never")
        got = prctl_blocks_madvise()
        assert thp.current()["enabled"] == "never"  # put back, read back
        assert got["forced"] is True and got["probe_mode"] == PROBE_MODE
        assert got["system_enabled"] == "never" and "restore_error" not in got
        check_measured(got)
    finally:
        ENABLED.write_text(original)
    assert thp.current()["enabled"] == original
