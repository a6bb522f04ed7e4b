"""The run's signals as a flag, acted on at safe points (issue 17).

A signal handler that raises can land anywhere: inside a clean-up (between a server's SIGTERM and
its reap, halfway through restoring THP), leaving collectors running, the server unreaped and THP
restored under a live server. So SIGINT, SIGTERM and SIGHUP (a closed terminal or SSH session)
only set a flag here and wake whoever waits (a byte on a pipe that waits can select() on). The
runner raises Interrupted itself, at safe points: between cells and levels, and in its waits
(server start, sysbench levels and prepare), via `check()`.

Clean-up runs under `held()`: `check()` never raises there, so every step completes in order.
A second signal prints what the clean-up is still waiting for (`doing()` names each step); a third
makes `hurrying()` true: the server's clean shutdown is skipped (servers.life), but it is still
killed and reaped.

It lives in servers/ because the waits that must see it (a server's start, its stop) are here and
suites may import servers, not the other way round. One instance is active per process (the
runner's); without one, check() does nothing and hurrying() is False.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import stat
import time
from collections.abc import Callable, Iterator

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupted(BaseException):
    """The run was interrupted by a signal; exit code 128 + signal (130 SIGINT, 143 SIGTERM,
    129 SIGHUP).

    A BaseException, like KeyboardInterrupt: the `except Exception` clauses that turn a driver
    error into a failed cell must not swallow Ctrl-C and carry on with the next cell.
    """

    def __init__(self, signum: int):
        self.signum = signum
        self.exit_code = 128 + signum
        # Set by the runner once a run directory exists: said with the interrupt
        self.run_dir = None
        self.resume: str | None = None
        super().__init__(f"interrupted by signal {signum}")


def _say(text: str) -> None:
    """One line on stderr from a handler: os.write, never print (the main thread may be inside
    a print when the handler runs: a reentrant buffered write raises). A dead terminal is fine."""
    try:
        os.write(2, f"\nmallocsweep: {text}\n".encode())
    except OSError:
        pass


class Interrupts:
    def __init__(
        self,
        say: Callable[[str], None] = _say,
        detach: Callable[[], None] | None = None,
    ):
        self.first: int | None = None  # the signal that interrupted the run
        self.count = 0
        self._held = 0
        self._doing: list[str] = []
        self._say = say
        self._detach = detach or _detach_dead_terminal
        self._r, self._w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._old: dict[int, object] = {}

    # -- the handler: flag, wake, speak; never raises --------------------------------------------
    def handle(self, signum: int, _frame=None) -> None:
        self.count += 1
        if self.first is None:
            self.first = signum
        try:
            os.write(self._w, b"!")
        except OSError:  # the pipe is full: whoever waits has enough to wake on
            pass
        if signum == signal.SIGHUP:
            self._detach()
        if self.count == 2:
            what = self._doing[-1] if self._doing else "the current step to reach a safe point"
            self._say(
                f"still stopping: waiting for {what}. "
                "Once more to skip the server's clean shutdown (it is still killed and reaped)."
            )
        elif self.count == 3:
            self._say("skipping the clean shutdown: killing and reaping what is left")

    @property
    def wake_fd(self) -> int:
        """Readable once a signal came: add it to a select() to wake a wait on the flag."""
        return self._r

    @property
    def pending(self) -> bool:
        return self.first is not None

    def hurrying(self) -> bool:
        return self.count >= 3

    def check(self) -> None:
        """A safe point: raise Interrupted if a signal came (never inside held())."""
        if self.first is not None and self._held == 0:
            raise Interrupted(self.first)

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """A clean-up that must complete: check() does nothing inside."""
        self._held += 1
        try:
            yield
        finally:
            self._held -= 1

    @contextlib.contextmanager
    def doing(self, what: str) -> Iterator[None]:
        """Name the step under way, for the second signal's message."""
        self._doing.append(what)
        try:
            yield
        finally:
            self._doing.pop()

    # -- installation --------------------------------------------------------------------------
    def install(self) -> None:
        global _active
        for s in SIGNALS:
            if s == signal.SIGHUP and signal.getsignal(s) is signal.SIG_IGN:
                continue  # started under nohup: a hang-up is meant to be ignored
            self._old[s] = signal.signal(s, self.handle)
        _active = self

    def uninstall(self) -> None:
        global _active
        for s, old in self._old.items():
            signal.signal(s, old)
        self._old.clear()
        if _active is self:
            _active = None
        for fd in (self._r, self._w):
            with contextlib.suppress(OSError):
                os.close(fd)


def _detach_dead_terminal() -> None:
    """After a hang-up the terminal (or the SSH session's pipes) is gone: writes fail (EIO, EPIPE)
    and would turn the clean-up's progress lines into errors. Point the standard streams that were
    a terminal, pipe or socket at /dev/null; a regular file (a log) keeps receiving them."""
    try:
        null = os.open(os.devnull, os.O_RDWR)
    except OSError:
        return
    try:
        for fd in (0, 1, 2):
            try:
                mode = os.fstat(fd).st_mode
                if os.isatty(fd) or stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
                    os.dup2(null, fd)
            except OSError:
                pass
    finally:
        os.close(null)


_active: Interrupts | None = None


def active() -> Interrupts | None:
    return _active


def check() -> None:
    """A safe point for whatever runs under the active Interrupts (no-op without one)."""
    if _active is not None:
        _active.check()


def hurrying() -> bool:
    return _active is not None and _active.hurrying()


def held():
    return _active.held() if _active is not None else contextlib.nullcontext()


def doing(what: str):
    return _active.doing(what) if _active is not None else contextlib.nullcontext()


def wake_fd() -> int | None:
    return _active.wake_fd if _active is not None else None


def sleep(seconds: float) -> None:
    """Wait `seconds`, ending early at a signal: a safe point that raises Interrupted then."""
    fd = wake_fd()
    if seconds > 0:
        if fd is None:
            time.sleep(seconds)
        else:
            select.select([fd], [], [], seconds)
    check()
