"""The fault campaign in make test: a fixed seed, six faults, about a minute and a half
(tests/integration/fault_campaign.py says what is injected and checked; `make stress` runs ~50).
Every campaign includes kill -9 of an iibench client and of a read-while-writing client mid-load,
and a SIGKILL of the runner while client processes run."""

from __future__ import annotations

import pytest

from tests.integration.fault_campaign import campaign
from tests.integration.runs_helpers import scratch_dir

# It checks that no fault leaves THP changed: no THP test may run beside it.
pytestmark = [pytest.mark.integration, pytest.mark.system_settings]

SEED = 17
FAULTS = 6  # 12 took 147 s of make test's time in CI, 8 took 97-128 s; 6 keep every forced kind
# (at 1, 2 and 3), the bad-input fault (at 3) and random ones
# Faults are started while the budget lasts (eight took about 2 minutes on a quiet 2-core
# machine); a loaded one gets fewer faults in it (MIN_FAULTS) rather than an unbounded test.
BUDGET_S = 200
MIN_FAULTS = 4  # measured: 5-7 fit in 300 s at a load average of 40-90 on 2 cores


# Faults start only within BUDGET_S; the last one and the final --resume may take a few minutes
# more on a loaded machine (measured: 418 s in all at a load average of 40-90).
@pytest.mark.timeout(900)
def test_fault_campaign_leaves_nothing_behind_and_resume_completes(capsys):
    with scratch_dir("ms-campaign-") as work:
        c = campaign(SEED, FAULTS, work, budget_s=BUDGET_S)
    with capsys.disabled():
        print(f"\nfault campaign (seed {SEED}): {c.summary()}")
        for line in c.log:
            print("  ", line)
    assert c.faults >= MIN_FAULTS, c.log
    assert (c.orphans, c.thp_changed, c.mounts_left, c.manifests_invalid) == (0, 0, 0, 0), (
        c.problems
    )
    assert c.resumes_incomplete == 0, c.problems
    assert c.problems == []
