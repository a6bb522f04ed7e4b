"""A derivation that fails on one cell of a real run fails that cell's figures only: the other
cells are derived and recorded, the run finishes with the failed-cell exit code (3, never the
internal-error 4), and `report --rederive` with a working derivation gives the cell its rows."""

from __future__ import annotations

import csv
import json
import shutil
import tempfile
from pathlib import Path

import pytest

import suites.cell
from rundir.derive.levels import derive_cell
from suites.cli import main

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def test_a_broken_derivation_fails_one_cell_not_the_run(monkeypatch, capsys):
    out = Path(tempfile.mkdtemp(prefix="ms-derive-", dir="/tmp"))
    monkeypatch.setenv("MALLOCSWEEP_CACHE", str(out / "cache"))
    calls = []

    def broken_for_the_first_cell(raw):
        calls.append(raw["cell"])
        if len(calls) == 1:
            raise KeyError("window_marks")
        return derive_cell(raw)

    monkeypatch.setattr(suites.cell, "derive_cell", broken_for_the_first_cell)
    try:
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
    finally:
        shutil.rmtree(out, ignore_errors=True)
