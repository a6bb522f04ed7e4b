"""Work directories a killed run left in the dataset cache.

Preparing a dataset works in `<cache>/.prepare-<key>-<pid>/` and stores through
`<cache>/.store-<key>-<pid>/`; both are removed when the preparation ends, but a SIGKILL (or a
power cut) leaves them behind: a few hundred MB each, forever. They are stale when

- the name is ours (.prepare-/.store- followed by a dataset key and a pid),
- the directory carries our owner marker (we never delete a directory we did not create) — or
  it holds nothing at all but, at most, the marker's own temp file: a SIGKILL between the mkdir and
  the marker's write leaves such a shell (seen in the fault campaign under load), and removing an
  empty directory cannot lose anybody's data,
- the pid in the name is gone (a live pid, even a reused one, is left alone: never guess), and
- no live process names the directory on its command line (a server started in it that outlived
  its runner keeps it until `mallocsweep doctor` has it stopped).

The next run removes them before it prepares anything; `mallocsweep doctor` lists them.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from collectors.procfs import ProcFS
from rundir.format import OWNER_MARKER

WORK_NAME = re.compile(r"^\.(?:prepare|store)-[A-Za-z0-9.-]+-(\d+)$")


def _builder_runs(pid: int, path: Path) -> bool:
    try:
        written = path.stat().st_mtime
    except OSError:
        return False
    return ProcFS().alive(pid, running_at=written)


def _mentioned_by_a_process(path: Path, proc: Path = Path("/proc")) -> bool:
    needle = str(path).encode()
    for entry in proc.iterdir() if proc.is_dir() else []:
        if not entry.name.isdigit():
            continue
        try:
            if needle in (entry / "cmdline").read_bytes():
                return True
        except OSError:
            continue
    return False


def _ours(path: Path) -> bool:
    """Marked as ours, or an empty shell of our making (see the module's docstring)."""
    if (path / OWNER_MARKER).is_file():
        return True
    try:
        names = [p.name for p in path.iterdir()]
    except OSError:
        return False
    # atomic_write's temp file of the marker: `.<marker>.<random>.tmp`
    return all(n.startswith(f".{OWNER_MARKER}.") and n.endswith(".tmp") for n in names)


def stale_dirs(cache_root: Path) -> list[Path]:
    root = Path(cache_root)
    if not root.is_dir():
        return []
    out = []
    for p in sorted(root.iterdir()):
        m = WORK_NAME.match(p.name)
        if not m or p.is_symlink() or not p.is_dir() or not _ours(p):
            continue
        # the builder named in it still runs (and is the one that wrote it, not a later process
        # given its pid: collectors.procfs.ProcFS.alive)
        if _builder_runs(int(m.group(1)), p) or _mentioned_by_a_process(p):
            continue
        out.append(p)
    return out


def size_of(path: Path) -> int:
    total = 0
    for dirpath, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(dirpath, f)).st_blocks * 512
            except OSError:
                pass
    return total


def remove_stale(cache_root: Path) -> list[str]:
    """Remove the stale work directories; their names (with the space freed) for the record."""
    removed = []
    for p in stale_dirs(cache_root):
        size = size_of(p)
        shutil.rmtree(p, ignore_errors=True)
        if not p.exists():
            removed.append(f"{p} ({size / 1e6:.0f} MB)")
    return removed
