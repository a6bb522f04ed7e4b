"""A recorded alternate run (tests/fixtures/runs/real-alternate-aa: glibc and glibc-aa in blocks,
three rounds, record/record-alternate-aa.sh) and older runs beside it: the design read from the
manifest, verdicts.csv and the report saying it, the verdict following from the recorded pairs,
a rederive reproducing the blocked rows, and compare warning when the designs differ. Older runs
(no run_design: formats 1-5) read, report and compare as solo."""

from __future__ import annotations

import csv
import io
import json
import math
import shutil
import statistics
from pathlib import Path

import pytest

from analysis import cell_tables, run_design
from analysis.compare import compare_runs
from analysis.report import verdicts_text, write_report
from rundir.derive.blocks import pair_log_ratios
from rundir.derive.levels import derive_cell
from rundir.read import load_run

RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "runs"
ALT = RUNS / "real-alternate-aa"
FORMAT5 = RUNS / "real-servers-aa-format5"
FRAGMENTATION5 = RUNS / "real-fragmentation-format5"
SOLO = RUNS / "real-regress-base-a"  # format 1: glibc, POINT_SELECT@4, as the fixture's level


def _verdicts(run) -> list[dict]:
    return list(csv.DictReader(io.StringIO(verdicts_text(run))))


def test_the_recorded_alternate_run_says_its_design():
    run = load_run(ALT)
    assert run_design.name(run.manifest) == "alternate"
    rows = _verdicts(run)
    assert rows and {r["design"] for r in rows} == {"alternate"}
    assert dict(cell_tables.metadata(run))["design"].startswith("alternate: ")


def test_its_verdict_is_the_rounds_mean_log_pair_ratio():
    run = load_run(ALT)
    raw = {p.stem: json.loads(p.read_text()) for p in (ALT / "raw").glob("*.json")}
    by_round: dict[int, dict[str, list]] = {}
    for c in run.manifest["cells"]:
        (level,) = raw[c["id"]]["levels"]
        by_round.setdefault(c["round"], {})[c["allocator"]["name"]] = level["blocks"]
    per_round = [
        statistics.fmean(pair_log_ratios(arms["glibc"], arms["glibc-aa"]))
        for arms in by_round.values()
    ]
    (tp,) = [r for r in _verdicts(run) if r["metric"] == "throughput"]
    assert int(tp["rounds"]) == len(per_round) == 3
    assert float(tp["ratio"]) == pytest.approx(math.exp(statistics.fmean(per_round)), rel=2e-3)


def test_a_rederive_reproduces_the_blocked_rows():
    for p in (ALT / "cells").glob("*.json"):
        rec = json.loads(p.read_text())
        raw = json.loads((ALT / "raw" / p.name).read_text())
        (row,) = derive_cell(raw).rows
        (kept,) = rec["rows"]
        assert row["steady_qps"] == kept["steady_qps"] and row["steady_qps"] > 0
        assert row["cpu_us_per_op"] is None and row["qps"] == kept["qps"]


def test_report_of_the_alternate_run(tmp_path):
    run_dir = tmp_path / ALT.name
    shutil.copytree(ALT, run_dir)
    write_report(run_dir)
    assert "alternate: a round's servers alive together" in (run_dir / "summary.md").read_text()
    assert "alternate" in (run_dir / "report.html").read_text()


def test_older_runs_read_as_solo():
    for d in (FORMAT5, FRAGMENTATION5, SOLO):
        run = load_run(d)
        assert run_design.name(run.manifest) == "solo"
        assert dict(cell_tables.metadata(run))["design"].startswith("solo")
        rows = _verdicts(run)
        assert {r["design"] for r in rows} == ({"solo"} if rows else set())
        if d != SOLO:  # (glibc alone: no allocator to judge)
            assert rows


def test_compare_across_designs_says_so():
    cmp = compare_runs(SOLO, ALT)
    said = [w for w in cmp.warnings if w.startswith("design differs")]
    assert len(said) == 1 and "solo" in said[0] and "alternate" in said[0]
    # the suite's own keys of the design are said in that line, not one by one
    assert not [w for w in cmp.warnings if "run.design" in w or "run.block" in w]
