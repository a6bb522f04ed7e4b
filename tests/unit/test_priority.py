"""The guarded boost of another process's thread (collectors.priority.IdleBoost): withdrawn when
the thread uses more than a few % of a CPU, kept while it sleeps; on a fake /proc and on a real
thread."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from collectors import priority
from collectors.priority import POLICY, IdleBoost
from collectors.procfs import CLK_TCK


def _write_stat(root: Path, pid: int, tid: int, cpu_ticks: int) -> None:
    d = root / str(pid) / "task" / str(tid)
    d.mkdir(parents=True, exist_ok=True)
    # proc(5) fields 3.. after "(comm)": utime is field 14, stime 15 (half each here)
    fields = ["S"] + ["0"] * 49
    fields[14 - 3], fields[15 - 3] = str(cpu_ticks - cpu_ticks // 2), str(cpu_ticks // 2)
    (d / "stat").write_text(f"{tid} (sys bench) x) " + " ".join(fields) + "\n")


@pytest.fixture
def fake(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(priority, "boost", lambda tid=0: calls.append(("boost", tid)) or POLICY)
    monkeypatch.setattr(priority, "unboost", lambda tid=0: calls.append(("unboost", tid)))
    now = [100.0]
    return tmp_path, calls, now


def _guard(root, now, **kw):
    return IdleBoost(10, 11, proc_root=str(root), clock=lambda: now[0], **kw)


def test_a_sleeping_thread_keeps_its_boost(fake):
    root, calls, now = fake
    _write_stat(root, 10, 11, 500)
    g = _guard(root, now)
    assert g.start() == POLICY and g.active
    for step in range(1, 6):  # one tick (10 ms) a second: 1 % of a CPU
        now[0] += 1.0
        _write_stat(root, 10, 11, 500 + step * CLK_TCK // 100)
        g.check()
    assert g.active and g.revoked is None
    assert g.to_record()["max_cpu_share"] == pytest.approx(0.01)
    g.stop()
    assert calls == [("boost", 11), ("unboost", 11)] and not g.active


def test_a_busy_thread_is_unboosted_and_it_is_recorded(fake):
    root, calls, now = fake
    _write_stat(root, 10, 11, 0)
    g = _guard(root, now)
    g.start()
    now[0] += 0.5  # within one period: not judged yet, however busy
    _write_stat(root, 10, 11, CLK_TCK // 2)
    g.check()
    assert g.active
    now[0] += 0.6  # 1.1 s, 0.2 s of CPU: 18 %
    _write_stat(root, 10, 11, CLK_TCK // 5)
    g.check()
    assert not g.active
    assert g.revoked == "used 18% of a CPU over 1.1 s (limit 5%)"
    rec = g.to_record()
    assert rec["tid"] == 11 and rec["policy"] == POLICY and rec["revoked"] == g.revoked
    g.stop()  # already back to normal: no second unboost
    assert calls == [("boost", 11), ("unboost", 11)]


def test_a_thread_that_ended_is_left_alone(fake):
    root, calls, now = fake
    _write_stat(root, 10, 11, 0)
    g = _guard(root, now)
    g.start()
    (root / "10" / "task" / "11" / "stat").unlink()
    now[0] += 2
    g.check()
    g.stop()
    assert calls == [("boost", 11)] and g.revoked is None and not g.active


def test_a_missing_thread_is_never_boosted(fake):
    root, calls, now = fake
    g = _guard(root, now)
    assert g.start() is None and not g.active and calls == []


def test_explicit_revoke_names_why(fake):
    root, calls, now = fake
    _write_stat(root, 10, 11, 0)
    g = _guard(root, now)
    g.start()
    g.revoke("an interval report came from thread 12")
    assert g.to_record()["revoked"] == "an interval report came from thread 12"
    assert calls == [("boost", 11), ("unboost", 11)]


# -- a real thread ---------------------------------------------------------------------------

_CHILD = r"""
import sys, threading, time
busy = sys.argv[1] == "busy"
def work():
    while True:
        if busy:  # 10 ms running in every 50: never long enough to starve anything
            end = time.perf_counter() + 0.010
            while time.perf_counter() < end:
                pass
        time.sleep(0.040)
t = threading.Thread(target=work, daemon=True)
t.start()
time.sleep(0.05)
print(t.native_id, flush=True)
time.sleep(30)
"""


def _policy(pid: int, tid: int) -> int:
    with open(f"/proc/{pid}/task/{tid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[38])


@pytest.mark.parametrize("mode", ["busy", "idle"])
def test_real_thread(mode):
    if os.geteuid() != 0:
        pytest.skip("real-time priority needs root (the boost is then simply not applied)")
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, mode], stdout=subprocess.PIPE, text=True
    )
    try:
        tid = int(child.stdout.readline())
        g = IdleBoost(child.pid, tid, period_s=0.5)
        assert g.start() == POLICY
        assert _policy(child.pid, tid) == 1  # SCHED_FIFO
        end = time.monotonic() + 1.6
        while time.monotonic() < end and g.active:
            time.sleep(0.05)
            g.check()
        if mode == "busy":  # ~20 % of a CPU
            assert not g.active and g.revoked and "of a CPU" in g.revoked
            assert _policy(child.pid, tid) == 0
        else:
            assert g.active and g.revoked is None and g.max_seen_share < 0.05
            g.stop()
            assert _policy(child.pid, tid) == 0
    finally:
        child.kill()
        child.wait()
