"""Loading run directories: typed rows, display order, and one-line errors for bad input."""

from __future__ import annotations

import csv
import json
import shutil

import pytest
from fixtures.make_runs import make_run

from rundir.errors import RunDirError
from rundir.format import FORMAT_VERSION
from rundir.read import load_run


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    return {
        "plain": make_run(root, "synthetic-plain", seed=1),
        "failed": make_run(
            root,
            "synthetic-failed",
            seed=2,
            failed_cells=("tcmalloc",),
            failed_levels=("oltp_ro@16",),
        ),
    }


def test_rows_are_typed_and_equal_results_csv(runs):
    run = load_run(runs["plain"])
    with (runs["plain"] / "results.csv").open() as f:
        raw = list(csv.DictReader(f))
    assert len(run.rows) == len(raw) == 3 * 2 * 4
    for typed, text in zip(run.rows, raw, strict=True):
        assert typed["threads"] == int(text["threads"])
        assert typed["qps"] == float(text["qps"])
        assert typed["bp_reads"] is None  # empty string = not measured


def test_display_order_puts_glibc_first(runs):
    run = load_run(runs["plain"])
    assert run.allocators == ["glibc", "jemalloc", "tcmalloc"]
    assert run.workloads == ["oltp_ro", "point_select"]
    assert run.threads("oltp_ro") == [8, 16, 32, 64]
    assert run.kind == "sysbench"
    assert run.repeats == 1


def test_interval_rates_come_from_the_level_phase(runs):
    run = load_run(runs["plain"])
    cell = next(iter(run.cells))
    rates = run.interval_rates(cell, "oltp_ro", 8)
    row = next(
        r
        for r in run.rows
        if r["cell"] == cell and r["workload"] == "oltp_ro" and r["threads"] == 8
    )
    assert len(rates) == 12
    assert sum(rates) / len(rates) == pytest.approx(row["qps"], rel=1e-3)


def test_failed_cells_and_levels_still_load(runs):
    run = load_run(runs["failed"])
    assert "tcmalloc" in run.allocators  # named in the manifest even without rows
    assert all(r["allocator"] != "tcmalloc" for r in run.rows)
    assert {(r["workload"], r["threads"]) for r in run.rows if r["status"] == "failed"} == {
        ("oltp_ro", 16)
    }
    assert all(r["status"] == "ok" for r in run.ok_rows)


def test_not_a_directory(tmp_path):
    with pytest.raises(RunDirError, match="does not exist"):
        load_run(tmp_path / "nope")
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(RunDirError, match="not a directory"):
        load_run(f)


def test_not_a_run(tmp_path):
    with pytest.raises(RunDirError, match="not a mallocsweep run directory"):
        load_run(tmp_path)


def test_damaged_manifest(tmp_path):
    (tmp_path / "manifest.json").write_text("{not json")
    with pytest.raises(RunDirError, match="not valid JSON"):
        load_run(tmp_path)


@pytest.mark.parametrize("version", [FORMAT_VERSION + 1, 99])
def test_newer_format_is_refused(tmp_path, version):
    path = make_run(tmp_path, "synthetic-future", format_version=version)
    with pytest.raises(RunDirError, match="newer mallocsweep") as e:
        load_run(path)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("version", [0, "1", None])
def test_bad_format_version(tmp_path, version):
    (tmp_path / "manifest.json").write_text(json.dumps({"format_version": version}))
    with pytest.raises(RunDirError, match="format_version"):
        load_run(tmp_path)


def test_results_missing_columns(tmp_path):
    # Without cell records (format 1) nothing can stand in for the lost columns: refused.
    path = make_run(tmp_path, "synthetic-cols", legacy=True)
    (path / "results.csv").write_text("cell,server\nx,y\n")
    with pytest.raises(RunDirError, match=r"results\.csv is damaged \(no column\(s\) allocator"):
        load_run(path)
    # With them (format 3) the results are rebuilt from the records, and the run says so.
    path = make_run(tmp_path, "synthetic-cols-3")
    (path / "results.csv").write_text("cell,server\nx,y\n")
    run = load_run(path)
    assert len(run.rows) == 24 and "rebuilt from cells/*.json" in run.notices[0]


def test_running_run_without_results(tmp_path):
    path = make_run(tmp_path, "synthetic-running")
    m = json.loads((path / "manifest.json").read_text())
    m["status"] = "running"
    for c in m["cells"]:
        c["status"] = "pending"  # nothing finished yet: no cell record, no results
    (path / "manifest.json").write_text(json.dumps(m))
    shutil.rmtree(path / "cells")
    (path / "results.csv").unlink()
    run = load_run(path)
    assert run.rows == []
    assert run.servers == []


def test_host_aliases_are_normalised(tmp_path):
    path = make_run(tmp_path, "synthetic-alias")
    m = json.loads((path / "manifest.json").read_text())
    host = m["host"]
    host["cpu_count"], host["glibc_version"], host["cpu_governor"] = (
        host.pop("cores"),
        host.pop("glibc"),
        "performance",
    )
    host.pop("governor")
    (path / "manifest.json").write_text(json.dumps(m))
    run = load_run(path)
    assert (run.host["cores"], run.host["glibc"], run.host["governor"]) == (
        2,
        "2.36",
        "performance",
    )


def test_a_running_soak_says_where_its_cycles_are(tmp_path):
    """A soak's cells end only when its hours do: its report meanwhile says how far it is and
    where the cycles are, not 'no level finished'."""
    from analysis.report import warnings

    path = make_run(tmp_path, "synthetic-running-soak")
    m = json.loads((path / "manifest.json").read_text())
    m["status"] = "running"
    m["soak"] = {"seconds": 7200.0, "done_s": 1800.0}
    for c in m["cells"]:
        c["status"] = "running"
    (path / "manifest.json").write_text(json.dumps(m))
    shutil.rmtree(path / "cells")
    (path / "results.csv").unlink()
    said = " ".join(warnings(load_run(path)))
    assert "A soak is running (0.50 of 2.00 h at its last checkpoint)" in said
    assert "No level finished" not in said
