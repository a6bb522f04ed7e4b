"""make bench's iibench-vs-iibench.py arm on a real MariaDB, tiny: both sides insert every row they
were asked for, at 1 and 10 clients, and the figure carries both sides' rates and CPU per row."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import reference
from servers.allocators import resolve
from suites.families.mysql.server import MySQLServer, MySQLSettings, find_mysql
from tests.integration.runs_helpers import scratch_dir

pytestmark = pytest.mark.integration


class _OneServer:
    """What the arm needs of bench.bench.Bench: a work dir and an unstarted server on
    a datadir that has an `iibench` database."""

    def __init__(self, work: Path):
        self.work = work
        self.settings = MySQLSettings(buffer_pool_mb=64, max_threads=32, innodb_log_file_mb=48)

    def restored(self, tag: str) -> MySQLServer:
        srv = MySQLServer(
            find_mysql(), self.work / f"srv-{tag}", self.settings, resolve(["glibc"])[0]
        )
        srv.initialize()
        srv.start(timeout_s=120)
        try:
            conn = srv.connect()
            conn.cursor().execute("CREATE DATABASE iibench")
            conn.close()
        finally:
            srv.stop()
        return srv


def test_both_sides_insert_every_row_at_1_and_10_clients():
    script = reference.find_reference(None)
    why = None if script else "iibench.py is not in ../shared/reference beside this checkout"
    why = why or reference.mysqldb_missing()
    if why:
        pytest.skip(why)
    with scratch_dir("ms-ir-") as work:
        fig = reference.iibench_vs_reference(
            _OneServer(work), rounds=1, rows=5000, rows_10=10000, script=None
        )
    assert fig["rounds"] == 1 and [p["clients"] for p in fig["points"]] == [1, 10]
    for p in fig["points"]:
        # Each side's row count was checked against the table by the arm itself.
        assert len(p["ours_rows_per_s"]) == len(p["ref_rows_per_s"]) == 1
        assert p["ours_rows_per_s"][0] > 0 and p["ref_rows_per_s"][0] > 0
        assert p["ratio"] > 0 and p["ours_cpu_us_per_row"] > 0 and p["ref_cpu_us_per_row"] > 0
