"""Saying "no space left on device" where the disk is full, not what broke next.

A full --out filesystem shows up as many downstream symptoms: a bare "[Errno 28]" from a copy
(no file named), a server that cannot start, sysbench that "wrote no cumulative report" because
its log could not be written. The cell's error says the cause first, naming the file or the
filesystem and its free space, then the symptom.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

# Below this many free bytes a failure on that filesystem is blamed on the full disk.
NEARLY_FULL = 1 << 20
_FULL = (errno.ENOSPC, errno.EDQUOT)


def free_bytes(path: Path) -> int | None:
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def _where(path: Path) -> str:
    free = free_bytes(path)
    room = f"{free // 1024:,} kB free now" if free is not None else "free space unknown"
    return f"the filesystem of {path} ({room})"


def describe(error: BaseException, path: Path) -> str:
    """One line for a cell's error: `error` as is, unless the disk under `path` is full."""
    first = str(error).splitlines()[0] if str(error) else type(error).__name__
    if isinstance(error, OSError) and error.errno in _FULL:
        what = f"writing {error.filename}" if error.filename else f"on {_where(path)}"
        return f"no space left on device {what}" + (f" ({_where(path)})" if error.filename else "")
    return note_if_full(first, path)


def note_if_full(message: str | None, path: Path) -> str | None:
    """A failure message, prefixed with the cause when the filesystem of `path` is (nearly) full."""
    if not message:
        return message
    free = free_bytes(path)
    if free is None or free >= NEARLY_FULL or "no space left" in message.lower():
        return message
    return f"no space left on device on {_where(path)}; then: {message}"
