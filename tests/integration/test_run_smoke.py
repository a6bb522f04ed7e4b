"""The smoke suite end to end on real MariaDB under two real allocators (issue 3's acceptance)."""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path

import pytest

from suites.cli import main
from tests.integration.runs_helpers import manifest, processes_mentioning, results

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def smoke_run():
    out = Path(tempfile.mkdtemp(prefix="ms-run-", dir="/tmp"))
    cache = out / "cache"
    mp = pytest.MonkeyPatch()
    mp.setenv("MALLOCSWEEP_CACHE", str(cache))
    try:
        mp.chdir(out)  # a relative --out, as `make run` gives it
        code = main(["run", str(REPO / "configs/suites/smoke.toml"), "--out", "runs", "--quiet"])
        run_dir = next((out / "runs").iterdir())
        yield code, run_dir
    finally:
        mp.undo()
        shutil.rmtree(out, ignore_errors=True)


def test_every_allocator_workload_level_has_a_row(smoke_run):
    code, run_dir = smoke_run
    assert code == 0
    rows = results(run_dir)
    keys = {(r["allocator"], r["workload"], int(r["threads"])) for r in rows}
    want = {
        (a, w, t)
        for a in ("glibc", "jemalloc")
        for w in ("oltp_ro", "point_select")
        for t in (4, 16)
    }
    assert keys == want and len(rows) == len(want)
    for r in rows:
        assert r["status"] == "ok", r
        assert float(r["qps"]) > 0 and float(r["tps"]) > 0
        p50, p95, p99, mx = (
            float(r[k]) for k in ("lat_p50_ms", "lat_p95_ms", "lat_p99_ms", "lat_max_ms")
        )
        assert p50 <= p95 <= p99 <= mx, r


def test_qps_equals_what_sysbench_printed(smoke_run):
    _, run_dir = smoke_run
    for r in results(run_dir):
        log = run_dir / "logs" / r["cell"] / f"{r['workload']}@{r['threads']}.log"
        m = re.search(r"queries:\s+\d+\s+\(([\d.]+) per sec\.\)", log.read_text())
        assert m, f"no sysbench summary in {log}"
        assert float(r["qps"]) == pytest.approx(float(m.group(1)), rel=1e-3)


def test_contract_columns_are_filled(smoke_run):
    _, run_dir = smoke_run
    must = [
        "rss_start_kb",
        "rss_end_kb",
        "rss_peak_kb",
        "vsz_start_kb",
        "vsz_end_kb",
        "cpu_user_s",
        "cpu_sys_s",
        "ctxsw_voluntary",
        "ctxsw_involuntary",
        "cpu_us_per_op",
        "ctxsw_per_op",
        "server_version",
        "allocator_version",
        "duration_s",
        "lat_p999_ms",
        "bp_read_requests",
    ]
    for r in results(run_dir):
        for k in must:
            assert r[k] != "", f"{k} empty in {r['cell']} {r['workload']}@{r['threads']}"
        assert int(r["rss_peak_kb"]) >= max(int(r["rss_start_kb"]), int(r["rss_end_kb"]))


def test_manifest_cells_are_proven_reconciled_and_warmed_from_cold(smoke_run):
    _, run_dir = smoke_run
    m = manifest(run_dir)
    assert m["status"] == "finished"
    assert [c["allocator"]["name"] for c in m["cells"]] == ["glibc", "jemalloc"]
    for c in m["cells"]:
        assert c["status"] == "ok"
        assert c["exit"]["returncode"] == 0 and c["exit"]["rusage"]["ru_utime"] > 0
        assert c["collectors"]["reconciliation"]["check"] == "passed", c["collectors"][
            "reconciliation"
        ]
        assert c["verification"], "no allocator proof recorded"
        # No allocator may start warmer than another: the buffer pool is read from disk every time.
        assert c["warmup"]["bp_reads_during"] > 0, c["warmup"]
    je = m["cells"][1]["verification"]
    assert "libjemalloc" in str(je)


def test_report_written_and_nothing_left_running(smoke_run):
    _, run_dir = smoke_run
    assert (run_dir / "report.html").stat().st_size > 10_000
    assert (run_dir / "summary.md").exists()
    assert processes_mentioning(str(run_dir)) == []
    assert not any((run_dir / "work").glob("*/datadir")), "cell datadirs must be removed"
