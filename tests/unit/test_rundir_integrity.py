"""rundir.integrity on every recorded run format: what is the truth of each (cells/ from format 3,
results.csv checked against the manifest for formats 1 and 2 without cells/), what is rebuilt
from it and what is a gap. The command-line cases (exit codes, messages, nothing written) are in
the bad-input corpus (tests/unit/test_bad_input_corpus.py)."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from rundir.atomic import atomic_write_all
from rundir.errors import RunDirError
from rundir.format import COLUMNS_ADDED_IN, FORMAT_VERSION, RESULTS_COLUMNS, results_columns
from rundir.integrity import CELLS_TRUTH, GAP_PREFIX, RESULTS_TRUTH, check_run
from rundir.read import load_run

RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "runs"
REAL = sorted(p for p in RUNS.glob("real-*") if (p / "manifest.json").is_file())
# Recorded runs kept without raw/ to stay small (tests/fixtures/runs/README.md): the check says
# so, and only that.
WITHOUT_RAW = {"real-servers-aa-format5"}


@pytest.mark.parametrize("path", REAL, ids=[p.name for p in REAL])
def test_every_recorded_run_is_complete_and_read_from_its_truth(path):
    found = check_run(path)
    assert (found.gaps, found.repaired) == ([], [])
    if path.name in WITHOUT_RAW:
        assert len(found.notes) == 1 and found.notes[0].startswith("raw/ lacks the raw record")
    else:
        assert found.notes == []
    version = json.loads((path / "manifest.json").read_text())["format_version"]
    # Format 3 keeps cells/ (the truth); the recorded format-1/2 runs dropped them.
    assert found.truth == (CELLS_TRUTH if version >= 3 else RESULTS_TRUTH)
    with (path / "results.csv").open(newline="") as f:
        assert len(found.rows) == len(list(csv.DictReader(f)))


@pytest.mark.parametrize("path", REAL, ids=[p.name for p in REAL])
def test_each_format_declares_the_columns_its_runs_hold(path):
    """rundir.format.results_columns(N) is what a format-N run holds: a format that adds columns
    must list them in COLUMNS_ADDED_IN, or every older run would read as one that lost them."""
    version = json.loads((path / "manifest.json").read_text())["format_version"]
    with (path / "results.csv").open(newline="") as f:
        header = next(csv.reader(f))
    assert set(results_columns(version)) <= set(header)
    assert results_columns(FORMAT_VERSION) == RESULTS_COLUMNS
    assert all(c in RESULTS_COLUMNS for cols in COLUMNS_ADDED_IN.values() for c in cols)


def test_the_churn_fixture_is_an_incomplete_format_3_run(tmp_path):
    """churn-smoke kept manifest.json, results.csv and samples/ only: from format 3 its cell
    records are the truth, so it is refused, and read with what is there when allowed."""
    found = check_run(RUNS / "churn-smoke")
    assert found.gaps and "cells/ is missing" in found.gaps[0]
    with pytest.raises(RunDirError, match=r"incomplete run: cells/ is missing.*--allow-incomplete"):
        load_run(RUNS / "churn-smoke")
    run = load_run(RUNS / "churn-smoke", allow_incomplete=True)
    assert run.notices[0].startswith(GAP_PREFIX) and run.gaps == found.gaps
    assert len(run.rows) == 14  # results.csv's rows, checked against the manifest's levels


def _copy(tmp_path, name) -> Path:
    return shutil.copytree(RUNS / name, tmp_path / name)


def _rewrite(path: Path, fn) -> None:
    with path.open(newline="") as f:
        r = csv.DictReader(f)
        header, rows = list(r.fieldnames), list(r)
    header, rows = fn(header, rows)
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=header, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)


def test_format_3_rebuilds_a_dropped_column_and_keeps_the_figures(tmp_path):
    """The issue's report: results.csv lost qps, cells/ intact: rebuilt, qps as recorded."""
    run_dir = _copy(tmp_path, "real-smoke-format3")
    want = [r["qps"] for r in load_run(run_dir).rows]
    _rewrite(run_dir / "results.csv", lambda h, rows: ([c for c in h if c != "qps"], rows))
    found = check_run(run_dir)
    assert (
        found.gaps == [] and len(found.repaired) == 1 and "lacks column(s) qps" in found.repaired[0]
    )
    run = load_run(run_dir)
    assert [r["qps"] for r in run.rows] == want and all(q > 1000 for q in want)


