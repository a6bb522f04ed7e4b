"""Start a server (or load client) as our direct child, exactly as measured.

Why not subprocess.Popen alone:
- Collectors must attach before the server's first instruction (context-switch counters that
  follow every thread ever created). Popen returns only after exec, so the child first runs our
  exec helper (servers/exec/msexec.c, located by servers.exec_helper), which waits on a pipe;
  `on_spawn(pid)` runs while it waits, then the helper execs the real binary under the same pid.
- No Python runs between fork and exec (the runner has sampler, marker and display threads; a
  lock held by one of them at fork time would stay held in the child). subprocess forks and execs
  the helper in C, and the helper does the child's set-up in C: parent-death signal (then
  getppid() checked, in case we died first), resource limits, PR_SET_THP_DISABLE (the kernel keeps
  it across exec), the chroot of a server root, then exec.
- The server's environment is exactly ours: nothing is inherited but what we pass. LD_PRELOAD is
  carried past the helper as MS_PRELOAD and set only at its exec, so the helper itself never runs
  under the allocator.
- It gets its own process group (subprocess's process_group=0, done in C before Popen returns, so
  signal_group works from the first moment): a terminal's Ctrl-C reaches only the runner, which
  stops it cleanly.
- The exit is reaped with os.wait4, whose rusage is the kernel's exact whole-life total for every
  thread the process ever had. Just before that, `before_reap(pid)` runs once the process has
  exited but is still a zombie (seen with waitid(WEXITED | WNOWAIT)): every thread is gone, so
  counters read then are final, and the pid cannot be reused yet. The collectors take their
  whole-life context-switch reading there (collectors.ctxsw). Every path that reaps (poll, wait,
  terminate) goes through it, exactly once; if the hook fails, the child is reaped all the same.

PR_SET_PDEATHSIG fires when the *thread* that forked the child exits: spawn from the main thread
or from a thread that outlives the child.

The parent-death signal is SIGKILL. A clean shutdown would save nothing (a life's datadir is
scratch, and a resumed run starts the cell again), and SIGTERM is not reliable: MariaDB 10.11 loses
a SIGTERM that lands in the first ~0.1 s of its start-up and then runs on for ever, ignoring any
later SIGTERM too (measured: SIGTERM 0.05 and 0.1 s after exec, alive 20 s later; 0.2 s and later,
down in 1 s). A runner SIGKILLed while it started a server left exactly such a server behind.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from collectors.procfs import ProcFS
from servers import interrupts
from servers.exec_helper import PRELOAD_VAR, helper_argv

if TYPE_CHECKING:
    from servers.root import RootLaunch


@dataclass
class ExitInfo:
    """How a child ended, with the kernel's whole-life resource usage from wait4."""

    pid: int
    returncode: int | None  # exit status when it exited normally
    signal: int | None  # signal number when it was killed by a signal
    rusage: dict[str, float] = field(default_factory=dict)
    before_reap_error: str | None = None  # the pre-reap hook raised (the child was reaped)

    @property
    def describe(self) -> str:
        if self.signal is not None:
            return f"killed by signal {self.signal} ({signal.Signals(self.signal).name})"
        return f"exited with status {self.returncode}"

    def to_manifest(self) -> dict:
        out = {"returncode": self.returncode, "signal": self.signal, "rusage": self.rusage}
        if self.before_reap_error:
            out["before_reap_error"] = self.before_reap_error
        return out


def _rusage_dict(ru) -> dict[str, float]:
    return {
        "ru_utime": ru.ru_utime,
        "ru_stime": ru.ru_stime,
        "ru_maxrss_kb": ru.ru_maxrss,
        "ru_minflt": ru.ru_minflt,
        "ru_majflt": ru.ru_majflt,
        "ru_nvcsw": ru.ru_nvcsw,
        "ru_nivcsw": ru.ru_nivcsw,
    }


