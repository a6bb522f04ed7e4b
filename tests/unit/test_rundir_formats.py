"""Every run format mallocsweep ever wrote stays readable, reportable and comparable.

tests/fixtures/runs/real-* were written by the format-1 code (some before measured windows
existed, some after: same format number, different meaning of the cpu/ctxsw columns) and are kept
unchanged on disk; format-2 runs come from today's writer (recorded: real-smoke-format2, and
synthetic ones from make_runs).
"""

from __future__ import annotations

import csv
import json
import os
import shutil
from pathlib import Path

import pytest
from fixtures.make_runs import make_run

from analysis.compare import compare_runs
from analysis.report import render
from rundir.atomic import atomic_write
from rundir.errors import RunDirError
from rundir.format import (
    FORMAT6_ADDED_COLUMNS,
    FORMAT_VERSION,
    HISTORY,
    RESULTS_COLUMNS,
    SPAN_LEVEL,
    SPAN_WINDOW,
)
from rundir.migrations import MIGRATIONS, RawRun, update_to_2, update_to_3, update_to_4
from rundir.read import load_run
from rundir.write import RunDir
from suites.cli.main import main

RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "runs"
RECORDED = sorted(p for p in RUNS.glob("real-*") if (p / "manifest.json").is_file())


def _on_disk(path: Path) -> tuple[int, list[str]]:
    version = json.loads((path / "manifest.json").read_text())["format_version"]
    with (path / "results.csv").open(newline="") as f:
        return version, next(csv.reader(f))


def test_every_format_has_a_migration_and_a_history_line():
    assert sorted(MIGRATIONS) == list(range(1, FORMAT_VERSION))
    assert sorted(HISTORY) == list(range(1, FORMAT_VERSION + 1))


def test_recorded_fixtures_cover_the_formats_and_both_format_1_eras():
    formats = {p.name: _on_disk(p) for p in RECORDED}
    # format 6 (not yet released): real-alternate-aa, the first run of the alternate design
    assert {v for v, _ in formats.values()} == {1, 2, 3, 5, 6}
    fmt1 = [cols for v, cols in formats.values() if v == 1]
    assert any("window_s" in c for c in fmt1) and any("window_s" not in c for c in fmt1)


@pytest.mark.parametrize("path", RECORDED, ids=lambda p: p.name)
def test_recorded_run_loads_migrated(path):
    version, header = _on_disk(path)
    run = load_run(path)
    assert run.manifest["format_version"] == FORMAT_VERSION
    assert run.manifest["format_version_on_disk"] == version
    # What format-1 readers guessed from the header is now recorded: window figures or level ones.
    assert run.has_windows == ("window_s" in header)
    want = SPAN_WINDOW if "window_s" in header else SPAN_LEVEL
    assert run.manifest["figures"]["cpu_ctxsw_span"] == want
    assert set(RESULTS_COLUMNS) <= set(run.columns)
    assert run.ok_rows and all(set(RESULTS_COLUMNS) <= set(r) for r in run.rows)
    # The recorded figures themselves are untouched by the migration.
    with (path / "results.csv").open(newline="") as f:
        first = next(csv.DictReader(f))
    assert run.rows[0]["qps"] == float(first["qps"])
    # (a one-second level has no measured window: its CPU columns are empty, and stay so)
    assert run.rows[0]["cpu_user_s"] == (
        float(first["cpu_user_s"]) if first["cpu_user_s"] else None
    )
    # Every row says where its context switches came from, also where format 1 kept it per cell.
    assert all(r["ctxsw_source"] for r in run.rows)


@pytest.mark.parametrize("path", RECORDED, ids=lambda p: p.name)
def test_recorded_run_reports(path, tmp_path, capsys):
    copy = shutil.copytree(path, tmp_path / path.name)
    before = (copy / "manifest.json").read_bytes()
    assert main(["report", str(copy)]) == 0
    page = (copy / "report.html").read_text()
    assert "glibc" in page and all(w in page for w in load_run(path).workloads)
    assert (copy / "manifest.json").read_bytes() == before  # read, never rewritten
    version, _ = _on_disk(path)
    # The report says which format the run was written in, and that it was upgraded in memory.
    assert (f"{version}, read as {FORMAT_VERSION}" in page) == (version < FORMAT_VERSION)
    html, _ = render(load_run(path))
    assert "predates measured windows" in html or load_run(path).has_windows


