"""Prompt wake-ups for the few threads that timestamp measurements.

With 1536 clients on a 2-core machine, over 3000 threads are runnable at once and a thread that
wakes to take a 0.2 ms reading can wait a second or more for a CPU: the reading is then late and
its timestamp no longer matches the workload report it belongs to. These threads sleep almost all
the time, so giving them real-time priority (SCHED_FIFO 1) costs the server nothing measurable
(the collectors' own CPU, which `make bench` reports) and makes their timing trustworthy.

SCHED_RESET_ON_FORK is set with it: a process or thread created by a boosted thread starts with
the normal policy, so neither the server nor a client ever inherits the boost. Without the
privilege (not root, no CAP_SYS_NICE) nothing changes and the caller is told so.
"""

from __future__ import annotations

import os
import time

from collectors.errors import CollectorError
from collectors.procfs import ProcFS

POLICY = "SCHED_FIFO 1 (reset on fork)"


def boost(tid: int = 0) -> str | None:
    """Real-time priority for thread `tid` (0: the calling thread). Returns POLICY, or None when
    the system does not allow it."""
    try:
        os.sched_setscheduler(tid, os.SCHED_FIFO | os.SCHED_RESET_ON_FORK, os.sched_param(1))
    except (PermissionError, ProcessLookupError, OSError, AttributeError):
        return None
    return POLICY


def unboost(tid: int = 0) -> None:
    """Back to the normal policy (a no-op when it was never boosted or the thread is gone)."""
    try:
        os.sched_setscheduler(tid, os.SCHED_OTHER, os.sched_param(0))
    except (PermissionError, ProcessLookupError, OSError, AttributeError):
        pass


class IdleBoost:
    """Real-time priority for another process's thread that should sleep nearly all the time
    (sysbench's report thread), withdrawn as soon as it does not.

    A SCHED_FIFO thread that keeps running is never preempted by normal threads on its CPU: the
    server and the clients there would stall, and the benchmark would measure that. So after each
    check period (at least `period_s`: CPU time in /proc is counted in 10 ms ticks, too coarse to
    judge one 50 ms poll) the thread's CPU time (utime + stime of /proc/PID/task/TID/stat) is
    compared with the wall time that passed; above `max_share` the boost is withdrawn for good
    and `revoked` says why. A report thread uses well under 1 % (one wake-up per interval).
    """

    def __init__(
        self,
        pid: int,
        tid: int,
        *,
        max_share: float = 0.05,
        period_s: float = 1.0,
        proc_root: str = "/proc",
        clock=time.monotonic,
    ):
        self.pid, self.tid = pid, tid
        self.max_share, self.period_s = max_share, period_s
        self._tasks = ProcFS(f"{proc_root}/{pid}/task")  # a task's stat reads like a process's
        self._clock = clock
        self.policy: str | None = None  # what was applied (POLICY), None when it could not be
        self.revoked: str | None = None  # why the boost was withdrawn early
        self.max_seen_share = 0.0
        self._on = False
        self._t0 = 0.0
        self._cpu0 = 0.0

    @property
    def active(self) -> bool:
        """Whether the thread runs boosted now."""
        return self._on

    def _cpu_s(self) -> float | None:
        try:
            st = self._tasks.stat(self.tid)
        except CollectorError:  # ProcessGone included: the thread has ended
            return None
        return st.utime_s + st.stime_s

    def start(self) -> str | None:
        """Boost the thread; POLICY, or None when the system does not allow it (or it is gone)."""
        cpu = self._cpu_s()
        if cpu is None:
            return None
        self._t0, self._cpu0 = self._clock(), cpu
        self.policy = boost(self.tid)
        self._on = self.policy is not None
        return self.policy

    def check(self) -> None:
        """Withdraw the boost if the thread used more than max_share of a CPU since the last
        check (called at every poll; judged once a period has passed)."""
        if not self._on:
            return
        now = self._clock()
        if now - self._t0 < self.period_s:
            return
        cpu = self._cpu_s()
        if cpu is None:  # ended: nothing left to unboost
            self._on = False
            return
        share = (cpu - self._cpu0) / (now - self._t0)
        self.max_seen_share = max(self.max_seen_share, share)
        if share > self.max_share:
            self.revoke(
                f"used {share:.0%} of a CPU over {now - self._t0:.1f} s (limit {self.max_share:.0%})"
            )
            return
        self._t0, self._cpu0 = now, cpu

    def revoke(self, reason: str) -> None:
        """Back to the normal policy now, for the rest of its life; `reason` is recorded."""
        if self._on:
            unboost(self.tid)
            self._on = False
            self.revoked = reason

    def stop(self) -> None:
        """Back to the normal policy (the thread may outlive our interest in it)."""
        if self._on:
            unboost(self.tid)
            self._on = False

    def to_record(self) -> dict:
        return {
            "tid": self.tid,
            "policy": self.policy,
            "max_cpu_share": round(self.max_seen_share, 4),
            "revoked": self.revoked,
        }