class Child:
    """A process we started: its pid, its process group, and its exact end."""

    def __init__(
        self,
        popen: subprocess.Popen,
        argv: Sequence[str],
        before_reap: Callable[[int], None] | None = None,
    ):
        self._popen = popen
        self.pid = popen.pid
        self.argv = list(argv)
        self.exit: ExitInfo | None = None
        # Called once with the pid after the child has exited and before it is reaped.
        self.before_reap = before_reap
        self._reap_lock = threading.Lock()

    def poll(self) -> ExitInfo | None:
        """The exit if the child has ended (reaping it), else None."""
        if self.exit is None:
            self._reap(os.WNOHANG)
        return self.exit

    @property
    def alive(self) -> bool:
        return self.poll() is None

    def wait(
        self, timeout: float | None = None, cut_short: Callable[[], bool] | None = None
    ) -> ExitInfo | None:
        """Wait up to `timeout` seconds (forever when None), or until `cut_short()` says so; the
        exit, or None if still running."""
        deadline = None if timeout is None else time.monotonic() + timeout
        delay = 0.01
        while self.poll() is None:
            if deadline is not None and time.monotonic() >= deadline:
                return None
            if cut_short is not None and cut_short():
                return None
            time.sleep(delay)
            delay = min(delay * 1.5, 0.2)
        return self.exit

    def signal_group(self, sig: int) -> None:
        """Send `sig` to the child's whole process group (the child and anything it forked)."""
        if self.exit is not None:
            return
        try:
            os.killpg(self.pid, sig)
        except ProcessLookupError:
            pass

    def terminate(self, term_timeout: float = 30.0, kill_timeout: float = 10.0) -> ExitInfo:
        """SIGTERM the group, then SIGKILL after `term_timeout` (at once when the user insists:
        a third Ctrl-C, servers.interrupts); always returns the reaped exit."""
        if self.poll() is None:
            if not interrupts.hurrying():
                self.signal_group(signal.SIGTERM)
            if interrupts.hurrying() or self.wait(term_timeout, interrupts.hurrying) is None:
                self.signal_group(signal.SIGKILL)
                if self.wait(kill_timeout) is None:  # pragma: no cover - uninterruptible sleep
                    raise OSError(f"process {self.pid} survived SIGKILL for {kill_timeout}s")
        self._stop_the_rest_of_the_group(term_timeout, kill_timeout)
        return self.exit

    def _stop_the_rest_of_the_group(self, term_timeout: float, kill_timeout: float) -> None:
        """The leader is reaped; what it forked may still run (a script's server: killed, the
        script is gone at once, its bootstrap server writes the datadir on for 0.7 s). Callers
        remove directories right after terminate(), so it returns only when the group is empty.
        The group's number cannot name anyone else while a member lives (the kernel keeps a pid
        in use as a group id), so killpg is safe as long as the scan found members."""
        procfs = ProcFS()
        if not procfs.group_members(self.pid):
            return
        for sig, timeout in ((signal.SIGTERM, term_timeout), (signal.SIGKILL, kill_timeout)):
            if sig == signal.SIGTERM and interrupts.hurrying():
                continue
            try:
                os.killpg(self.pid, sig)
            except ProcessLookupError:
                return
            deadline = time.monotonic() + timeout
            while procfs.group_members(self.pid):
                if time.monotonic() >= deadline or (
                    sig == signal.SIGTERM and interrupts.hurrying()
                ):
                    break
                time.sleep(0.05)
            else:
                return
        raise OSError(  # pragma: no cover - uninterruptible sleep
            f"process group {self.pid} survived SIGKILL for {kill_timeout}s"
        )

    def _reap(self, flags: int) -> None:
        # One reaper at a time: a second thread polling at the same moment must neither run the
        # hook again nor overwrite the exit with "someone else reaped it".
        with self._reap_lock:
            if self.exit is None:
                self._reap_locked(flags)

    def _reap_locked(self, flags: int) -> None:
        hook = self.before_reap
        if hook is None or not self._exited(flags):
            if hook is None:
                self._wait4(flags)
            return
        self.before_reap = None  # once, whatever happens below
        error = None
        try:
            hook(self.pid)
        except Exception as e:  # noqa: BLE001 - recorded; the child is reaped regardless
            error = f"{type(e).__name__}: {e}"[:300]
        finally:
            # Even a KeyboardInterrupt in the hook leaves no unreaped child behind.
            self._wait4(flags)
        if self.exit is not None:
            self.exit.before_reap_error = error

    def _exited(self, flags: int) -> bool:
        """True when the child has exited (a zombie, not reaped: WNOWAIT), else False (with
        WNOHANG, still running). A child that is already gone counts as exited: wait4 says so."""
        try:
            got = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOWAIT | (flags & os.WNOHANG))
        except ChildProcessError:
            return True
        return got is not None

    def _wait4(self, flags: int) -> None:
        try:
            pid, status, ru = os.wait4(self.pid, flags)
        except ChildProcessError:
            # Someone else reaped it (should not happen); record what we can.
            self.exit = ExitInfo(self.pid, None, None, {})
            self._popen.returncode = -1
            return
        if pid == 0:
            return
        sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
        code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
        self.exit = ExitInfo(pid, code, sig, _rusage_dict(ru))
        # Keep Popen from trying to reap a pid that is gone.
        self._popen.returncode = code if code is not None else -(sig or 0)


