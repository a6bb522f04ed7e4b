"""A damaged run directory is read from its source of truth (cells/*.json) or refused naming the
file: never a silently smaller table, never exit 4 with a Python exception text."""

from __future__ import annotations

import json
import shutil
from collections import defaultdict
from pathlib import Path

import pytest

from rundir.errors import RunDirError
from rundir.format import CELLS_DIR, RESULTS
from rundir.read import load_run
from rundir.write import RunDir
from suites.cli.main import main
from tests.fixtures.make_runs import make_run


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    """A synthetic run with cell records and a results.csv, both written by the real writer."""
    root = tmp_path_factory.mktemp("damage")
    path = make_run(root, "synthetic-cells", seed=5, allocators=("glibc", "jemalloc"))
    run = load_run(path)
    by_cell = defaultdict(list)
    for r in run.rows:
        by_cell[r["cell"]].append(r)
    rd = RunDir(path)
    shutil.rmtree(path / CELLS_DIR)  # make_run's own records, written again by the real writer
    (path / CELLS_DIR).mkdir()
    for cell in run.cells.values():
        rd.write_cell(cell, by_cell[cell["id"]])
    rd.rebuild_results()
    return path


@pytest.fixture
def run_dir(pristine, tmp_path) -> Path:
    copy = tmp_path / pristine.name
    shutil.copytree(pristine, copy)
    return copy


def _full(pristine) -> list[tuple]:
    return [(r["cell"], r["workload"], r["threads"], r["qps"]) for r in load_run(pristine).rows]


def test_an_intact_run_reads_without_notice(pristine):
    run = load_run(pristine)
    assert run.notices == [] and len(run.rows) == 2 * 2 * 4


@pytest.mark.parametrize(
    "damage, said",
    [
        (lambda f: f.write_text(f.read_text()[: len(f.read_text()) // 2]), "results.csv "),
        (lambda f: f.unlink(), "is missing"),
        (lambda f: f.write_bytes(b"\xff\xfe\x00garbage\x81" * 50), "is damaged"),
        (lambda f: f.write_text("cell,qps\n"), "is damaged"),
        (lambda f: f.write_text(f.read_text().replace(",ok,", ",ok,,", 1)), "is damaged"),
    ],
    ids=["truncated", "missing", "undecodable", "wrong-header", "extra-field"],
)
def test_damaged_results_csv_is_rebuilt_from_cells_with_a_notice(pristine, run_dir, damage, said):
    damage(run_dir / RESULTS)
    before = (run_dir / RESULTS).read_bytes() if (run_dir / RESULTS).exists() else None
    run = load_run(run_dir)
    rows = [(r["cell"], r["workload"], r["threads"], r["qps"]) for r in run.rows]
    assert rows == _full(pristine)
    assert len(run.notices) == 1 and said in run.notices[0] and "cells/*.json" in run.notices[0]
    # the user's evidence is left as it was
    after = (run_dir / RESULTS).read_bytes() if (run_dir / RESULTS).exists() else None
    assert after == before


def test_a_changed_figure_is_rebuilt_not_believed(pristine, run_dir):
    f = run_dir / RESULTS
    lines = f.read_text().splitlines()
    cols = lines[0].split(",")
    i = cols.index("qps")
    first = lines[1].split(",")
    first[i] = str(float(first[i]) * 10)  # a "fastest" allocator that never was
    f.write_text("\n".join([lines[0], ",".join(first), *lines[2:]]) + "\n")
    run = load_run(run_dir)
    assert run.notices and max(r["qps"] for r in run.rows) == max(q for *_, q in _full(pristine))


def test_rows_of_a_cell_without_record_are_an_error(run_dir):
    victim = next((run_dir / CELLS_DIR).glob("*.json"))
    victim.unlink()
    with pytest.raises(RunDirError, match=rf"incomplete run: cells/{victim.stem}\.json is missing"):
        load_run(run_dir)
    # Allowed: read anyway, its rows from results.csv, the gap said first.
    run = load_run(run_dir, allow_incomplete=True)
    assert (
        run.gaps and run.notices[0].startswith("INCOMPLETE RUN") and victim.stem in run.notices[0]
    )
    assert {r["cell"] for r in run.rows} == set(run.cells)


def test_a_damaged_cell_record_is_named(run_dir):
    victim = sorted((run_dir / CELLS_DIR).glob("*.json"))[1]
    victim.write_text(victim.read_text()[:100])
    with pytest.raises(RunDirError, match=rf"{run_dir}: incomplete run: cells/{victim.name} "):
        load_run(run_dir)
    victim.write_text(json.dumps({"cell": 1}))
    with pytest.raises(RunDirError, match="not a cell record"):
        load_run(run_dir)


@pytest.mark.parametrize(
    "garbage",
    [b"\x00\xff\xfe\x81" * 64, b"hello world\nthis is not a timeline\n", b"t_s,phase\nx,warmup\n"],
    ids=["binary", "text", "no-numbers"],
)
def test_garbage_samples_exit_2_naming_the_file(run_dir, capsys, garbage):
    samples = sorted((run_dir / "samples").glob("*.csv"))[0]
    samples.write_bytes(garbage)
    assert main(["report", str(run_dir)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.splitlines() == [err] and str(samples) in err and "internal error" not in err


def test_report_and_compare_say_what_they_rebuilt(pristine, run_dir, tmp_path, capsys):
    (run_dir / RESULTS).write_text("garbage\n")
    assert main(["report", str(run_dir)]) == 0
    err = capsys.readouterr().err
    assert f"{run_dir / RESULTS} is damaged" in err and "rebuilt" in err
    other = make_run(tmp_path, "synthetic-other", seed=6, allocators=("glibc", "jemalloc"))
    code = main(["compare", str(other), str(run_dir), "--out", str(tmp_path / "cmp")])
    captured = capsys.readouterr()
    assert code in (0, 1) and "rebuilt from cells/*.json" in captured.out + captured.err