@pytest.mark.parametrize("path", RECORDED, ids=lambda p: p.name)
def test_rederive_keeps_older_runs_figures_and_gives_format_3_back_byte_for_byte(
    path, tmp_path, capsys
):
    copy = shutil.copytree(path, tmp_path / path.name)
    results = (copy / "results.csv").read_bytes()
    kept = {p.relative_to(copy): p.read_bytes() for p in copy.rglob("*") if p.is_file()}
    assert main(["report", str(copy), "--rederive"]) == 0
    said = capsys.readouterr().out.splitlines()
    lines = [line for line in said if line.startswith("rederive: ")]
    assert (copy / "results.csv").read_bytes() == results
    # Nothing that was recorded is rewritten (results.csv is derived and came back identical).
    assert all((copy / rel).read_bytes() == data for rel, data in kept.items())
    version, _ = _on_disk(path)
    if version < 3:
        # Cells of older runs keep their figures, each saying why (or none were kept as files).
        assert all(f"format-{version} run records no raw data" in line for line in lines)
        assert not (copy / "derived").exists()
    elif not (path / "raw").is_dir():
        # A fixture kept without its raw records (real-servers-aa-format5: to stay small)
        assert lines and all("kept: no raw record" in line for line in lines)
    else:
        # format 6 fills what a scenario's cycle recorded and older code left underived (when it
        # ended: growth per hour); every other figure is the recorded one
        scenario = any(r.get("scenario_cycle") is not None for r in load_run(path).rows)
        assert lines and all(
            line.endswith(" row(s), 0 changed") or scenario and " changed" in line for line in lines
        )
        for d in (copy / "derived").iterdir() if scenario else ():
            got = json.loads(d.read_text())["rows"]
            had = json.loads((copy / "cells" / d.name).read_text())["rows"]
            assert len(got) == len(had)
            for g, h in zip(got, had, strict=True):
                assert _without(h, FORMAT6_ADDED_COLUMNS) == {
                    k: g[k] for k in h if k not in FORMAT6_ADDED_COLUMNS
                }
                assert g["scenario_end_s"] > 0
        assert sorted(p.name for p in (copy / "derived").iterdir()) == sorted(
            p.name for p in (copy / "cells").iterdir()
        )


def test_update_to_3_says_older_runs_have_no_raw_records():
    raw = RawRun(manifest={"format_version": 2, "figures": {"cpu_ctxsw_span": "window"},
                           "cells": [{"id": "c", "index": 0, "status": "ok"}]})  # fmt: skip
    up = update_to_3(raw)
    assert up.manifest["figures"] == {"cpu_ctxsw_span": "window", "raw_records": False}
    assert up.manifest["cells"][0]["derive_error"] is None
    assert load_run(RUNS / "real-smoke-format3").manifest["figures"]["raw_records"] is True
    assert load_run(RUNS / "real-smoke-format2").manifest["figures"]["raw_records"] is False


def test_update_to_4_keeps_only_the_suites_own_familys_server_settings():
    mysql = {"flavor": "mariadb", "binary": "", "buffer_pool_mb": 512, "engines": ["innodb"],
             "settings": {}, "cache_gb": 1.0, "startup_timeout_s": 180}  # fmt: skip
    mongo = {**mysql, "flavor": "mongodb", "cache_gb": 0.25}
    for server, gone, kept in (
        (mysql, {"cache_gb"}, {"buffer_pool_mb", "engines", "settings"}),
        (mongo, {"buffer_pool_mb", "engines", "settings"}, {"cache_gb"}),
    ):
        raw = RawRun(manifest={"format_version": 3, "suite": {"server": server}})
        got = update_to_4(raw).manifest["suite"]["server"]
        assert not gone & set(got) and kept <= set(got)
        assert {"flavor", "binary", "startup_timeout_s"} <= set(got)
    # What the recorded format-3 suite holds now is what a format-4 run of it records.
    from suites.suite.model import suite_from_dict

    run = load_run(RUNS / "real-smoke-format3")
    assert suite_from_dict(run.suite, "run").as_dict()["server"] == run.suite["server"]


def test_format_1_run_compares_with_a_format_2_run():
    old = RUNS / "real-smoke-windows"
    new = RUNS / "real-smoke-format2"
    assert (_on_disk(old)[0], _on_disk(new)[0]) == (1, 2)
    cmp = compare_runs(old, new, allow_weak=True)
    assert cmp.points and {p.allocator for p in cmp.points} == {"glibc", "jemalloc"}
    back = compare_runs(new, old, allow_weak=True)
    assert len(back.points) == len(cmp.points)


