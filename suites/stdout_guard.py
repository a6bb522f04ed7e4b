"""stdout that can go away without changing what the command does or the code it exits with.

`mallocsweep run ... | head -1` closes the pipe after one line; a closed (`>&-`) or full
(`>/dev/full`) stdout fails every write. The run, its report and compare's exit code (0/1/2: CI
reads it) must not depend on that: the first failed write is said once on stderr, later output is
dropped, and fd 1 is pointed at /dev/null so the interpreter's final flush cannot fail either (a
failed final flush would turn the exit code into 120).
"""

from __future__ import annotations

import errno
import os
import sys

# Failures that mean "nobody can read stdout any more"; anything else is a bug to surface.
_GONE = (errno.EPIPE, errno.EBADF, errno.ENOSPC, errno.EIO, errno.EINVAL)


class _GuardedStdout:
    def __init__(self, stream):
        self._stream = stream
        self.dropped = False

    def _gone(self, e: OSError) -> None:
        if not self.dropped:
            self.dropped = True
            try:
                sys.stderr.write(
                    f"mallocsweep: stdout unusable ({e.strerror or e}); its output is dropped, "
                    "the command goes on\n"
                )
            except (OSError, ValueError):
                pass
        try:  # later writes and the interpreter's own flush at exit go nowhere, quietly
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.close(devnull)
        except OSError:
            pass

    def write(self, text: str) -> int:
        if self.dropped:
            return len(text)
        try:
            return self._stream.write(text)
        except OSError as e:
            if e.errno not in _GONE:
                raise
            self._gone(e)
            return len(text)
        except ValueError:  # I/O operation on closed file
            self.dropped = True
            return len(text)

    def flush(self) -> None:
        if self.dropped:
            return
        try:
            self._stream.flush()
        except OSError as e:
            if e.errno not in _GONE:
                raise
            self._gone(e)
        except ValueError:
            self.dropped = True

    def isatty(self) -> bool:
        try:
            return not self.dropped and self._stream.isatty()
        except (OSError, ValueError):
            return False

    def __getattr__(self, name):
        return getattr(self._stream, name)


def install() -> None:
    """Guard sys.stdout for the rest of the process (idempotent). A stdout that was closed before
    we started (sys.stdout is None) becomes /dev/null."""
    if isinstance(sys.stdout, _GuardedStdout):
        return
    # A closed fd 0/1/2 would be reused by the next file we open, and a child (a server, sysbench)
    # would then write its output into that file: occupy them with /dev/null first.
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
    if sys.stdout is None:
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - lives as long as the process
        return
    sys.stdout = _GuardedStdout(sys.stdout)
