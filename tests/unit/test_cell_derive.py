"""A cell derives its rows from the raw record it wrote, and a derivation that fails fails that
cell's figures only: recorded with the reason, the raw record kept for `report --rederive`.

The server is a real process (`sleep`), so the collectors attach, sample and mark for real; the
workload is a stand-in that reports intervals (no database needed for what is tested here).
"""

from __future__ import annotations

import json
import subprocess
import time
from types import SimpleNamespace as NS

import pytest

import suites.runner.cell
from rundir.derive.levels import derive_cell
from rundir.records import check_raw
from rundir.rederive import DERIVED, rederive_run
from rundir.write import RunDir
from suites.runner.cell import CellContext, CellRunner
from suites.runner.plan import CellPlan
from suites.workloads.level_result import LevelResult


class SleepServer:
    def __init__(self):
        self.proc, self.evidence = None, {"verdict": "test"}

    def start(self, on_spawn, timeout_s, before_reap=None):
        self.proc = subprocess.Popen(["sleep", "30"])
        on_spawn(self.proc.pid)
        return self.proc.pid

    def to_manifest(self):
        return {"flavor": "test"}

    @property
    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout_s=30):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        return None


class ReportingCell(CellRunner):
    """One level that reports four 0.1 s intervals, bracketed like iibench's (t=0 and the end)."""

    def make_server(self, thp_disable):
        return SleepServer()

    def prepare_datadir(self):
        return {"method": "empty"}

    def level_clock(self):
        return None, 0.1, True

    def workload_phases(self):
        def run():
            for i in range(4):
                self.on_interval(i * 0.1, 10.0, 100.0 if i else 0.0)
                if i < 3:
                    time.sleep(0.1)  # the load between two reports
            return LevelResult(
                workload="stand-in", threads=2, duration_s=0.3, events=30, tps=10.0, qps=100.0
            )

        yield "stand-in@2", run


def _run_cell(tmp_path, index=0, allocator="glibc"):
    if (tmp_path / "run").exists():
        rd = RunDir(tmp_path / "run")
    else:
        rd = RunDir.create(tmp_path, "run")
        rd.write_manifest({"run_id": "run", "status": "running", "cells": []})
    plan = CellPlan(index=index, round=1, server_label="sleep", allocator=allocator, thp="system")
    applied = NS(thp_disable=False, to_manifest=lambda: {"requested": "system"})
    suite = NS(
        collect=NS(sample_interval_s=0.05, smaps_interval_s=0, perf=False),
        server=NS(startup_timeout_s=5),
        memory=NS(idle_s=0.0, parts=True),  # no idle phase after the load; RSS taken apart
    )
    ctx = CellContext(
        suite=suite,
        plan=plan,
        run_dir=rd,
        server_binary=NS(flavor="test", version="1"),
        allocator=NS(name=allocator, version="1.0", to_manifest=lambda: {"name": allocator}),
        thp=NS(apply=lambda mode: applied),
        dataset=None,
    )
    outcome = ReportingCell(ctx).run()
    rd.write_cell(outcome.record, outcome.rows)
    m = rd.read_manifest()  # as the runner does: the manifest lists the cell it recorded
    m["cells"] = [c for c in m["cells"] if c["id"] != plan.id] + [outcome.record]
    rd.write_manifest(m)
    return rd, plan, outcome


