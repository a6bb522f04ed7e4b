"""The smoke suite end to end on real MariaDB under two real allocators (issue 3's acceptance)."""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
from pathlib import Path

import pytest

import suites.runner.cell
from rundir.derive.levels import derive_cell
from rundir.format import SAMPLE_COLUMNS
from suites.cli.main import main
from tests.integration.runs_helpers import (
    assert_ctxsw_accounted,
    manifest,
    processes_mentioning,
    results,
    scratch_dir,
)

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]

# The run-directory contract (docs/architecture.md, "The contract"), copied here on purpose: the test fails if the code and the
# contract drift apart, whichever moved.
DESIGN_RESULTS = """server, server_version, allocator, allocator_version, thp, workload,
  threads, repeat, duration_s, tps, qps, lat_avg_ms, lat_p50_ms, lat_p95_ms,
  lat_p99_ms, lat_p999_ms, lat_max_ms, errors, rss_start_kb, rss_end_kb,
  rss_peak_kb, vsz_start_kb, vsz_end_kb, anon_huge_kb, cpu_user_s, cpu_sys_s,
  ctxsw_voluntary, ctxsw_involuntary, cpu_us_per_op, ctxsw_per_op"""
DESIGN_SAMPLES = """t_s, phase, rss_kb, vsz_kb, hwm_kb,
  anon_huge_kb, threads, cpu_user_s, cpu_sys_s, ctxsw_voluntary,
  ctxsw_involuntary"""
THROUGHPUT = ("workload_tps", "workload_qps")  # "plus workload throughput per interval"


RUNS = "runs #1 a\\b"


def _names(text: str) -> list[str]:
    return [n.strip() for n in text.replace("\n", " ").split(",") if n.strip()]


@pytest.fixture(scope="module")
def smoke_run():
    with scratch_dir("ms-run-") as out:
        cache = out / "cache"
        mp = pytest.MonkeyPatch()
        mp.setenv("MALLOCSWEEP_CACHE", str(cache))
        try:
            mp.chdir(out)  # a relative --out, as `make run` gives it
            # with what option files treat specially (comment, escape, blank): a '#' once cut the
            # server's datadir short, and it ran in a directory of the user's
            code = main(["run", str(REPO / "configs/suites/smoke.toml"), "--out", RUNS, "--quiet"])
            run_dir = next((out / RUNS).iterdir())
            yield code, run_dir
            assert sorted(os.listdir(out)) == sorted(["cache", RUNS]), (
                "a server wrote outside --out"
            )
        finally:
            mp.undo()


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


def test_design_contract_columns_present_and_filled(smoke_run):
    """Every results column the contract promises is in results.csv and filled on every ok row;
    every timeline column is in samples/<cell>.csv, with throughput during workload phases."""
    _, run_dir = smoke_run
    rows = results(run_dir)
    assert rows
    for col in _names(DESIGN_RESULTS):
        assert col in rows[0], f"results.csv lacks contract column {col}"
        for r in rows:
            if r["status"] == "ok":
                assert r[col] != "", f"{col} empty in {r['cell']} {r['workload']}@{r['threads']}"
    for c in manifest(run_dir)["cells"]:
        with (run_dir / c["samples_file"]).open() as f:
            samples = list(csv.DictReader(f))
        header = list(samples[0])
        assert header == SAMPLE_COLUMNS
        for col in [*_names(DESIGN_SAMPLES), *THROUGHPUT]:
            assert col in header, f"samples lack contract column {col}"
        for col in _names(DESIGN_SAMPLES):
            if col != "anon_huge_kb":  # read at boundaries only (docs/facts.md, "Reading smaps")
                assert all(r[col] != "" for r in samples), f"{col} has gaps in {c['id']}"
        assert any(r["anon_huge_kb"] != "" for r in samples)
        levels = {f"{w}@{t}" for w in ("oltp_ro", "point_select") for t in (4, 16)}
        for phase in levels:
            qps = [r["workload_qps"] for r in samples if r["phase"] == phase]
            assert qps, f"no sample in {phase}"
            filled = [float(q) for q in qps if q != ""]
            assert filled and all(q > 0 for q in filled), f"{phase}: no throughput {qps}"
        # The first row is the server, not the launch gate (/bin/sh, under 5 MB).
        assert int(samples[0]["rss_kb"]) > 20_000, samples[0]


