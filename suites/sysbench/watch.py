"""Sleep until sysbench writes a record or exits: no polling while a level runs.

The runner used to poll the records file every 50 ms, at real-time priority (it must mark the
measured window promptly): about 60 wake-ups a second once Child.wait's own sleep ladder is
counted, each preempting a server or client thread, and 0.7% of a core of runner CPU during an
8-thread level here (issue 19). Instead the runner now blocks in select() on two descriptors the
kernel makes readable exactly when something happens: an inotify watch on the records file
(IN_MODIFY: the wrapper appended a record, about once a second) and a pidfd of sysbench (it
exited). Where either is unavailable (no inotify, kernel < 5.3), it falls back to polling.
"""

from __future__ import annotations

import ctypes
import os
import select
import time
from pathlib import Path

from servers import interrupts

IN_MODIFY = 0x00000002
IN_NONBLOCK = 0o4000
IN_CLOEXEC = 0o2000000

_libc = ctypes.CDLL(None, use_errno=True)


class LevelWatch:
    """wait(timeout) returns when the records file was written, sysbench exited, or timeout
    passed; it says nothing about which: the caller reads the records and polls the child."""

    def __init__(self, records: Path, pid: int, poll_s: float):
        self.poll_s = poll_s
        self._ino = self._pidfd = -1
        self.mode = "polling"
        try:
            self._pidfd = os.pidfd_open(pid)
            fd = _libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
            if fd < 0:
                raise OSError(ctypes.get_errno(), "inotify_init1")
            self._ino = fd
            if _libc.inotify_add_watch(fd, os.fsencode(records), IN_MODIFY) < 0:
                raise OSError(ctypes.get_errno(), "inotify_add_watch")
            self.mode = "inotify+pidfd"
        except (OSError, AttributeError):
            self.close()
            self.mode = "polling"

    def wait(self, timeout_s: float) -> None:
        """Also returns when a signal came (servers.interrupts' wake pipe): the runner acts on it
        at once, not at the next record."""
        wake = interrupts.wake_fd()
        if self.mode == "polling":
            if wake is None:
                time.sleep(min(self.poll_s, max(0.0, timeout_s)))
            else:
                select.select([wake], [], [], min(self.poll_s, max(0.0, timeout_s)))
            return
        fds = [self._ino, self._pidfd] + ([wake] if wake is not None else [])
        ready, _, _ = select.select(fds, [], [], max(0.0, timeout_s))
        if self._ino in ready:
            try:
                while os.read(self._ino, 4096):  # drain the events; the file says what is new
                    pass
            except BlockingIOError:
                pass

    def close(self) -> None:
        for fd in (self._ino, self._pidfd):
            if fd >= 0:
                os.close(fd)
        self._ino = self._pidfd = -1
