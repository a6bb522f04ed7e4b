"""The start sequence both server families share (servers.life): spawn once with the collectors'
hooks, wait with a probe, prove the allocator, and stop the child on every failure. The child is a
stand-in object (servers.launch.spawn replaced): the real families run in tests/integration."""

from __future__ import annotations

import socket
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import pytest

import servers.life as life
from servers.errors import AllocatorError, ServerError
from servers.life import Launch, ServerLife


class _Child:
    """A child that has exited after `polls_alive` polls (never, when None)."""

    pid = 31337

    def __init__(self, polls_alive: int | None = None):
        self.polls_alive = polls_alive
        self.exit = None
        self.terminated = 0

    @property
    def alive(self) -> bool:
        return self.exit is None

    def poll(self):
        if self.polls_alive is not None:
            if self.polls_alive == 0 and self.exit is None:
                self.exit = SimpleNamespace(describe="exited with status 3")
            self.polls_alive -= 1
        return self.exit

    def wait(self, timeout=None, cut_short=None):
        return self.exit

    def terminate(self, term_timeout, kill_timeout):
        self.terminated += 1
        self.exit = self.exit or SimpleNamespace(describe="killed")
        return self.exit


class _Life(ServerLife):
    noun = "fakeserver"

    def __init__(self, tmp: Path, ready_after: int = 0, prove_error: Exception | None = None):
        self.workdir = tmp
        self.error_log = tmp / "err.log"
        self.error_log.write_text("starting\n[ERROR] the reason it died\n")
        self.binary = SimpleNamespace(path="/usr/sbin/fakeserverd")
        self.launch_env = {}
        self.ready_after = ready_after
        self.prove_error = prove_error
        self.probes = 0
        self.probe_open = False
        self.probe_closed = False
        self.shutdown_requests = 0

    def _prepare_launch(self) -> Launch:
        self._claim_port()
        self.launch_env = {"LD_PRELOAD": "/lib/libfake.so"}
        return Launch(["/usr/sbin/fakeserverd", f"--port={self.port}"], log=self.error_log)

    @contextmanager
    def _readiness_probe(self):
        self.probe_open = True

        def probe():
            self.probes += 1
            return None if self.probes > self.ready_after else "refused"

        try:
            yield probe
        finally:
            self.probe_closed = True

    def _not_ready_text(self, timeout_s, why):
        return f"did not listen within {timeout_s:.1f}s ({why})"

    def _prove(self) -> None:
        if self.prove_error is not None:
            raise self.prove_error
        self.evidence = {"verdict": "ok"}

    def _request_shutdown(self) -> bool:
        self.shutdown_requests += 1
        return False


@pytest.fixture
def spawned(monkeypatch):
    """The spawn calls made, with the child each returned (set `spawned.child` first)."""
    calls = SimpleNamespace(child=_Child(), args=[])

    def fake_spawn(argv, **kw):
        calls.args.append((argv, kw))
        return calls.child

    monkeypatch.setattr(life, "spawn", fake_spawn)
    return calls


def test_start_spawns_once_with_the_hooks_and_returns_the_pid(tmp_path, spawned):
    srv = _Life(tmp_path, ready_after=2)

    def on_spawn(pid):
        pass

    def before_reap(pid):
        pass

    assert srv.start(on_spawn=on_spawn, before_reap=before_reap, timeout_s=30) == _Child.pid
    ((argv, kw),) = spawned.args
    assert argv == ["/usr/sbin/fakeserverd", f"--port={srv.port}"] and srv.port > 0
    assert kw["env"] == {"LD_PRELOAD": "/lib/libfake.so"} and kw["cwd"] == tmp_path
    assert kw["stdout"] == kw["stderr"] == srv.error_log and kw["root"] is None
    assert kw["on_spawn"] is on_spawn and kw["before_reap"] is before_reap
    assert srv.probes == 3 and srv.probe_closed  # two refusals, then the answer
    assert srv.evidence == {"verdict": "ok"} and spawned.child.terminated == 0


def test_an_exit_during_start_up_names_the_log_and_reaps(tmp_path, spawned):
    spawned.child = _Child(polls_alive=1)
    srv = _Life(tmp_path, ready_after=10)
    with pytest.raises(ServerError) as e:
        srv.start(timeout_s=30)
    assert str(e.value).startswith("/usr/sbin/fakeserverd exited with status 3 during start-up")
    assert "[ERROR] the reason it died" in str(e.value) and str(srv.error_log) in str(e.value)
    assert srv.probe_closed and srv.exit is spawned.child.exit


def test_a_time_out_says_what_the_family_waited_for_and_stops_the_child(tmp_path, spawned):
    srv = _Life(tmp_path, ready_after=10**6)
    with pytest.raises(ServerError, match=r"did not listen within 0\.2s \(refused\)"):
        srv.start(timeout_s=0.2)
    assert spawned.child.terminated == 1 and srv.shutdown_requests == 1 and srv.probe_closed


def test_a_failed_proof_keeps_its_evidence_and_stops_the_child(tmp_path, spawned):
    err = AllocatorError("malloc is bound to libc, not libfake.so")
    err.evidence = {"verdict": "failed"}
    srv = _Life(tmp_path, prove_error=err)
    with pytest.raises(AllocatorError, match="bound to libc"):
        srv.start(timeout_s=30)
    assert srv.evidence == {"verdict": "failed"} and spawned.child.terminated == 1


def test_a_running_server_is_not_started_twice(tmp_path, spawned):
    srv = _Life(tmp_path)
    srv.start(timeout_s=30)
    with pytest.raises(ServerError, match=rf"fakeserver in {tmp_path} is already running"):
        srv.start(timeout_s=30)
    assert len(spawned.args) == 1


def test_a_port_in_use_is_refused_by_number_before_launching(tmp_path, spawned):
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        srv = _Life(tmp_path)
        srv.requested_port = held.getsockname()[1]
        with pytest.raises(
            ServerError, match=rf"port {srv.requested_port} on 127.0.0.1 is already"
        ):
            srv.start(timeout_s=30)
    assert spawned.args == []