def test_per_op_figures_cover_the_measured_window(smoke_run):
    _, run_dir = smoke_run
    for r in results(run_dir):
        where = f"{r['cell']} {r['workload']}@{r['threads']}"
        win, ops = float(r["window_s"]), float(r["window_ops"])
        assert 0.5 < win < float(r["duration_s"]), where  # inside the timed run
        cpu = float(r["cpu_user_s"]) + float(r["cpu_sys_s"])
        assert float(r["cpu_us_per_op"]) == pytest.approx(cpu * 1e6 / ops, rel=1e-2, abs=1e-3)
        assert float(r["cpu_s_per_1m_ops"]) == pytest.approx(float(r["cpu_us_per_op"]))
        csw = float(r["ctxsw_voluntary"]) + float(r["ctxsw_involuntary"])
        assert float(r["ctxsw_per_op"]) == pytest.approx(csw / ops, rel=1e-2, abs=1e-4)
        assert float(r["ctxsw_per_1m_ops"]) == pytest.approx(csw * 1e6 / ops, rel=1e-2, abs=1)
        assert float(r["cpu_overhead"]) == pytest.approx(cpu / win, rel=1e-2, abs=1e-3)
        # the window's operations are a part of the level's: never more than the level served
        # over its whole length (no claim that the rate was steady inside the level: it drifts,
        # docs/facts.md, "The machine's noise")
        assert 0 < ops <= float(r["qps"]) * float(r["duration_s"]) * 1.01 + 1, where
        assert r["ctxsw_source"] == "taskstats"
        # all clients connected when the gauge was read (plus our status connection)
        if r["threads_connected"] != "":
            assert int(r["threads_connected"]) >= int(r["threads"]), where
        assert r["thp_fault_fallback"] != ""
    assert any(r["threads_connected"] != "" for r in results(run_dir))


def test_server_start_and_stop_memory_and_thp_counters_in_the_manifest(smoke_run):
    _, run_dir = smoke_run
    for c in manifest(run_dir)["cells"]:
        mem = c["memory"]
        for mark in ("server_start", "server_stop"):
            assert mem[mark]["rss_kb"] > 20_000 and mem[mark]["vsz_kb"] > mem[mark]["rss_kb"]
        assert mem["server_start"]["t_s"] < mem["server_stop"]["t_s"]
        startup = c["collectors"]["phases"]["startup"]
        assert startup["rss_start_kb"] is None or startup["rss_start_kb"] > 20_000
        delta = c["thp"]["vmstat_delta"]
        assert "thp_fault_fallback" in delta and "thp_fault_alloc" in delta
        assert c["ctxsw_source"] == "taskstats"
        for lv in c["levels"]:
            assert lv["window"]["measured"], lv
            assert lv["window"]["window_cpu_s"] <= lv["window"]["phase_cpu_s"]


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
        rec = c["collectors"]["reconciliation"]
        assert_ctxsw_accounted(rec)
        # taskstats' whole-life reading at exit (before the reap) is what the phases add up to.
        assert rec["source"] == "taskstats" and rec["phases_sum_to_final"] is True, rec
        assert c["verification"], "no allocator proof recorded"
        # No allocator may start warmer than another: the buffer pool is read from disk every time.
        assert c["warmup"]["bp_reads_during"] > 0, c["warmup"]
        # The allocator's own accounting answered at every phase boundary, though the run's path
        # holds spaces, which LD_PRELOAD cannot carry (each missed reading waited out 10 s).
        am = c["alloc_memory"]
        assert am["errors"] == [] and len(am["readings"]) >= 6, am["errors"][:1]
    je = m["cells"][1]["verification"]
    assert "libjemalloc" in str(je)


