"""Private scratch directories under /tmp that do not outlive their owner for long.

Two kinds of directory must sit in /tmp rather than in the run directory: a server's socket
directory when the run directory is too deep for a unix socket's path (107 bytes), and a level's
client scratch (short paths for the clients' pipes and records). Each is removed in a `finally`,
which a SIGKILL of the runner never reaches: a make test that kills runners on purpose left about
15 of them each time, and a machine that ran for a day had 250.

So a directory is named after its owner, PREFIX<pid>.<start ticks>-<random>, where the start time
(clock ticks since boot) tells the owner from a later process given the same pid. Whoever makes
the next directory with the same prefix first removes those whose owner is gone. Only names of
exactly that form, owned by this user, are ever removed; names in the older form (PREFIX<random>,
no owner) are left alone, since nothing tells whether the process that made one still runs.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile
from pathlib import Path

from collectors.procfs import ProcFS

TMP = Path("/tmp")


def owner_tag(pid: int | None = None, procfs: ProcFS | None = None) -> str:
    """ "<pid>.<start ticks>" of `pid` (this process by default)."""
    pid = os.getpid() if pid is None else pid
    return f"{pid}.{(procfs or ProcFS()).stat(pid).starttime_ticks}"


def _owned_name(prefix: str) -> re.Pattern[str]:
    return re.compile(rf"^{re.escape(prefix)}(\d+)\.(\d+)-[A-Za-z0-9_]+$")


def sweep_dead(prefix: str, where: Path = TMP, procfs: ProcFS | None = None) -> list[Path]:
    """Remove the directories PREFIX<pid>.<ticks>-* in `where` whose owner no longer runs;
    return what was removed. Never raises: a directory that cannot be read or removed stays."""
    procfs = procfs or ProcFS()
    pattern = _owned_name(prefix)
    removed = []
    try:
        entries = list(os.scandir(where))
    except OSError:
        return removed
    for entry in entries:
        m = pattern.match(entry.name)
        if m is None:
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        # Ours only: a real directory (not a link planted to point elsewhere) of this user.
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
            continue
        if procfs.alive(int(m.group(1)), start_ticks=int(m.group(2))):
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        if not os.path.lexists(entry.path):
            removed.append(Path(entry.path))
    return removed


def owned_dir(prefix: str, where: Path = TMP) -> Path:
    """A new private directory PREFIX<pid>.<ticks>-<random> in `where` (mode 0700, as mkdtemp
    makes it), after removing those of dead owners. The caller removes it when done."""
    procfs = ProcFS()
    sweep_dead(prefix, where, procfs)
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{owner_tag(procfs=procfs)}-", dir=where))
