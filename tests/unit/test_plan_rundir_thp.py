"""Matrix order, run-directory writing and the THP controller, on fixtures (no servers)."""

from __future__ import annotations

import csv
import json

import pytest

from rundir.errors import RunDirError
from rundir.format import FORMAT_VERSION, OWNER_MARKER, RESULTS_COLUMNS
from rundir.write import RunDir, make_owned_dir
from suites.errors import SuiteError
from suites.runner import thp as thpmod
from suites.runner.plan import baseline_first, plan_cells


def test_rounds_change_allocator_order():
    cells = plan_cells("mariadb-10.11", ["glibc", "jemalloc", "tcmalloc"], ["system"], 3)
    order = [c.allocator for c in cells]
    # Williams rows 0, 1, 2 for three allocators: the first one listed opens the run.
    assert order == [
        "glibc",
        "jemalloc",
        "tcmalloc",
        "jemalloc",
        "tcmalloc",
        "glibc",
        "tcmalloc",
        "glibc",
        "jemalloc",
    ]
    assert [c.index for c in cells] == list(range(9))
    assert len({c.id for c in cells}) == 9
    assert cells[0].id == "mariadb-10.11__glibc__thp-system__r1"


@pytest.mark.parametrize("n", [2, 3, 4, 5, 7])
def test_every_allocator_takes_every_place_and_follows_every_other_equally(n):
    """Over n rounds (2n for an odd n) each allocator runs first, last and in between equally
    often (a drift within rounds favours none), and runs right after each other allocator equally
    often (a neighbour's after-effects favour none)."""
    allocs = [f"a{i}" for i in range(n)]
    rounds = n if n % 2 == 0 else 2 * n
    cells = plan_cells("m", allocs, ["system"], rounds)
    places = {(c.allocator, c.index % n) for c in cells}
    counts = {a: [0] * n for a in allocs}
    follows: dict[tuple, int] = {}
    for i, c in enumerate(cells):
        counts[c.allocator][c.index % n] += 1
        if i % n:
            pair = (cells[i - 1].allocator, c.allocator)
            follows[pair] = follows.get(pair, 0) + 1
    assert len(places) == n * n
    assert len({tuple(p) for p in counts.values()}) == 1
    assert len(follows) == n * (n - 1) and len(set(follows.values())) == 1


def test_the_baseline_is_not_always_beside_the_same_allocators():
    """The quick suite's seven arms, first look and two more rounds: the baseline opens the run
    wherever it was listed, and its neighbours change from round to round (the old rotation of one
    list kept it next to the same two, the A/A arm one of them, in every round)."""
    allocs = ["jemalloc", "tcmalloc", "tcmalloc-minimal", "glibc", "mimalloc", "tbbmalloc"]
    allocs = baseline_first([*allocs, "glibc-aa"], "glibc")
    assert allocs[0] == "glibc" and allocs[1:3] == ["jemalloc", "tcmalloc"]
    cells = plan_cells("m", allocs, ["system"], 5)
    assert cells[0].allocator == "glibc"
    neighbours = []
    for r in range(1, 6):
        order = [c.allocator for c in cells if c.round == r]
        i = order.index("glibc")
        neighbours.append(frozenset(order[max(i - 1, 0) : i] + order[i + 1 : i + 2]))
    assert len(set(neighbours)) == 5
    assert len(set().union(*neighbours)) == 6  # every other arm sat beside it at least once


def test_thp_modes_alternate_between_rounds():
    cells = plan_cells("m", ["a", "b"], ["never", "always"], 2)
    assert [c.thp for c in cells] == [
        "never",
        "never",
        "always",
        "always",
        "always",
        "always",
        "never",
        "never",
    ]


def test_cell_ids_are_file_name_safe():
    c = plan_cells("mysql 8/x", ["my alloc"], ["never"], 1)[0]
    assert "/" not in c.id and " " not in c.id


def test_run_dir_never_overwrites(tmp_path):
    a = RunDir.create(tmp_path, "quick-x")
    b = RunDir.create(tmp_path, "quick-x")
    assert a.path != b.path and b.path.name == "quick-x.2"
    assert (a.path / OWNER_MARKER).exists()
    with pytest.raises(RunDirError, match="already exists"):
        make_owned_dir(a.path)


