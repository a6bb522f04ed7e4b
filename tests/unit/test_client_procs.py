"""suites.workloads.client_procs with a probe client (tests/unit/client_probe.py), no server: clients start
through the exec helper (parent-death signal, own process group, our direct child), claim keys
exactly once across processes, and a client that raises or dies is a one-line failure."""

from __future__ import annotations

import os
import signal
import time

import pytest

from suites.workloads.client_procs import ClientSet

PROBE = "tests.unit.client_probe"


def _level(tmp, do: str, clients: int = 4, limit: int = 5000, threads: bool = False):
    from tests.unit.client_probe import client_main

    cs = ClientSet(
        module=PROBE,
        work={"do": do, "limit": limit},
        roles=[("probe", i) for i in range(clients)],
        slots=clients,
        cwd=tmp / "logs",
        stderr=tmp / "logs" / "probe.stderr",
        threads=client_main if threads else None,
    )
    try:
        cs.start()
        cs.wait_ready(30, "30 s")
        if not cs.failures:
            cs.go(time.monotonic())
            deadline = time.monotonic() + 30
            while not cs.finished(cs.roles) and time.monotonic() < deadline:
                cs.take(0.5)
    finally:
        cs.finish(10)
    return cs


@pytest.mark.parametrize("threads", [False, True])
def test_keys_are_claimed_exactly_once_across_clients(short_tmp, threads):
    cs = _level(short_tmp, "claim", threads=threads)
    assert cs.failures == []
    claims = [c for fig in cs.done.values() for c in fig["claims"]]
    keys = sorted(k for first, n in claims for k in range(first, first + n))
    assert keys == list(range(5000))  # every key once: no overlap, no gap, the budget exact
    assert sum(cs.counts()) == 5000  # the slots the runner reads say the same
    assert all(fig["blob"] == b"\x00\xffbytes" for fig in cs.done.values())
    if not threads:
        for fig in cs.done.values():
            assert fig["ppid"] == os.getpid()  # the helper exec'd in place: our direct child
            assert fig["pgid"] == fig["pid"]  # its own process group
            assert fig["pdeathsig"] == signal.SIGKILL  # dies with the runner
        assert cs.life_cpu_s() > 0  # wait4's whole-life rusage of the client processes
        assert not (short_tmp / "logs" / "probe.stderr").exists()  # nothing said: no file


def test_a_client_that_raises_is_one_line_failure(short_tmp):
    cs = _level(short_tmp, "raise", clients=2)
    assert len(cs.failures) >= 1
    assert cs.failures[0].startswith("probe client ")
    assert "RuntimeError: no such table: probe" in cs.failures[0]
    assert all("\n" not in f for f in cs.failures)


def test_a_client_killed_is_named_with_its_signal(short_tmp):
    cs = _level(short_tmp, "die", clients=2)
    assert cs.failures == ["probe client 1 killed by signal 9 (SIGKILL)"]
