"""A level that ends once its ramp is over ([sysbench] settle_cap_s), on a real MariaDB: our Lua
wrapper lowers sysbench's own time limit, so the level ends as --time would end it (cumulative
report, full histogram), and the derivation reads its load as ending there."""

from __future__ import annotations

import pytest

from rundir.derive.window import Interval, load_end
from suites.workloads.sysbench import run_level
from tests.integration.mariadb import SMALL_DATASET

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def server(mariadb_life, tmp_path_factory):
    srv, target, _ = mariadb_life("glibc")
    return srv, target, tmp_path_factory.mktemp("settle-logs")


def test_the_stop_file_ends_sysbench_cleanly_before_its_planned_time(server):
    """The stop file is created by the test at the third report (what settle.SettleWatch does
    once the rule is satisfied), so the moment does not depend on this machine's noise."""
    _, target, logs = server
    log = logs / "oltp_ro@8.log"
    stop = log.with_suffix(".stop")
    seen = []

    def report(t, tps, qps):
        seen.append(t)
        if len(seen) == 3:
            stop.touch()

    # planned: 3 s + a cap of 20 s = 23 s of sysbench
    res = run_level(
        target, "oltp_ro", 8, 3, SMALL_DATASET, log, on_interval=report, settle_cap_s=20
    )
    assert res.status == "ok", res.error
    rec = res.sysbench
    assert rec.problems == []  # no refusal; the histogram holds exactly sysbench's events
    assert rec.latency_histogram is not None and rec.stopped_early is False
    assert rec.settled_stop_s is not None
    # The file appeared after the third report; the wrapper looks for it after each report, so
    # sysbench is told at the fourth (never later; earlier only if the watch itself was satisfied)
    assert rec.settled_stop_s <= seen[2] + 1.0 + 1e-3
    assert "--time=23" in " ".join(rec.argv)
    assert res.duration_s < 23 - 1  # it ended well before its planned time
    assert res.events > 0 and res.qps > 0 and res.lat_p95_ms > 0
    assert rec.exit["returncode"] == 0
    # what the derivation makes of it: the load ends at the report it was stopped at
    ivs = [Interval(iv["t_s"], iv["qps"], None) for iv in res.intervals]
    assert load_end(ivs, rec.settled_stop_s + 0.5, 1.0) <= rec.settled_stop_s + 1e-6


def test_without_a_cap_the_level_runs_its_planned_time(server):
    _, target, logs = server
    res = run_level(target, "point_select", 8, 3, SMALL_DATASET, logs / "point_select@8.log")
    assert res.status == "ok", res.error
    assert res.sysbench.settled_stop_s is None
    assert "--time=3" in " ".join(res.sysbench.argv)
