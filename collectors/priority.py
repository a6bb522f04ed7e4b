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
