"""Reading a file of a run only when it is a regular file.

A FIFO, socket or device put where a run keeps its files (cells/x.json a FIFO) once made `report`
wait forever: reading a FIFO blocks until someone writes. Every file of a run, and the suite
files, are opened here without blocking and refused, naming what they are, unless they are
regular files.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path


def kind_of(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISDIR(mode):
        return "a directory"
    return "not a regular file"


def read_regular(path: Path) -> bytes:
    """The bytes of `path`; OSError (filename set, strerror saying what it is) when it is not a
    regular file. O_NONBLOCK: opening a FIFO with no writer must not wait."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, f"{kind_of(st.st_mode)}, not a regular file", str(path))
        os.set_blocking(fd, True)
        chunks = []
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)