def test_finished_cell_is_never_rewritten_and_results_are_derived(tmp_path):
    rd = RunDir.create(tmp_path, "r")
    rd.write_cell({"id": "c1", "index": 1, "status": "failed"}, [])
    rd.samples_path("c1").write_text("t_s\n")
    rd.logs_dir("c1")
    assert rd.archive_attempt("c1") == 1  # a resumed cell moves its failed try aside, kept
    assert (rd.path / "cells" / "c1.json.attempt1").exists()
    assert (rd.path / "samples" / "c1.csv.attempt1").exists()
    assert (rd.path / "logs" / "c1.attempt1").is_dir()
    rd.write_cell(
        {"id": "c1", "index": 1, "status": "ok"},
        [{"cell": "c1", "workload": "point_select", "threads": 8}],
    )
    rd.write_cell(
        {"id": "c0", "index": 0, "status": "ok"},
        [{"cell": "c0", "workload": "oltp_ro", "threads": 4}],
    )
    with pytest.raises(RunDirError, match="never rewritten"):
        rd.write_cell({"id": "c1", "index": 1, "status": "ok"}, [])
    with pytest.raises(RunDirError, match="never run again"):
        rd.archive_attempt("c1")
    assert rd.rebuild_results() == 2
    rows = list(csv.DictReader((rd.path / "results.csv").open()))
    assert [r["cell"] for r in rows] == ["c0", "c1"]  # in cell order
    assert list(rows[0].keys()) == RESULTS_COLUMNS


def test_manifest_write_is_atomic_and_versioned(tmp_path):
    rd = RunDir.create(tmp_path, "r")
    rd.write_manifest({"cells": []})
    m = json.loads((rd.path / "manifest.json").read_text())
    assert m["format_version"] == FORMAT_VERSION
    # recorded, never left to guess (format 3: its rows are derived from raw records)
    assert m["figures"] == {"cpu_ctxsw_span": "window", "raw_records": True}
    assert not [p for p in rd.path.iterdir() if p.name.startswith(".manifest")]


def test_resume_refuses_a_directory_we_do_not_own(tmp_path):
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "manifest.json").write_text("{}")
    with pytest.raises(RunDirError, match="marker"):
        RunDir.open_existing(tmp_path / "x")


@pytest.fixture
def fake_sysfs(tmp_path, monkeypatch):
    d = tmp_path / "thp"
    d.mkdir()
    (d / "enabled").write_text("always [madvise] never\n")
    (d / "defrag").write_text("always defer defer+madvise [madvise] never\n")
    monkeypatch.setenv("MALLOCSWEEP_STATE", str(tmp_path / "state"))

    # A fake sysfs file takes the written word as its new content; the kernel shows brackets.
    orig_write = thpmod.ThpController._write

    def write(self, name, value):
        path = self.sysfs / name
        words = path.read_text().replace("[", "").replace("]", "").split()
        if value not in words:
            raise OSError(22, "Invalid argument")
        path.write_text(" ".join(f"[{w}]" if w == value else w for w in words) + "\n")

    monkeypatch.setattr(thpmod.ThpController, "_write", write)
    yield d
    monkeypatch.setattr(thpmod.ThpController, "_write", orig_write)


# leftover() reads the machine-wide record of a THP change in force, which a real run of another
# test (the hugepage studies) writes: checked only where no such test runs beside it
@pytest.mark.system_settings
def test_thp_applied_read_back_and_restored(fake_sysfs, tmp_path):
    ctl = thpmod.ThpController(tmp_path, sysfs=fake_sysfs, defrag="defer+madvise")
    applied = ctl.apply("always")
    assert applied.method == "sysfs" and applied.in_force == {
        "enabled": "always",
        "defrag": "defer+madvise",
    }
    assert thpmod.leftover()["original"] == {"enabled": "madvise", "defrag": "madvise"}
    assert (tmp_path / thpmod.PENDING_NAME).exists()
    assert ctl.restore() == {"enabled": "madvise", "defrag": "madvise"}
    assert thpmod.current(fake_sysfs) == {"enabled": "madvise", "defrag": "madvise"}
    assert thpmod.leftover() is None
    assert ctl.restore() is None  # idempotent


def test_thp_leftover_from_a_killed_run_is_restorable(fake_sysfs, tmp_path):
    ctl = thpmod.ThpController(tmp_path, sysfs=fake_sysfs)
    ctl.apply("never")
    rec = thpmod.leftover()
    rec["pid"] = 999_999_999  # the runner is gone
    thpmod.pending_file().write_text(json.dumps(rec))
    ctl.original = None  # simulate the dead runner: no in-process restore
    assert thpmod.restore_leftover()["original"]["enabled"] == "madvise"
    assert thpmod.current(fake_sysfs)["enabled"] == "madvise"


def test_thp_without_write_access(tmp_path, monkeypatch):
    monkeypatch.setattr(thpmod, "writable", lambda sysfs=None: False)
    ctl = thpmod.ThpController(tmp_path, sysfs=tmp_path)
    assert ctl.apply("never").method == "prctl" and ctl.apply("never").thp_disable
    with pytest.raises(SuiteError, match="'always' needs write access"):
        ctl.check(["always", "never"])
