"""Warmup on a freshly started server: it reads from disk (nobody starts warm) and gets warm in
one continuous sysbench run, stopped when warm; the cap stops one that never gets warm."""

from __future__ import annotations

import time

import pytest

from servers.allocators import resolve
from suites.datasets.cache import DatasetCache
from suites.errors import SuiteError
from suites.families.mysql.plugin import MYSQL
from suites.families.mysql.server import MySQLServer, MySQLSettings, find_mysql
from suites.workloads.sysbench import SysbenchOptions
from suites.workloads.sysbench.options import as_script, stock_tables
from suites.workloads.sysbench.warm import sysbench_warm_up
from suites.workloads.warmup import status_counters, warm_up, warm_vs_fixed
from tests.integration.mariadb import sbtest_target, start_prepared
from tests.integration.runs_helpers import scratch_dir

pytestmark = pytest.mark.integration
OPTS = SysbenchOptions(tables=2, table_size=20000)


def settings():
    return MySQLSettings(buffer_pool_mb=64, max_threads=64, innodb_log_file_mb=48)


target_of = sbtest_target
# the server's names of the two counters the warmup watches (the MySQL family's, InnoDB)
NAMES = (MYSQL.counters()["cache_misses"], MYSQL.counters()["cache_fill"])


def warm(srv, log_dir, status_fn=None, scan=True, **kw) -> dict:
    """The sysbench workload's warmup on a bare server: scans of sbtest1..N, then OLTP_RO."""
    return sysbench_warm_up(
        srv.connect,
        target_of(srv),
        OPTS,
        status_counters(status_fn or srv.global_status, NAMES),
        NAMES,
        load=as_script("oltp_ro"),
        stock=stock_tables(OPTS.tables),
        own=[],
        log_dir=log_dir,
        scan=scan,
        **kw,
    )


@pytest.fixture(scope="module")
def dataset():
    with scratch_dir("ms-wu-") as work:
        binary = find_mysql()
        srv = None
        try:
            srv, _, _ = start_prepared(work / "prep", OPTS, settings(), work / "prepare.log")
            srv.stop()
            cache = DatasetCache(work / "cache", linkable=MYSQL.linkable)
            key = cache.key(binary.version, {"tables": 2, "table_size": 20000})
            cache.store(key, srv.datadir, {"prepare_s": None})
            yield binary, cache, key, work
        finally:
            if srv is not None:
                srv.stop()


@pytest.mark.parametrize("cell", ["first", "second"])
def test_fresh_server_reads_during_warmup_and_gets_warm(dataset, cell, capsys):
    """Each cell (as each allocator would) starts cold: buffer-pool reads > 0 during warmup."""
    binary, cache, key, work = dataset
    cache.restore(key, work / cell / "datadir")
    srv = MySQLServer(binary, work / cell, settings(), resolve(["glibc"])[0])
    try:
        t0 = time.monotonic()
        srv.start(timeout_s=120)
        got = warm(srv, work / f"{cell}-logs", cap_s=30, min_s=2)
        start_to_warm = time.monotonic() - t0
    finally:
        srv.stop()
    with capsys.disabled():
        print(f"\nwarmup ({cell} cell): { ({k: v for k, v in got.items() if k != 'checks'}) }")
        print(f"checks: {got['checks']}")
        print(f"start to warm vs fixed 600 s: {warm_vs_fixed(start_to_warm)}")
    assert got["bp_reads_during"] > 0 and got["bp_reads_start"] < got["bp_reads_end"]
    assert got["bp_reads_after_scan"] > got["bp_reads_start"]  # the scans did the loading
    assert got["pages_data_end"] > got["pages_data_start"]
    assert got["warm"] is True and got["stopped_by"] == "warm" and "error" not in got
    assert got["checks"][-1]["bp_reads_delta"] == 0 and got["checks"][-1]["warm"]
    assert got["checks"][-1]["oltp_t_s"] >= 2  # min_s, in the run's own clock
    assert got["oltp_seconds"] >= 2 and got["seconds"] < 30  # stopped well before the cap
    assert got["qps"] > 0
    # One continuous sysbench process: its clients connected once, not once per chunk.
    log = (work / f"{cell}-logs" / "warmup.log").read_text()
    assert log.count("# mallocsweep: ") == 1


def test_cap_stops_a_warmup_that_never_gets_warm(dataset):
    """A pool that never settles (reads always rising) runs until the cap, then stops."""
    binary, cache, key, work = dataset
    cache.restore(key, work / "cap" / "datadir")
    srv = MySQLServer(binary, work / "cap", settings(), resolve(["glibc"])[0])
    bump = {"n": 0}

    def restless_status():
        s = dict(srv.global_status())
        bump["n"] += 1000  # as if every check found more reads from disk
        s["Innodb_buffer_pool_reads"] = float(s["Innodb_buffer_pool_reads"]) + bump["n"]
        return s

    try:
        srv.start(timeout_s=120)
        t0 = time.monotonic()
        got = warm(srv, work / "cap-logs", restless_status, scan=False, cap_s=4, min_s=1)
        took = time.monotonic() - t0
    finally:
        srv.stop()
    assert got["warm"] is False and got["stopped_by"] == "cap" and "error" not in got
    assert got["checks"] and not any(c["warm"] for c in got["checks"])
    # ran to the cap (its clients' clock), and was stopped there: the cap is what ended it (how
    # soon after the cap depends on how busy the machine is)
    assert got["sysbench_seconds"] >= 4 - 0.5 and took >= 4


def test_scan_only_with_cap_zero(dataset):
    """cap_s = 0 means the scans only: no sysbench at all."""
    binary, cache, key, work = dataset
    cache.restore(key, work / "scan" / "datadir")
    srv = MySQLServer(binary, work / "scan", settings(), resolve(["glibc"])[0])
    try:
        srv.start(timeout_s=120)
        got = warm(srv, work / "scan-logs", cap_s=0, min_s=0)
    finally:
        srv.stop()
    assert got["checks"] == [] and got["warm"] is False and got["bp_reads_during"] > 0
    assert got["stopped_by"] is None and not (work / "scan-logs" / "warmup.log").exists()


@pytest.mark.parametrize("min_s, cap_s", [(5, 3), (-1, 3), (1, -2)])
def test_warmup_refuses_min_above_cap_before_touching_the_server(min_s, cap_s, tmp_path):
    def no_server():
        raise AssertionError("the refusal must come before any server access")

    with pytest.raises(SuiteError, match=r"0 <= min_s <= cap_s"):
        warm_up(no_server, NAMES, cap_s=cap_s, min_s=min_s, scan=no_server)
