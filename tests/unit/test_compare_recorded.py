"""Recorded real runs (tests/fixtures/runs/, see its README): the report and compare on real files."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

from analysis.compare import FAILED_IN_NEW, NO_VERDICT, compare_runs, render_text
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
