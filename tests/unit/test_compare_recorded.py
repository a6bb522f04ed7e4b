"""Recorded real runs (tests/fixtures/runs/, see its README): the report and compare on real files."""

from __future__ import annotations

import shutil
from pathlib import Path

from analysis.compare import SLOWER, compare_runs
from analysis.report import write_report
from analysis.rundir import load_run

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


def test_two_identical_real_runs_are_not_a_regression(tmp_path):
    cmp = compare_runs(RUNS / "real-smoke-1", RUNS / "real-smoke-2")
    assert cmp.exit_code == 0
    assert not [p for p in cmp.points if p.verdict == SLOWER]
    assert len(cmp.points) == 8
