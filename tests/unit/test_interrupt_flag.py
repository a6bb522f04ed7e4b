"""servers.interrupts: signals set a flag, the runner raises at safe points, clean-ups are held,
a second signal says what is awaited, a third skips the clean shutdown (still killed and reaped)."""

from __future__ import annotations

import os
import select
import signal

import pytest

from servers import interrupts
from servers.interrupts import Interrupted, Interrupts
from servers.life import ServerLife


@pytest.fixture
def said():
    return []


@pytest.fixture
def detached():
    return []


@pytest.fixture
def gate(said, detached):
    # detach: the real one would point pytest's own stdout at /dev/null on SIGHUP
    g = Interrupts(say=said.append, detach=lambda: detached.append(True))
    g.install()
    yield g
    g.uninstall()


def _readable(fd: int) -> bool:
    return bool(select.select([fd], [], [], 0)[0])


def test_a_signal_only_sets_the_flag_until_a_safe_point(gate):
    interrupts.check()  # nothing yet
    assert not _readable(gate.wake_fd)
    os.kill(os.getpid(), signal.SIGTERM)  # the handler runs here: it must not raise
    assert gate.pending and _readable(gate.wake_fd)
    with pytest.raises(Interrupted) as e:
        interrupts.check()
    assert e.value.exit_code == 143 and e.value.signum == signal.SIGTERM


def test_hangup_is_an_interruption_like_ctrl_c(gate, detached):
    os.kill(os.getpid(), signal.SIGHUP)
    assert detached == [True]  # the dead terminal's streams are let go
    with pytest.raises(Interrupted) as e:
        gate.check()
    assert e.value.exit_code == 129


def test_held_clean_up_is_never_cut_short(gate):
    gate.handle(signal.SIGINT)
    done = []
    with interrupts.held():
        interrupts.check()  # held: no raise
        with interrupts.held():
            interrupts.check()
        interrupts.check()
        done.append("all steps")
    assert done == ["all steps"]
    with pytest.raises(Interrupted):
        interrupts.check()


def test_second_signal_says_what_is_awaited_third_hurries(gate, said):
    gate.handle(signal.SIGINT)
    assert said == [] and not interrupts.hurrying()
    with interrupts.doing("the server (pid 42) to shut down"):
        gate.handle(signal.SIGINT)
        assert len(said) == 1 and "the server (pid 42) to shut down" in said[0]
        assert not interrupts.hurrying()
        gate.handle(signal.SIGINT)
    assert interrupts.hurrying() and "skipping the clean shutdown" in said[1]
    assert gate.first == signal.SIGINT  # the exit code stays the first signal's


def test_uninstall_restores_handlers_and_deactivates(said):
    before = signal.getsignal(signal.SIGINT)
    g = Interrupts(say=said.append, detach=lambda: None)
    g.install()
    assert interrupts.active() is g
    g.uninstall()
    assert interrupts.active() is None and signal.getsignal(signal.SIGINT) is before
    interrupts.check()  # no active gate: a no-op
    assert not interrupts.hurrying()


class _FakeChild:
    """Records how a ServerLife stops it; exits at SIGTERM (or SIGKILL)."""

    pid = 4242

    def __init__(self):
        self.exit = None
        self.calls = []

    def wait(self, timeout=None, cut_short=None):
        self.calls.append(("wait", timeout))
        return self.exit

    def terminate(self, term_timeout, kill_timeout):
        self.calls.append(("terminate", interrupts.hurrying()))
        self.exit = "reaped"
        return self.exit


class _Life(ServerLife):
    def __init__(self):
        self.child = _FakeChild()
        self.requested = 0

    def _request_shutdown(self) -> bool:
        self.requested += 1
        return True


def test_stop_completes_under_a_pending_signal(gate):
    gate.handle(signal.SIGINT)
    life = _Life()
    assert life.stop(timeout_s=5) == "reaped"
    assert life.requested == 1  # the clean shutdown was still asked for
    assert life.child.calls == [("wait", 5), ("terminate", False)]


def test_third_signal_skips_the_clean_shutdown_but_still_reaps(gate):
    for _ in range(3):
        gate.handle(signal.SIGINT)
    life = _Life()
    assert life.stop(timeout_s=5) == "reaped"
    assert life.requested == 0
    assert life.child.calls == [("terminate", True)]


def test_nohup_keeps_hangups_ignored(said):
    old = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        g = Interrupts(say=said.append, detach=lambda: None)
        g.install()
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
        assert signal.getsignal(signal.SIGINT) == g.handle
        g.uninstall()
    finally:
        signal.signal(signal.SIGHUP, old)