def spawn(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: Path | None = None,
    stdout: Path | None = None,
    stderr: Path | None = None,
    thp_disable: bool = False,
    death_signal: int = signal.SIGKILL,
    on_spawn: Callable[[int], None] | None = None,
    before_reap: Callable[[int], None] | None = None,
    rlimits: Mapping[str, int] | None = None,
    root: RootLaunch | None = None,
    pass_fds: Sequence[int] = (),
) -> Child:
    """Start `argv` as our child with exactly `env` (LD_PRELOAD honoured only for argv[0]).

    `on_spawn(pid)` runs before the binary executes; if it raises, the child is stopped and the
    error propagates. `before_reap(pid)` runs once, after the child has exited and before it is
    reaped (see the module doc). stdout/stderr go to the given files (appended), else to
    /dev/null. `rlimits` ({"nofile": N}) are set in the child only. With `root`, argv[0] and
    every path are as seen inside the root (servers.root), and cwd is entered inside it.
    `pass_fds` stay open in the child across both execs (a load client's pipes and board).
    """
    env = dict(env)
    env[PRELOAD_VAR] = env.pop("LD_PRELOAD", "")
    full = helper_argv(
        argv,
        parent=os.getpid(),
        death_signal=death_signal,
        thp_disable=thp_disable,
        rlimits=rlimits,
        root=root.root if root is not None else None,
        binds=root.binds if root is not None else (),
        chdir=str(cwd) if (root is not None and cwd is not None) else None,
    )
    gate_r, gate_w = os.pipe()
    out = open(stdout, "ab") if stdout else subprocess.DEVNULL
    err = open(stderr, "ab") if stderr else subprocess.DEVNULL
    try:
        popen = subprocess.Popen(
            full,
            env=env,
            # In a root, cwd is a path inside it: the helper enters it after the chroot.
            cwd=cwd if root is None else None,
            stdin=gate_r,
            stdout=out,
            stderr=err,
            process_group=0,
            close_fds=True,
            pass_fds=tuple(pass_fds),
        )
    except BaseException:
        os.close(gate_w)
        raise
    finally:
        os.close(gate_r)
        for f in (out, err):
            if hasattr(f, "close"):
                f.close()
    child = Child(popen, argv, before_reap)
    try:
        if on_spawn is not None:
            on_spawn(child.pid)
        os.write(gate_w, b"go\n")
    except BaseException:
        os.close(gate_w)
        child.terminate(term_timeout=5)
        raise
    os.close(gate_w)
    return child
