"""What every server life shares, whatever the server: the child, its exact end, its log.

A subclass says how to ask its server to shut down (SQL SHUTDOWN, mongod's shutdown command) and
what to release afterwards; the escalation — polite request, SIGTERM, SIGKILL, always reaped with
wait4 — is the same for all and lives here once. Whichever step ends the server (or a crash of its
own, noticed by `alive`), the child's pre-reap hook (servers.launch: the collectors' final
whole-life reading) runs once before the reap.
"""

from __future__ import annotations

import os
from pathlib import Path

from servers import interrupts
from servers.launch import Child, ExitInfo


def tail(path: Path, n: int, missing: str = "(no log)") -> str:
    """The last `n` lines of a log (reading at most its last 64 KiB)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 64 * 1024))
            lines = f.read().decode(errors="replace").splitlines()
    except OSError:
        return missing
    return "\n".join(lines[-n:]) if lines else "(log is empty)"


class ServerLife:
    """Base of MySQLServer and MongoServer. Use as a context manager to guarantee the stop."""

    child: Child | None = None
    exit: ExitInfo | None = None
    error_log: Path

    def _request_shutdown(self) -> bool:
        """Ask the server to shut down cleanly; True when the request reached it."""
        raise NotImplementedError

    def _release(self) -> None:
        """Close client connections and remove private directories (idempotent)."""

    @property
    def pid(self) -> int | None:
        return self.child.pid if self.child else None

    @property
    def alive(self) -> bool:
        return self.child is not None and self.child.alive

    def stop(self, timeout_s: float = 120) -> ExitInfo | None:
        """The server's own shutdown, then SIGTERM, then SIGKILL; always reaped. Idempotent (None
        if never started). Returns the exit with the kernel's whole-life rusage.

        Runs with signals held (servers.interrupts): a Ctrl-C never cuts it short. A third one
        skips the clean shutdown (and SIGTERM's wait): the server is killed, and still reaped."""
        with interrupts.held():
            if self.child is None:
                self._release()
                return None
            if self.child.exit is None:
                with interrupts.doing(f"the server (pid {self.child.pid}) to shut down"):
                    if not interrupts.hurrying() and self._request_shutdown():
                        self.child.wait(timeout_s, interrupts.hurrying)
                    # Not answering, or not down in time: SIGTERM (a clean shutdown too), then
                    # SIGKILL.
                    self.child.terminate(term_timeout=min(60.0, timeout_s), kill_timeout=10)
            self.exit = self.child.exit
            self._release()
            return self.exit

    def error_log_tail(self, n: int = 20) -> str:
        return tail(self.error_log, n)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