def test_rows_are_derived_from_the_raw_record_the_cell_wrote(tmp_path):
    rd, plan, outcome = _run_cell(tmp_path)
    assert outcome.record["status"] == "ok", outcome.record["error"]
    raw = json.loads(rd.raw_file(plan.id).read_text())
    check_raw(raw, "raw")
    assert [lv["phase"] for lv in raw["levels"]] == ["stand-in@2"]
    assert len(raw["levels"][0]["intervals"]) == 4
    assert {"startup", "warmup", "stand-in@2", "shutdown"} <= set(raw["phases"])
    assert len(raw["phases"]["stand-in@2"]["marks"]) >= 4  # one per report, periodic ones too
    # The rows are exactly what the pure derivation gives on the record as written.
    assert outcome.rows == derive_cell(raw).rows
    (row,) = outcome.rows
    assert row["cell"] == plan.id and row["allocator"] == "glibc" and row["qps"] == 100.0
    assert row["window_s"] > 0 and row["window_ops"] > 0
    assert outcome.record["levels"][0]["window"]["measured"] is True
    # RSS taken apart at the level's end boundary, in the raw record and its row: the parts add up
    # to the RSS read at that boundary (within 1%: two reads of a live process)
    parts = raw["phases"]["stand-in@2"]["end"]["snap"]["parts"]
    assert parts and parts["heap"]["rss_kb"] == row["heap_resident_kb"]
    summed = sum(
        row[k] for k in ("heap_resident_kb", "bufpool_resident_kb", "stacks_kb", "file_kb")
    )
    assert abs(summed - row["rss_end_kb"]) <= row["rss_end_kb"] / 100
    # --rederive on the untouched run derives the same rows (nothing changed).
    (again,) = rederive_run(rd.path)
    assert (again.outcome, again.changed) == (DERIVED, 0)


def test_a_failing_derivation_fails_that_cells_figures_only(tmp_path, monkeypatch):
    def broken(raw):
        raise ZeroDivisionError("float division by zero\nsecond line")

    monkeypatch.setattr(suites.runner.cell, "derive_cell", broken)
    rd, plan, outcome = _run_cell(tmp_path)  # no exception reaches the caller (the matrix)
    assert outcome.rows == []
    rec = outcome.record
    assert rec["status"] == "failed"
    assert rec["derive_error"] == "ZeroDivisionError: float division by zero"
    assert "--rederive" in rec["error"] and "\n" not in rec["error"]
    raw_bytes = rd.raw_file(plan.id).read_bytes()
    # The next cell of the matrix derives normally.
    monkeypatch.undo()
    _, plan2, outcome2 = _run_cell(tmp_path, index=1, allocator="jemalloc")
    assert outcome2.record["status"] == "ok" and len(outcome2.rows) == 1
    # After the fix, --rederive gives the failed cell its rows from what it had observed.
    outcomes = {o.cell: o for o in rederive_run(rd.path)}
    assert outcomes[plan.id].outcome == DERIVED and outcomes[plan.id].rows == 1
    assert outcomes[plan2.id].changed == 0
    assert rd.raw_file(plan.id).read_bytes() == raw_bytes  # raw records never rewritten
    with (rd.path / "results.csv").open() as f:
        cells = [line.split(",")[0] for line in f.read().splitlines()[1:]]
    assert cells == [plan.id, plan2.id]


@pytest.mark.parametrize("damage", ["not json", '{"raw_version": 1}', '{"raw_version": 99}'])
def test_a_damaged_raw_record_keeps_the_recorded_figures(tmp_path, damage):
    rd, plan, outcome = _run_cell(tmp_path)
    before = (rd.path / "results.csv").read_bytes() if (rd.path / "results.csv").exists() else None
    rd.raw_file(plan.id).chmod(0o644)
    rd.raw_file(plan.id).write_text(damage)
    (o,) = rederive_run(rd.path)
    assert o.outcome == "kept" and "keeps its figures" in o.note and "\n" not in o.line()
    assert not rd.derived_file(plan.id).exists()
    after = (rd.path / "results.csv").read_bytes() if (rd.path / "results.csv").exists() else None
    assert after == before


def test_rederive_that_cannot_write_is_a_one_line_error(tmp_path, capsys):
    from suites.cli.main import main

    rd, plan, _ = _run_cell(tmp_path)
    raw = rd.raw_file(plan.id).read_bytes()
    (rd.path / "derived").write_text("a file where the derived/ directory goes\n")
    assert main(["report", str(rd.path), "--rederive"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot write the re-derived figures" in err[0], err
    assert "derived" in err[0] and "Traceback" not in err[0]
    assert rd.raw_file(plan.id).read_bytes() == raw
