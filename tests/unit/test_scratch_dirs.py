"""servers/scratch.py: a /tmp directory is named after its owner, and the next one made with the
same prefix removes those whose owner is gone, and nothing else."""

from __future__ import annotations

import os
import subprocess
import sys

from servers.scratch import owned_dir, owner_tag, sweep_dead

PREFIX = "ms-test-"


def _dead_owner_tag() -> str:
    """The tag a process had: started, read while alive, then reaped."""
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                             stdin=subprocess.PIPE)  # fmt: skip
    try:
        tag = owner_tag(child.pid)
    finally:
        child.communicate(b"")
    return tag


def test_a_dead_owners_directory_goes_and_a_live_ones_stays(tmp_path):
    dead = tmp_path / f"{PREFIX}{_dead_owner_tag()}-abc123"
    (dead / "inner").mkdir(parents=True)
    (dead / "inner" / "mysqld.sock").write_text("")
    mine = owned_dir(PREFIX, tmp_path)  # sweeps first, then makes this process's own
    assert not dead.exists()
    assert mine.is_dir() and mine.name.startswith(f"{PREFIX}{owner_tag()}-")
    assert oct(mine.stat().st_mode & 0o777) == oct(0o700)
    # A second directory of a live owner (this process) leaves the first alone.
    other = owned_dir(PREFIX, tmp_path)
    assert mine.is_dir() and other.is_dir() and other != mine


def test_the_same_pid_with_another_start_time_is_a_dead_owner(tmp_path):
    pid, ticks = owner_tag().split(".")
    reused = tmp_path / f"{PREFIX}{pid}.{int(ticks) + 1}-xyz"
    reused.mkdir()
    assert sweep_dead(PREFIX, tmp_path) == [reused]
    assert not reused.exists()


def test_nothing_but_an_owned_name_of_this_prefix_is_touched(tmp_path):
    dead = _dead_owner_tag()
    kept = [
        tmp_path / f"{PREFIX}k2j3h4g5",  # the older form: no owner in the name
        tmp_path / f"ms-other-{dead}-abc",  # another prefix
        tmp_path / f"{PREFIX}{dead}",  # no random part: not a name we make
        tmp_path / f"{PREFIX}{dead}-a.b",  # a character mkdtemp never uses
    ]
    for k in kept:
        k.mkdir()
    # A file, and a link to a directory elsewhere, with a dead owner's name: not ours to remove.
    (tmp_path / f"{PREFIX}{dead}-file").write_text("the user's")
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / "keep").write_text("")
    (tmp_path / f"{PREFIX}{dead}-link").symlink_to(target)
    assert sweep_dead(PREFIX, tmp_path) == []
    assert all(k.is_dir() for k in kept)
    assert (tmp_path / f"{PREFIX}{dead}-file").read_text() == "the user's"
    assert (target / "keep").exists()


def test_a_missing_directory_is_no_error(tmp_path):
    assert sweep_dead(PREFIX, tmp_path / "absent") == []


def test_the_tag_names_this_process():
    pid, ticks = owner_tag().split(".")
    assert int(pid) == os.getpid() and int(ticks) > 0
