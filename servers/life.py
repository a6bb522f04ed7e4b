"""What every server life shares, whatever the server: the child, its start, its exact end, its log.

Start: a subclass prepares its launch (work files, port, the allocator's environment) and says
how to probe readiness and how to prove the allocator once the server answers; the sequence — one
child via servers.launch.spawn with the collectors' hooks, a readiness wait with backoff that
notices an early exit and Ctrl-C, the proof, and a stop on any failure — is the same for all and
lives here once.

Stop: a subclass says how to ask its server to shut down (SQL SHUTDOWN, mongod's shutdown
command) and what to release afterwards; the escalation — polite request, SIGTERM, SIGKILL, always
reaped with wait4 — is the same for all. Whichever step ends the server (or a crash of its own,
noticed by `alive`), the child's pre-reap hook (servers.launch: the collectors' final whole-life
reading) runs once before the reap.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from servers import interrupts
from servers.errors import AllocatorError, ServerError
from servers.launch import Child, ExitInfo, spawn
from servers.ports import free_port, port_in_use
from servers.root import RootLaunch

# A server gets nothing of our environment but this (plus its allocator's part and HOME). PATH
# also lets the MongoDB stand-in's wrapper find java.
BASE_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C", "TZ": "UTC"}

# A readiness probe: None once the server answers, else why not yet (for the time-out message).
Probe = Callable[[], "str | None"]


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


@dataclass(frozen=True)
class Launch:
    """What one start runs: the command, the file its stdout and stderr go to, and the server
    root it runs in (None: on the host)."""

    argv: list[str]
    log: Path
    root: RootLaunch | None = None


class ServerLife:
    """Base of MySQLServer and MongoServer. Use as a context manager to guarantee the stop."""

    child: Child | None = None
    exit: ExitInfo | None = None
    evidence: dict | None = None  # the allocator proof of the last start
    binary: Any  # the family's description of its binary (messages name its .path)
    error_log: Path
    workdir: Path
    thp_disable: bool = False
    requested_port: int | None = None
    port: int | None = None
    launch_env: dict[str, str]
    # How messages name the server, and the default start-up time limit.
    noun = "server"
    start_timeout_s: float = 180

    # -- start: the family's part ---------------------------------------------------------------
    def _prepare_launch(self) -> Launch:
        """Make everything the start needs (work files, port, self.launch_env); the command."""
        raise NotImplementedError

    def _readiness_probe(self) -> AbstractContextManager[Probe]:
        """A probe, open for the readiness wait (it may hold a client)."""
        raise NotImplementedError

    def _not_ready_text(self, timeout_s: float, why: str) -> str:
        """What the server failed to do in time, for the time-out message."""
        return f"did not answer within {timeout_s:.0f}s ({why})"

    def _prove(self) -> None:
        """Once it answers: prove the allocator (sets self.evidence) and record what start-up
        tells. Raises AllocatorError (with .evidence) or ServerError."""
        raise NotImplementedError

    def _log_summary(self) -> str:
        """The log lines that say why the server failed, as one line."""
        return " | ".join(tail(self.error_log, 3).splitlines())

    # -- start: shared -------------------------------------------------------------------------
    def _claim_port(self, address: str = "127.0.0.1") -> None:
        """The port asked for, else a free one; a clash is said by number before launching (a
        server that cannot bind would only fail later, less clearly)."""
        self.port = self.requested_port or free_port(address)
        if port_in_use(self.port, address):
            raise ServerError(
                f"port {self.port} on {address} is already in use; choose another port"
            )

    def start(
        self,
        on_spawn: Callable[[int], None] | None = None,
        timeout_s: float | None = None,
        before_reap: Callable[[int], None] | None = None,
    ) -> int:
        """Launch under the allocator, wait until the server answers, prove the allocator.

        Returns the pid. Any failure stops the server and raises ServerError/AllocatorError.
        `on_spawn(pid)` runs before the server's first instruction, `before_reap(pid)` once it
        has exited and before it is reaped (servers.launch.spawn): the collectors' hooks.
        """
        if self.child is not None and self.child.alive:
            raise ServerError(
                f"{self.noun} in {self.workdir} is already running (pid {self.child.pid})"
            )
        launch = self._prepare_launch()
        self.exit = None
        self.evidence = None
        self.child = spawn(
            launch.argv,
            env=self.launch_env,
            root=launch.root,
            cwd=self.workdir,
            stdout=launch.log,
            stderr=launch.log,
            thp_disable=self.thp_disable,
            on_spawn=on_spawn,
            before_reap=before_reap,
        )
        try:
            self._wait_ready(self.start_timeout_s if timeout_s is None else timeout_s)
            self._prove()
        except BaseException as e:
            if isinstance(e, AllocatorError):
                self.evidence = getattr(e, "evidence", None)
            self.stop(timeout_s=30)
            raise
        return self.child.pid

    def _wait_ready(self, timeout_s: float) -> None:
        """Probe (with backoff) until the server answers, exits, or time runs out."""
        deadline = time.monotonic() + timeout_s
        delay = 0.05
        with self._readiness_probe() as probe:
            while True:
                interrupts.check()  # a safe point: start() stops the server on the way out
                ended = self.child.poll()
                if ended is not None:
                    raise ServerError(
                        f"{self.binary.path} {ended.describe} during start-up; "
                        f"{self.error_log}: {self._log_summary()}"
                    )
                why = probe()
                if why is None:
                    return
                if time.monotonic() >= deadline:
                    raise ServerError(
                        f"{self.binary.path} {self._not_ready_text(timeout_s, why)}; "
                        f"{self.error_log}: {self._log_summary()}"
                    )
                time.sleep(delay)
                delay = min(delay * 1.5, 1.0)

    # -- stop ----------------------------------------------------------------------------------
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
