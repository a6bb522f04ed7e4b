"""A SIGKILL during dataset preparation leaves .prepare-*/.store-* in the cache: the next run
removes the ones that are ours and whose owner is gone; doctor lists them."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from rundir.format import OWNER_MARKER
from suites.cli.commands import doctor
from suites.datasets.stale import remove_stale, stale_dirs


def _dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def _work_dir(root, name, marker=True):
    d = root / name
    (d / "datadir").mkdir(parents=True)
    (d / "datadir" / "ibdata1").write_bytes(b"x" * 4096)
    if marker:
        (d / OWNER_MARKER).write_text("created by mallocsweep\n")
    return d


def test_only_our_dirs_of_dead_owners_are_removed(tmp_path, monkeypatch):
    monkeypatch.setenv("MALLOCSWEEP_CACHE", str(tmp_path))
    root = tmp_path / "datasets"
    dead = _dead_pid()
    stale = _work_dir(root, f".prepare-10.11.19-abc123-{dead}")
    stale_store = _work_dir(root, f".store-10.11.19-abc123-{dead}")
    kept = [
        _work_dir(root, f".prepare-10.11.19-abc123-{__import__('os').getpid()}"),  # owner alive
        _work_dir(root, f".prepare-10.11.19-abc123-{dead + 1000000}", marker=False),  # not ours
        _work_dir(root, "10.11.19-abc123"),  # a cached dataset, not a work directory
    ]
    in_use = _work_dir(root, f".prepare-10.11.19-def456-{dead}")
    # a server that outlived its runner still runs in it: named on its command line
    holder = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", f"--datadir={in_use}/datadir"]
    )
    try:
        cmdline = Path(f"/proc/{holder.pid}/cmdline")
        deadline = time.monotonic() + 10
        while b"--datadir" not in cmdline.read_bytes() and time.monotonic() < deadline:
            time.sleep(0.01)  # until it has exec'd: before, it shows our own command line
        assert stale_dirs(root) == [stale, stale_store]
        listed = doctor._stale_prepare()
        assert [c.ok for c in listed] == [False, False] and str(stale) in listed[0].detail
        removed = remove_stale(root)
        assert len(removed) == 2 and str(stale) in removed[0]
        assert not stale.exists() and not stale_store.exists()
        assert all(p.exists() for p in [*kept, in_use])
        assert doctor._stale_prepare() == []
    finally:
        holder.kill()
        holder.wait()


def test_an_empty_shell_left_between_mkdir_and_marker_is_ours(tmp_path):
    # The fault campaign under load: a SIGKILL after make_owned_dir's mkdir and before its marker
    # was written left an empty .prepare-* directory, and every later run refused the cache as
    # "holds ..., which mallocsweep did not create". An empty shell (or one holding only the
    # marker's temp file) of our name with a dead owner is removed; anything with content is not.
    root = tmp_path / "datasets"
    dead = _dead_pid()
    shell = root / f".prepare-10.11.19-abc123-{dead}"
    shell.mkdir(parents=True)
    half = root / f".store-10.11.19-abc123-{dead}"
    half.mkdir()
    (half / f".{OWNER_MARKER}.x1y2.tmp").write_text("")
    foreign = root / f".prepare-10.11.19-def456-{dead}"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("somebody's\n")
    assert stale_dirs(root) == [shell, half]
    remove_stale(root)
    assert not shell.exists() and not half.exists() and (foreign / "notes.txt").exists()


def test_a_tree_written_to_while_it_is_removed_stays_marked_as_ours(tmp_path, monkeypatch):
    # The CI fault campaign of 2026-11-29: SIGHUP during the dataset's mariadb-install-db; the
    # script died at once, its bootstrap server wrote on while the .prepare-* directory was
    # removed, rmtree took the marker first and left the server's files behind, unmarked, and
    # every later run refused the cache ("holds ..., which mallocsweep did not create").
    # remove_owned_dir takes the marker last: either the tree is gone, or what is left is ours.
    import shutil

    from rundir import write
    from rundir.write import make_owned_dir, remove_owned_dir

    dead = _dead_pid()
    work = make_owned_dir(tmp_path / f".prepare-10.11.19-abc123-{dead}")
    (work / "datadir").mkdir()
    writing = [True]
    real_rmtree = shutil.rmtree

    def rmtree_beside_a_writer(path, ignore_errors=False):
        real_rmtree(path, ignore_errors=ignore_errors)
        if writing[0]:  # the server writes its next file just after the tree went
            (work / "datadir").mkdir(exist_ok=True)
            (work / "datadir" / "ib_logfile0").write_bytes(b"x")

    monkeypatch.setattr(write.shutil, "rmtree", rmtree_beside_a_writer)
    assert not remove_owned_dir(work, attempts=2)
    assert (work / OWNER_MARKER).is_file() and (work / "datadir" / "ib_logfile0").is_file()
    assert stale_dirs(tmp_path) == [work]  # so the next run removes it
    writing[0] = False
    assert remove_owned_dir(work) and not work.exists()  # and, once nobody writes, it goes