def test_format_1_runs_of_both_eras_compare(capsys, tmp_path):
    # Before and after measured windows, both format 1: compared on throughput as ever. The
    # outputs go to --out: a test never writes into the recorded fixtures.
    new = RUNS / "real-smoke-windows"
    before = sorted(p.name for p in new.iterdir())
    code = main(["compare", str(RUNS / "real-smoke-1"), str(new), "--out", str(tmp_path)])
    # One run per side and 4 s levels: read and matched, but nothing can be judged, and it says so.
    assert code == 2
    said = capsys.readouterr()
    assert "Traceback" not in said.err and "NOTHING COULD BE JUDGED" in said.out + said.err
    assert len(list(tmp_path.glob("compare-*-vs-*.md"))) == 1
    assert len(list(tmp_path.glob("compare-*-vs-*.html"))) == 1
    assert sorted(p.name for p in new.iterdir()) == before
    cmp = compare_runs(RUNS / "real-smoke-1", RUNS / "real-smoke-windows", allow_weak=True)
    assert len(cmp.points) == 8


def test_synthetic_legacy_format_1_against_format_2(tmp_path):
    old = make_run(tmp_path, "synthetic-old", seed=3, legacy=True)
    new = make_run(tmp_path, "synthetic-new", seed=4)
    assert (_on_disk(old)[0], _on_disk(new)[0]) == (1, FORMAT_VERSION)
    assert not load_run(old).has_windows and load_run(new).has_windows
    cmp = compare_runs(old, new)
    assert cmp.points


def test_update_to_2_fills_ctxsw_source_from_the_cell():
    raw = RawRun(
        manifest={
            "format_version": 1,
            "cells": [{"id": "c", "collectors": {"ctxsw_source": "perf"}}],
        },
        columns=["cell", "qps"],
        rows=[{"cell": "c", "qps": 1.0}],
    )
    out = update_to_2(raw)
    assert out.manifest["figures"] == {"cpu_ctxsw_span": SPAN_LEVEL}
    assert out.rows[0]["ctxsw_source"] == "perf" and out.rows[0]["window_s"] is None
    assert raw.rows[0] == {"cell": "c", "qps": 1.0}  # pure: the input is not changed


@pytest.mark.parametrize("version", [FORMAT_VERSION + 1, 99])
def test_a_future_format_says_to_upgrade(tmp_path, capsys, version):
    path = make_run(tmp_path, "synthetic-future", format_version=version)
    # Its results.csv may mean anything: the version is checked before any other file is read.
    (path / "results.csv").write_text("whatever,the,future,writes\n")
    assert main(["report", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "upgrade mallocsweep" in err and "Traceback" not in err
    assert not (path / "report.html").exists()


def test_a_damaged_cell_status_is_a_one_line_error(tmp_path):
    path = make_run(tmp_path, "synthetic-damaged")
    m = json.loads((path / "manifest.json").read_text())
    m["cells"][0]["status"] = "exploded"
    (path / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(RunDirError, match=r"manifest\.json: cell \S+: status 'exploded'") as e:
        load_run(path)
    assert "\n" not in str(e.value)


def test_writer_refuses_a_manifest_the_reader_would_refuse(tmp_path):
    rd = RunDir.create(tmp_path, "r")
    with pytest.raises(RunDirError, match="cells.0.index"):
        rd.write_manifest({"cells": [{"id": "c", "index": "first", "status": "ok"}]})
    assert not (rd.path / "manifest.json").exists()


def test_atomic_write_syncs_file_and_directory_and_never_overwrites_when_told(
    tmp_path, monkeypatch
):
    synced = []
    real_fsync = os.fsync

    def fsync(fd):
        synced.append(os.path.isdir(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    target = tmp_path / "x.json"
    atomic_write(target, "one\n")
    assert target.read_text() == "one\n" and oct(target.stat().st_mode & 0o777) == "0o644"
    assert synced == [False, True]  # the file, then its directory entry
    atomic_write(target, b"two\n")
    assert target.read_text() == "two\n"
    with pytest.raises(FileExistsError):
        atomic_write(target, "three\n", exclusive=True)
    assert target.read_text() == "two\n"
    atomic_write(tmp_path / "new.json", "four\n", exclusive=True)
    assert (tmp_path / "new.json").read_text() == "four\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.json", "x.json"]  # no temp left


def test_the_tool_version_is_the_installed_package():
    from importlib.metadata import version

    from rundir.records import Tool

    assert Tool.installed().version == version("mallocsweep")
    # The recorded format-2 run names it too (format-1 runs said "0.1.0" from a constant).
    assert load_run(RUNS / "real-smoke-format2").manifest["tool"]["version"]


def test_exclusive_write_without_hard_links_still_refuses_to_overwrite(tmp_path, monkeypatch):
    def no_links(src, dst):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    atomic_write(tmp_path / "a", "one\n", exclusive=True)
    with pytest.raises(FileExistsError):
        atomic_write(tmp_path / "a", "two\n", exclusive=True)
    assert (tmp_path / "a").read_text() == "one\n"
    assert [p.name for p in tmp_path.iterdir()] == ["a"]


def _without(d: dict, keys) -> dict:
    return {k: v for k, v in d.items() if k not in keys}
