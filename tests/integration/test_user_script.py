"""A user's own sysbench Lua script is a workload, on a real MariaDB: our own order/stock script
(tests/fixtures/lua/orders.lua, with a module of its own beside it) prepared, run and cleaned up
through our wrapper, its figures recorded exactly as a stock workload's; then a whole
`mallocsweep run` of it beside POINT_SELECT: its own tables in the cached dataset, scanned by
the warmup, its rows in results.csv with the per-op figures, re-derivable."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from suites.cli.main import main
from suites.families.mysql.server import MySQLServer, MySQLSettings
from suites.workloads.sysbench import Script, SysbenchOptions, prepare, run_level
from tests.integration.mariadb import sbtest_target, start_empty
from tests.integration.runs_helpers import manifest, results, run_in_process, scratch_dir

pytestmark = pytest.mark.integration
LUA = Path(__file__).resolve().parents[1] / "fixtures" / "lua"
ORDERS = Script("orders", path=str(LUA / "orders.lua"), options=(("items", "400"), ("lines", "2")))
# Statements of one orders transaction: BEGIN and COMMIT (sysbench's "other"), then per order
# line a SELECT ... FOR UPDATE (a read), an UPDATE and an INSERT (writes).
QUERIES_PER_TXN = 2 + 3 * 2


def _tables(srv: MySQLServer) -> set[str]:
    conn = srv.connect()
    try:
        cur = conn.cursor()
        cur.execute("SELECT table_name FROM information_schema.tables WHERE table_schema='sbtest'")
        return {r[0] for r in cur.fetchall()}
    finally:
        conn.close()


def test_a_users_script_prepares_runs_and_cleans_up_through_our_wrapper():
    settings = MySQLSettings(buffer_pool_mb=64, max_threads=32, innodb_log_file_mb=16)
    with scratch_dir("ms-us-") as work:
        srv = start_empty(work / "srv", settings)
        try:
            target = sbtest_target(srv)
            opts = SysbenchOptions(tables=1, table_size=100)  # the stock sizes: not the script's
            prepare(target, opts, work / "prepare.log", workload=ORDERS)
            assert _tables(srv) == {"stock", "order_line"}  # made by its own module's code
            seen = []
            res = run_level(
                target, ORDERS, 4, 3, opts, work / "orders@4.log",
                on_interval=lambda t, tps, qps: seen.append((t, tps, qps)),
            )  # fmt: skip
            assert res.status == "ok", res.error
            assert res.workload == "orders" and res.threads == 4 and res.events > 0
            # Its figures are sysbench's counters through our report hooks, as for stock scripts
            assert res.tps > 0 and res.qps == pytest.approx(QUERIES_PER_TXN * res.tps, rel=0.02)
            assert 0 < res.lat_p50_ms <= res.lat_p95_ms <= res.lat_p99_ms <= res.lat_max_ms
            hist = res.sysbench.latency_histogram
            assert sum(c for _, c in hist.buckets) == res.events  # every transaction timed
            assert len(seen) >= 2 and res.sysbench.problems == []
            assert "--items=400" in res.sysbench.argv  # its own option, on its command line
            conn = srv.connect()
            cur = conn.cursor()
            cur.execute(
                "SELECT SUM(sold), (SELECT COUNT(*) FROM sbtest.order_line) FROM sbtest.stock"
            )
            sold, lines = cur.fetchone()
            conn.close()
            assert int(sold) == lines == 2 * res.events  # what it did is what it counted
            prepare(target, opts, work / "cleanup.log", workload=ORDERS, command="cleanup")
            assert _tables(srv) == set()
        finally:
            srv.stop()


SUITE = f"""
[suite]
name = "orders"
[server]
buffer_pool_mb = 64
[allocators]
use = ["glibc"]
[dataset]
tables = 1
table_size = 1000
[warmup]
min_s = 1
cap_s = 3
threads = 2
[sysbench]
workloads = ["point_select", "orders"]
scripts = {{ orders = "{LUA / "orders.lua"}" }}
script_options = {{ orders = {{ items = 500 }} }}
threads = [2, 4]
duration_s = 3
"""


def test_a_run_of_a_users_script_is_recorded_as_a_stock_workload_is(capsys):
    with run_in_process("ms-usr-", SUITE, "--quiet") as (code, run):
        assert code == 0, capsys.readouterr().err
        m = manifest(run)
        (cell,) = m["cells"]
        assert cell["status"] == "ok" and not cell.get("level_failures"), cell.get("error")
        # its tables, as its prepare made them, beside the stock ones: cached and scanned
        assert m["dataset"]["tables"] == {
            "point_select": ["sbtest1"],
            "orders": ["order_line", "stock"],
        }
        assert cell["warmup"]["scan_seconds"] > 0 and cell["warmup"]["stopped_by"] in (
            "warm",
            "cap",
        )
        assert (run / "logs" / "dataset" / "prepare-orders.log").is_file()
        rows = {(r["workload"], int(r["threads"])): r for r in results(run)}
        assert set(rows) == {("point_select", 2), ("point_select", 4), ("orders", 2), ("orders", 4)}
        for threads in (2, 4):
            row = rows[("orders", threads)]
            assert row["status"] == "ok" and float(row["tps"]) > 0
            assert float(row["qps"]) == pytest.approx(QUERIES_PER_TXN * float(row["tps"]), rel=0.02)
            for col in ("lat_p50_ms", "lat_p95_ms", "lat_p99_ms", "window_s", "cpu_us_per_op"):
                assert float(row[col]) > 0, col
        raw = json.loads((run / "raw" / f"{cell['id']}.json").read_text())
        level = next(lv for lv in raw["levels"] if lv["workload"] == "orders")
        assert level["sysbench"]["latency_histogram"]["buckets"]
        # the report renders it, and its rows derive again from what was recorded
        assert (run / "report.html").is_file()
        capsys.readouterr()
        assert main(["report", str(run), "--rederive"]) == 0
        said = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("rederive: ")]
        assert said and all(ln.endswith(" 0 changed") for ln in said), said
