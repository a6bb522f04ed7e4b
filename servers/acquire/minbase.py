"""A pristine minimal Debian root of one release (`debootstrap --variant=minbase`), made once per
servers directory and copied for each use.

What uses it: a kit (suites/kit/build.py) starts from a copy and installs Python, the tool, sysbench,
the allocators and the server into it; the kit's end-to-end test copies it as its bare target (a
host with no python3, no mariadb, no sysbench). debootstrap takes about a minute and downloads
~50 MB, so the pristine root is kept beside the fetched servers (`servers_dir()/.minbase/RELEASE`)
and `cp -a` makes each copy.

Built like a fetched server (servers/acquire/fetch.py, whose build steps it reuses): in a hidden
`.RELEASE.partial-PID` directory, renamed into place only when complete, with a stamp written last;
a build killed at any point leaves nothing taken for a root, and the next build removes it.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import time
from pathlib import Path

from servers.acquire import archive
from servers.acquire.fetch import (
    Progress,
    _remove_partial,
    _run,  # one build step in its own process group, killed with us
    check_root_tools,
    clean_leftovers,
    servers_dir,
)
from servers.errors import ServerError

STAMP = "minbase.done"


def cache_dir() -> Path:
    return servers_dir() / ".minbase"


def pristine(release: str, say: Progress = lambda _m: None) -> Path:
    """The pristine root of `release` (its root directory), debootstrapped the first time."""
    if release not in archive.RELEASES:
        raise ServerError(
            f"Debian release {release!r} is not one mallocsweep builds roots of "
            f"(known: {', '.join(archive.RELEASES)})"
        )
    base = cache_dir()
    final = base / release
    if (final / STAMP).is_file():
        return final / "root"
    check_root_tools()
    base.mkdir(parents=True, exist_ok=True)
    with open(base / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one debootstrap per release at a time; others wait
        if (final / STAMP).is_file():
            return final / "root"
        for d in clean_leftovers(base):
            say(f"removed an unfinished minimal root: {d}")
        if final.exists():  # no stamp: not made by a complete build
            _remove_partial(final)
        tmp = base / f".{release}.partial-{os.getpid()}"
        if tmp.exists():
            _remove_partial(tmp)
        tmp.mkdir()
        try:
            say(f"creating a minimal {release} root (debootstrap --variant=minbase), once")
            _run(
                [
                    "debootstrap",
                    "--variant=minbase",
                    f"--keyring={archive.KEYRING}",
                    release,
                    str(tmp / "root"),
                    f"{archive.mirror_urls()}/debian",
                ],
                tmp / "debootstrap.log",
                "debootstrap",
            )
            (tmp / STAMP).write_text(time.strftime("%Y-%m-%dT%H:%M:%SZ\n", time.gmtime()))
            os.rename(tmp, final)
        except BaseException:
            _remove_partial(tmp)
            raise
    return final / "root"


def copy_root(release: str, dest: Path, say: Progress = lambda _m: None) -> Path:
    """A fresh copy of the pristine root of `release` at `dest` (which must not exist)."""
    src = pristine(release, say)
    if dest.exists():
        raise ServerError(f"{dest} exists; a root is copied only into a new directory")
    say(f"copying the minimal {release} root")
    p = subprocess.run(
        ["cp", "-a", "--", str(src), str(dest)], capture_output=True, text=True, check=False
    )
    if p.returncode != 0:
        shutil.rmtree(dest, ignore_errors=True)
        err = (p.stderr.strip().splitlines() or ["no output"])[-1]
        raise ServerError(f"copying the minimal {release} root to {dest} failed: {err}")
    return dest