@pytest.mark.parametrize("name", ["real-smoke-1", "real-smoke-format2"])
def test_formats_1_and_2_cannot_rebuild_so_a_lost_figure_is_a_gap(tmp_path, name):
    run_dir = _copy(tmp_path, name)

    def damage(h, rows):
        rows[2]["qps"] = "fast"
        return h, rows[:-1]  # and the last level's row is gone

    _rewrite(run_dir / "results.csv", damage)
    found = check_run(run_dir)
    assert any("qps 'fast' is not a number" in g for g in found.gaps)
    assert any("has no row for level(s) point_select@16" in g for g in found.gaps)
    run = load_run(run_dir, allow_incomplete=True)
    assert len(run.rows) == 7 and run.rows[2]["qps"] is None  # read as not measured, said first
    assert all(n.startswith(GAP_PREFIX) for n in run.notices[: len(found.gaps)])


def test_a_record_the_manifest_does_not_list_and_a_status_that_disagrees(tmp_path):
    run_dir = _copy(tmp_path, "real-smoke-format3")
    m = json.loads((run_dir / "manifest.json").read_text())
    m["cells"][1]["status"] = "failed"  # the record says ok
    (run_dir / "manifest.json").write_text(json.dumps(m))
    found = check_run(run_dir)
    assert found.gaps == [] and "the record's status was used" in found.repaired[0]
    assert [c["status"] for c in found.manifest["cells"]] == ["ok", "ok"]
    (run_dir / "cells" / "stray.json").write_text(json.dumps({"cell": {"id": "stray"}, "rows": []}))
    assert "does not list" in check_run(run_dir).gaps[0]


def test_a_crash_between_record_and_manifest_reads_the_record(tmp_path):
    """The runner writes the record, then the manifest: an entry still 'running' beside a record
    was cut off by a crash, and the record stands (as --resume sees it). The crash left the run
    "running" (a finished run with a cell still running is damaged: test_issue35_trial2)."""
    run_dir = _copy(tmp_path, "real-smoke-format3")
    m = json.loads((run_dir / "manifest.json").read_text())
    m["status"] = "running"
    m["cells"][1] = {k: m["cells"][1][k] for k in ("id", "index", "round")} | {"status": "running"}
    (run_dir / "manifest.json").write_text(json.dumps(m))
    found = check_run(run_dir)
    assert (found.gaps, found.repaired) == ([], [])
    assert found.manifest["cells"][1]["status"] == "ok" and found.manifest["cells"][1]["levels"]


def test_pending_cells_have_no_record_and_are_no_gap(tmp_path):
    run_dir = _copy(tmp_path, "real-smoke-format3")
    m = json.loads((run_dir / "manifest.json").read_text())
    m["status"] = "interrupted"
    m["cells"][1] = {k: m["cells"][1][k] for k in ("id", "index", "round")} | {"status": "pending"}
    (run_dir / "manifest.json").write_text(json.dumps(m))
    cell = m["cells"][1]["id"]
    for sub in ("cells", "raw"):
        (run_dir / sub / f"{cell}.json").unlink()
    found = check_run(run_dir)
    assert found.gaps == [] and {r["cell"] for r in found.rows} == {m["cells"][0]["id"]}
    # results.csv still held the pending cell's rows: rebuilt without them, said once
    assert len(found.repaired) == 1 and "differs from cells/*.json" in found.repaired[0]


def test_all_or_nothing_write_leaves_nothing_when_the_second_file_fails(tmp_path, monkeypatch):
    import rundir.atomic as atomic

    real = atomic._link_or_move
    calls = []

    def second_fails(tmp, path):
        calls.append(path)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        real(tmp, path)

    monkeypatch.setattr(atomic, "_link_or_move", second_fails)
    with pytest.raises(OSError):
        atomic_write_all([(tmp_path / "a.md", "a"), (tmp_path / "a.html", "b")])
    assert list(tmp_path.iterdir()) == []  # neither file, no temp file
    (tmp_path / "b.html").write_text("taken")
    monkeypatch.setattr(atomic, "_link_or_move", real)
    with pytest.raises(FileExistsError):
        atomic_write_all([(tmp_path / "b.md", "a"), (tmp_path / "b.html", "b")])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.html"]
