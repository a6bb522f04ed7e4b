"""Recorded real runs (tests/fixtures/runs/, see its README): the report and compare on real files."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from analysis.compare import (
    FAILED_IN_NEW,
    NO_CHANGE,
    NO_VERDICT,
    POSSIBLY_SLOWER,
    compare_runs,
)
from analysis.compare_output import render_text
from analysis.report import write_report
from rundir.read import load_run

RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "runs"


def test_recorded_runs_load_with_every_level():
    run = load_run(RUNS / "real-smoke-1")
    assert run.allocators == ["glibc", "jemalloc"]
    assert run.workloads == ["oltp_ro", "point_select"]
    assert run.threads("oltp_ro") == [4, 16]
    assert len(run.ok_rows) == 8
    assert run.host["cores"] and run.host["glibc"]


def test_report_on_a_recorded_run(tmp_path):
    copy = shutil.copytree(RUNS / "real-smoke-1", tmp_path / "real")
    html, md = write_report(copy)
    page = html.read_text()
    for name in ("glibc", "jemalloc", "oltp_ro", "point_select", "verified"):
        assert name in page
    assert "http://" not in page and "https://" not in page
    assert "| glibc |" in md.read_text()


def test_two_identical_real_smoke_runs_cannot_be_judged(tmp_path):
    """3-second levels, one run per side: the real runs differ by -24%..+33% per point although
    nothing changed, and each level has only 3 one-second intervals. Any verdict would be noise,
    so there is none — and the exit code says nothing could be checked (2), not "fine" (0)."""
    cmp = compare_runs(RUNS / "real-smoke-1", RUNS / "real-smoke-2", allow_weak=True)
    assert len(cmp.points) == 8
    assert all(p.verdict == NO_VERDICT and p.evidence == "none" for p in cmp.points)
    changes = [abs(p.change_pct) for p in cmp.points]
    assert max(changes) > 20  # the real run-to-run spread that a single run cannot see
    assert not cmp.regressions and cmp.exit_code == 2
    assert "NO VERDICT" in render_text(cmp)


def _smoke_copy(tmp_path, mutate) -> Path:
    copy = shutil.copytree(RUNS / "real-smoke-2", tmp_path / "real-smoke-2-changed")
    with (copy / "results.csv").open() as f:
        rows = list(csv.DictReader(f))
        cols = list(rows[0])
    m = json.loads((copy / "manifest.json").read_text())
    rows = mutate(rows, m)
    (copy / "manifest.json").write_text(json.dumps(m))
    with (copy / "results.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        w.writerows(rows)
    return copy


def test_real_levels_failing_in_new_are_a_regression(tmp_path):
    """The audit's reproduction: jemalloc's levels marked failed in a copy of the second run."""

    def fail_jemalloc_levels(rows, m):
        for r in rows:
            if r["allocator"] == "jemalloc":
                r["status"], r["error"] = "failed", "sysbench: FATAL: connection lost"
        return rows

    cmp = compare_runs(RUNS / "real-smoke-1", _smoke_copy(tmp_path, fail_jemalloc_levels))
    failed = [p for p in cmp.points if p.verdict == FAILED_IN_NEW]
    assert {p.allocator for p in failed} == {"jemalloc"} and len(failed) == 4
    assert all(p.regression and "connection lost" in p.note for p in failed)
    assert cmp.exit_code == 1


def test_real_server_crash_in_new_is_a_regression(tmp_path):
    """jemalloc's server died before its first level: the cell failed and left no rows at all."""

    def crash_jemalloc(rows, m):
        for c in m["cells"]:
            if c["allocator"]["name"] == "jemalloc":
                c["status"], c["error"] = "failed", "server died during warmup: signal 11"
                c["server"] = {}  # as a cell that failed early records it: no label
        return [r for r in rows if r["allocator"] != "jemalloc"]

    cmp = compare_runs(RUNS / "real-smoke-1", _smoke_copy(tmp_path, crash_jemalloc))
    failed = [p for p in cmp.points if p.verdict == FAILED_IN_NEW]
    assert len(failed) == 4 and all("signal 11" in p.note for p in failed)
    assert cmp.exit_code == 1
    assert not cmp.unmatched["base_only"]


def _churn_scaled(tmp_path, factor: float) -> Path:
    """churn-smoke with every throughput of its timeline and results scaled by `factor`, passed
    off as another run (its own run id and server pids: compare refuses a run compared with a
    copy of itself)."""
    copy = shutil.copytree(RUNS / "churn-smoke", tmp_path / f"churn-smoke-x{factor}")
    for path, cols in [(copy / "results.csv", ("qps", "tps"))] + [
        (p, ("workload_qps", "workload_tps")) for p in (copy / "samples").iterdir()
    ]:
        with path.open(newline="") as f:
            rows = list(csv.DictReader(f))
            header = list(rows[0])
        for r in rows:
            for c in cols:
                if r.get(c):
                    r[c] = repr(float(r[c]) * factor)
        with path.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=header)
            w.writeheader()
            w.writerows(rows)
    m = json.loads((copy / "manifest.json").read_text())
    m["run_id"] = copy.name
    for c in m["cells"]:
        c["verification"]["pid"] += 1
    (copy / "manifest.json").write_text(json.dumps(m))
    return copy


def test_a_single_churn_life_compares_on_its_cycles_intervals(tmp_path):
    """A thread-churn life visits each level once per cycle, each visit a phase of its own
    ("point_select@4#c2/tc2", suites.workloads.sysbench.churn). The single-run compare once looked only for the plain
    "point_select@4" phase, found no interval at all and gave every churn point "no verdict"
    (blaming levels too short). Every visit's intervals, each visit's ramp-up dropped, are the
    life's series now: weak evidence, as for any single run."""
    # churn-smoke keeps no cells/ (an incomplete format-3 run): read with what is there
    run = load_run(RUNS / "churn-smoke", allow_incomplete=True)
    cell = next(c for c in run.cells if "__glibc__" in c)
    assert run.interval_rates(cell, "point_select", 4) == []  # no plain level phase
    visits = run.level_visits(cell, "point_select", 4)
    assert len(visits) == 4 and all(len(v) >= 4 for v in visits)  # cycles 1-3 + the closing one
    assert len(run.level_visits(cell, "point_select", 48)) == 3
    same = compare_runs(
        RUNS / "churn-smoke", _churn_scaled(tmp_path, 1.001), allow_weak=True, allow_incomplete=True
    )
    assert len(same.points) == 4
    assert all(p.evidence == "1 run per side: 5+5 batch means (weak)" for p in same.points)
    assert all(p.lo < 1 < p.hi and p.verdict == NO_CHANGE for p in same.points)
    # The evidence can tell: the same life with its throughput halved is possibly slower.
    halved = compare_runs(
        RUNS / "churn-smoke", _churn_scaled(tmp_path, 0.5), allow_weak=True, allow_incomplete=True
    )
    assert all(p.ratio == pytest.approx(0.5) and p.hi < 1 for p in halved.points)
    assert all(p.verdict == POSSIBLY_SLOWER and p.regression for p in halved.points)
