"""stdout that can go away without changing what the command does.

`mallocsweep run ... | head -1` closes the pipe after one line: the reader chose to stop reading,
so the run, its report and compare's exit code (0/1/2: CI reads it) stay as they are; the first
failed write is said once on stderr. A stdout that fails for any other reason (`>/dev/full`: no
space left, an I/O error) has lost output nobody chose to drop: the command still finishes what it
does (a run is never cut short by its terminal), and then exits 2 with one line saying the output
was lost (suites.cli.main, `lost()`). Either way later output is dropped and fd 1 is pointed at
/dev/null, so the interpreter's final flush cannot fail (a failed final flush would turn the exit
code into 120). A stdout closed before we started (`>&-`) is /dev/null from the start.
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
        self.lost: str | None = None  # why output was lost that nobody chose to drop

    def _gone(self, e: OSError) -> None:
        if not self.dropped:
            self.dropped = True
            if e.errno != errno.EPIPE:
                self.lost = e.strerror or str(e)  # said once, at the end (suites.cli.main)
            else:
                try:
                    sys.stderr.write(
                        f"mallocsweep: stdout unusable ({e.strerror or e}); its output is "
                        "dropped, the command goes on\n"
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


def lost() -> str | None:
    """Why the command's output was lost (stdout failed and its reader did not close it), after
    flushing what is left; None when it all went out (or the reader chose to stop reading)."""
    out = sys.stdout
    if not isinstance(out, _GuardedStdout):
        return None
    out.flush()
    return out.lost
