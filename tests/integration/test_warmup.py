"""Warmup on a freshly started server: it reads from disk (nobody starts warm) and gets warm."""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import pytest

from servers.allocators import resolve
from servers.mysql import MySQLServer, MySQLSettings, find_mysql
from suites.dataset import DatasetCache
from suites.sysbench import SysbenchOptions
from suites.warmup import warm_up, warm_vs_fixed
from tests.integration.mariadb import sbtest_target, start_prepared

pytestmark = pytest.mark.integration
OPTS = SysbenchOptions(tables=2, table_size=20000)


def settings():
    return MySQLSettings(buffer_pool_mb=64, max_threads=64, innodb_log_file_mb=48)


target_of = sbtest_target


@pytest.fixture(scope="module")
def dataset():
    work = Path(tempfile.mkdtemp(prefix="ms-wu-", dir="/tmp"))
    binary = find_mysql()
    srv = None
    try:
        srv, _, _ = start_prepared(work / "prep", OPTS, settings(), work / "prepare.log")
        srv.stop()
        cache = DatasetCache(work / "cache")
        key = cache.key(binary.version, {"tables": 2, "table_size": 20000})
        cache.store(key, srv.datadir, {"prepare_s": None})
        yield binary, cache, key, work
    finally:
        if srv is not None:
            srv.stop()
        shutil.rmtree(work, ignore_errors=True)


@pytest.mark.parametrize("cell", ["first", "second"])
def test_fresh_server_reads_during_warmup_and_gets_warm(dataset, cell, capsys):
    """Each cell (as each allocator would) starts cold: buffer-pool reads > 0 during warmup."""
    binary, cache, key, work = dataset
    cache.restore(key, work / cell / "datadir")
    srv = MySQLServer(binary, work / cell, settings(), resolve(["glibc"])[0])
    try:
        t0 = time.monotonic()
        srv.start(timeout_s=120)
        got = warm_up(
            srv.connect,
            target_of(srv),
            OPTS.tables,
            OPTS,
            cap_s=30,
            min_s=2,
            log_dir=work / f"{cell}-logs",
            status_fn=srv.global_status,
        )
        start_to_warm = time.monotonic() - t0
    finally:
        srv.stop()
    with capsys.disabled():
        print(f"\nwarmup ({cell} cell): { ({k: v for k, v in got.items() if k != 'chunks'}) }")
        print(f"start to warm vs fixed 600 s: {warm_vs_fixed(start_to_warm)}")
    assert got["bp_reads_during"] > 0 and got["bp_reads_start"] < got["bp_reads_end"]
    assert got["bp_reads_after_scan"] > got["bp_reads_start"]  # the scans did the loading
    assert got["pages_data_end"] > got["pages_data_start"]
    assert got["warm"] is True and got["chunks"] and got["chunks"][-1]["bp_reads_delta"] == 0
    assert got["oltp_seconds"] >= 2 and got["seconds"] < 60
    assert all(c["status"] == "ok" for c in got["chunks"])


def test_cap_stops_a_warmup_that_cannot_get_warm(dataset):
    """A cap shorter than min_s is refused; cap 0 means the scans only."""
    binary, cache, key, work = dataset
    cache.restore(key, work / "cap" / "datadir")
    srv = MySQLServer(binary, work / "cap", settings(), resolve(["glibc"])[0])
    try:
        srv.start(timeout_s=120)
        got = warm_up(
            srv.connect,
            target_of(srv),
            OPTS.tables,
            OPTS,
            cap_s=0,
            min_s=0,
            log_dir=work / "cap-logs",
            status_fn=srv.global_status,
        )
    finally:
        srv.stop()
    assert got["chunks"] == [] and got["warm"] is False and got["bp_reads_during"] > 0
