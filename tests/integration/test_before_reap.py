"""servers.launch's pre-reap hook on real children: called exactly once, while the child is a
zombie (exited, not reaped), on every path that reaps it; and the child is reaped even when the
hook fails."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import pytest

from servers.launch import spawn

pytestmark = pytest.mark.integration


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


class Hook:
    def __init__(self, fail: BaseException | None = None):
        self.calls: list[tuple[int, str]] = []
        self.fail = fail

    def __call__(self, pid: int) -> None:
        self.calls.append((pid, _state(pid)))  # readable: not reaped yet
        if self.fail is not None:
            raise self.fail


def test_child_that_exits_by_itself():
    hook = Hook()
    child = spawn(["/bin/sh", "-c", "exit 3"], env={}, before_reap=hook)
    exit_info = child.wait(30)
    assert exit_info.returncode == 3 and exit_info.rusage
    assert hook.calls == [(child.pid, "Z")]
    assert child.poll() is exit_info and child.wait(1) is exit_info
    assert len(hook.calls) == 1
    assert not Path(f"/proc/{child.pid}").exists() or _state(child.pid) != "Z"  # reaped


def test_sigterm_then_sigkill_paths(tmp_path):
    term = Hook()
    child = spawn(["sleep", "60"], env={}, before_reap=term)
    exit_info = child.terminate(term_timeout=10)
    assert exit_info.signal == signal.SIGTERM
    assert term.calls == [(child.pid, "Z")]

    kill = Hook()
    # Ignores SIGTERM (and so does its sleep, the disposition survives exec): needs SIGKILL.
    ready = tmp_path / "ready"
    script = f"trap '' TERM; : > {ready}; sleep 60"
    child = spawn(["/bin/sh", "-c", script], env={}, before_reap=kill)
    deadline = time.monotonic() + 30
    while not ready.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    exit_info = child.terminate(term_timeout=0.5, kill_timeout=10)
    assert exit_info.signal == signal.SIGKILL
    assert kill.calls == [(child.pid, "Z")]


def test_failing_hook_still_reaps_and_is_recorded():
    hook = Hook(fail=RuntimeError("reading failed"))
    child = spawn(["/bin/sh", "-c", "exit 0"], env={}, before_reap=hook)
    exit_info = child.wait(30)
    assert exit_info is not None and exit_info.returncode == 0 and exit_info.rusage
    assert len(hook.calls) == 1
    assert "RuntimeError: reading failed" in exit_info.before_reap_error
    assert exit_info.to_manifest()["before_reap_error"] == exit_info.before_reap_error


def test_interrupted_hook_still_reaps():
    hook = Hook(fail=KeyboardInterrupt())
    child = spawn(["/bin/sh", "-c", "exit 0"], env={}, before_reap=hook)
    with pytest.raises(KeyboardInterrupt):
        child.wait(30)
    assert child.exit is not None and child.exit.returncode == 0  # reaped before propagating
    assert child.poll() is child.exit and len(hook.calls) == 1


def test_concurrent_pollers_run_the_hook_once():
    hook = Hook()
    child = spawn(["sleep", "0.3"], env={}, before_reap=hook)
    exits = []
    pollers = [threading.Thread(target=lambda: exits.append(child.wait(30))) for _ in range(4)]
    for t in pollers:
        t.start()
    for t in pollers:
        t.join()
    assert len(hook.calls) == 1
    assert all(e is child.exit for e in exits) and child.exit.returncode == 0


def test_without_hook_nothing_changes():
    child = spawn(["/bin/sh", "-c", "exit 5"], env={})
    assert child.wait(30).returncode == 5
    assert "before_reap_error" not in child.exit.to_manifest()