def test_report_written_and_nothing_left_running(smoke_run):
    _, run_dir = smoke_run
    assert (run_dir / "report.html").stat().st_size > 10_000
    assert (run_dir / "summary.md").exists()
    assert processes_mentioning(str(run_dir)) == []
    assert not any((run_dir / "work").glob("*/datadir")), "cell datadirs must be removed"


def test_rederive_gives_back_the_runs_results_rows(smoke_run, tmp_path, capsys):
    # The runner derived each cell's rows from the raw record it wrote; `report --rederive` runs
    # the same derivation on that record again and must give the same rows, byte for byte.
    _, run_dir = smoke_run
    copy = shutil.copytree(run_dir, tmp_path / "run", ignore=shutil.ignore_patterns("work"))
    before = (copy / "results.csv").read_bytes()
    raw = {p.name: p.read_bytes() for p in (copy / "raw").iterdir()}
    assert len(raw) == 2
    assert main(["report", str(copy), "--rederive", "--baseline", "glibc"]) == 0
    said = [x for x in capsys.readouterr().out.splitlines() if x.startswith("rederive: ")]
    assert len(said) == 2 and all(x.endswith(": derived: 4 row(s), 0 changed") for x in said)
    assert (copy / "results.csv").read_bytes() == before
    assert {p.name: p.read_bytes() for p in (copy / "raw").iterdir()} == raw


def test_a_broken_derivation_fails_one_cell_not_the_run(smoke_run, monkeypatch, capsys):
    # A derivation that fails on one cell of a real run fails that cell's figures only: the
    # other cell is derived and recorded, the run ends with the failed-cell exit code (3, never
    # the internal-error 4), and `report --rederive` with a working derivation gives the cell its
    # rows. The smoke run's dataset cache (MALLOCSWEEP_CACHE, set by its fixture) is reused.
    with scratch_dir("ms-derive-") as out:
        calls = []

        def broken_for_the_first_cell(raw):
            calls.append(raw["cell"])
            if len(calls) == 1:
                raise KeyError("window_marks")
            return derive_cell(raw)

        monkeypatch.setattr(suites.runner.cell, "derive_cell", broken_for_the_first_cell)
        # Smoke-size: two cells (glibc, jemalloc), one 3-second level each, a short warmup.
        code = main(
            [
                "run",
                str(REPO / "configs/suites/smoke.toml"),
                "--allocators", "glibc,jemalloc",
                "--threads", "4",
                "--duration", "3",
                "--warmup", "1",
                "--out", str(out / "runs"),
                "--quiet",
                "--no-report",
            ]
        )  # fmt: skip
        assert code == 3  # a failed cell, not an internal error
        run_dir = next((out / "runs").iterdir())
        manifest = json.loads((run_dir / "manifest.json").read_text())
        first, second = manifest["cells"]
        assert calls == [first["id"], second["id"]]
        assert first["status"] == "failed" and first["derive_error"] == "KeyError: 'window_marks'"
        assert "--rederive" in first["error"]
        assert second["status"] == "ok" and second.get("derive_error") is None
        with (run_dir / "results.csv").open() as f:
            rows = list(csv.DictReader(f))
        assert {r["cell"] for r in rows} == {second["id"]} and len(rows) == 2
        # The failed cell kept what it observed; a working derivation gives it its rows.
        monkeypatch.undo()
        assert (run_dir / "raw" / f"{first['id']}.json").is_file()
        assert main(["report", str(run_dir), "--rederive"]) == 0
        said = capsys.readouterr().out
        assert f"rederive: {first['id']}: derived: 2 row(s), 2 changed" in said
        with (run_dir / "results.csv").open() as f:
            rows = list(csv.DictReader(f))
        assert [r["cell"] for r in rows] == [first["id"]] * 2 + [second["id"]] * 2
        assert all(r["status"] == "ok" and float(r["window_s"]) > 0 for r in rows)
