"""Prepare once, keep a pristine datadir, restore per cell: the pristine copy survives a cell."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from servers.allocators import resolve
from suites.datasets.cache import DatasetCache, restore_vs_prepare
from suites.families.mysql.plugin import MYSQL
from suites.families.mysql.server import MySQLServer, MySQLSettings, find_mysql
from suites.workloads.sysbench import SysbenchOptions, run_level
from tests.integration.mariadb import sbtest_target, start_prepared
from tests.integration.runs_helpers import scratch_dir

pytestmark = pytest.mark.integration
OPTS = SysbenchOptions(tables=2, table_size=20000)
SPEC = {"kind": "sysbench", "tables": OPTS.tables, "table_size": OPTS.table_size}


def settings():
    return MySQLSettings(buffer_pool_mb=64, max_threads=64, innodb_log_file_mb=48)


target_of = sbtest_target


def digest(root: Path) -> dict:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def cached(tmp_path_factory):
    """A dataset prepared by a real server, shut down cleanly, stored in a cache."""
    with scratch_dir("ms-ds-") as work:
        binary = find_mysql()
        srv = None
        try:
            srv, _, prepare_s = start_prepared(
                work / "prep", OPTS, settings(), work / "prepare.log"
            )
            srv.stop()
            assert srv.exit.returncode == 0
            cache = DatasetCache(work / "cache", linkable=MYSQL.linkable)
            key = cache.key(binary.version, SPEC)
            cache.store(
                key,
                srv.datadir,
                {"server_version": binary.version, "spec": SPEC, "prepare_s": round(prepare_s, 3)},
                check=MYSQL.datadir_problem,
            )
            yield binary, cache, key, work
        finally:
            if srv is not None:
                srv.stop()


def test_pristine_copy_is_unchanged_after_a_cell_wrote(cached):
    binary, cache, key, work = cached
    pristine = cache.path(key) / "datadir"
    before = digest(pristine)
    got = cache.restore(key, work / "cell1" / "datadir")
    assert got["method"] in ("reflink", "copy") and got["files"]["hardlink"] >= OPTS.tables
    srv = MySQLServer(binary, work / "cell1", settings(), resolve(["glibc"])[0])
    try:
        srv.start(timeout_s=120)
        conn = srv.connect()
        cur = conn.cursor()
        cur.execute("UPDATE sbtest.sbtest1 SET k = k + 1 WHERE id <= 5000")
        cur.execute("SELECT COUNT(*) FROM sbtest.sbtest2")
        assert cur.fetchall()[0][0] == OPTS.table_size
        conn.close()
        res = run_level(target_of(srv), "oltp_ro", 4, 2, OPTS, work / "cell1-oltp.log")
        assert res.status == "ok", res.error
    finally:
        srv.stop()
    # The cell really wrote its own files (so a shared inode would have shown) ...
    cell = digest(work / "cell1" / "datadir")
    assert cell["sbtest/sbtest1.ibd"] != before["sbtest/sbtest1.ibd"]
    assert cell["ib_logfile0"] != before["ib_logfile0"]
    # ... and not one byte of the pristine copy changed.
    assert digest(pristine) == before
    # A second cell gets a fresh copy of the pristine data, not the first cell's.
    cache.restore(key, work / "cell2" / "datadir")
    assert digest(work / "cell2" / "datadir")["sbtest/sbtest1.ibd"] == before["sbtest/sbtest1.ibd"]


def test_restore_is_faster_than_prepare(cached, capsys):
    _, cache, key, work = cached
    got = restore_vs_prepare(cache, key, work / "scratch")
    with capsys.disabled():
        print(f"\nrestore vs prepare ({OPTS.tables} x {OPTS.table_size} rows): {got}")
    assert got["restore_s"] > 0 and got["prepare_s"] > 0
    assert got["restore_s"] < got["prepare_s"]
