"""Whole-process voluntary and involuntary context switches, reconciled with wait4 at exit.

Why not /proc: `/proc/PID/status` (and psutil's num_ctx_switches()) counts the main thread only,
and summing `/proc/PID/task/*/status` forgets every thread that has exited, so it can go backwards.

The source used here ("perf"): two counting perf events opened on the server's pid while it still
waits in the launch gate (servers.launch.spawn calls on_spawn before exec), with inherit=1 (every
thread the server ever creates gets a clone of the event; an exiting thread's count is folded into
ours) and enable_on_exec=1 (counting starts at the server's first instruction, not in the gate):

- total = PERF_COUNT_SW_CONTEXT_SWITCHES, counted in the scheduler for every switch-out, exactly
  where the kernel increments a task's nvcsw or nivcsw;
- involuntary = the sched:sched_switch tracepoint filtered on the switched-out task's prev_state:
  the kernel counts a switch as involuntary (nivcsw) when the task was still runnable. The
  tracepoint reports a runnable task as prev_state 0 ("R") and a task preempted inside the kernel
  as TASK_REPORT_MAX ("R+"; 0x100 here, read from the tracepoint's format). Measured on this
  kernel (6.18, preempt=none): a CPU-bound thread losing its slice at the tick shows up as 0, not
  as R+, and sched_yield() also shows as 0 and counts as nivcsw; so the filter takes both values;
- voluntary = total - involuntary.

One kernel path is misattributed: a task that goes to sleep just as a signal arrives is counted
voluntary by the kernel but reported runnable by the tracepoint. It is rare (a race with signal
delivery); reconciliation would show it.

What the counts miss, and why reconciliation has an absolute tolerance: the switches of the launch
gate (/bin/sh blocks on its pipe before exec; wait4 counts them, enable_on_exec does not) and a
thread's last few switches between perf_event_exit_task() and the point where the kernel folds
its nvcsw into the process totals. Measured: 1 to 12 voluntary switches per process life with
up to 1000 exited threads.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from pathlib import Path

from collectors.errors import CollectorError, ProcessGone
from collectors.perf_event import (
    PERF_COUNT_SW_CONTEXT_SWITCHES,
    PERF_TYPE_SOFTWARE,
    PERF_TYPE_TRACEPOINT,
    Counter,
    PerfUnavailable,
    tracepoint_dir,
)
from collectors.procfs import ProcFS

# Pass when both classes agree with wait4 within this relative difference...
REL_TOLERANCE = 0.02
# ...or within this many switches: what the launch gate and thread exits can account for
# (measured <= 12, see the module doc). It only decides for totals below 1500 switches.
ABS_TOLERANCE = 30

SOURCE_PERF = "perf"
SOURCE_PROCFS = "procfs-task-sum"
SOURCE_NOTES = {
    SOURCE_PERF: (
        "perf counting events attached before exec with inherit: software context-switches "
        "(total) and sched:sched_switch filtered on a runnable prev_state (involuntary); "
        "includes exited threads"
    ),
    SOURCE_PROCFS: (
        "sum of /proc/PID/task/*/status over live threads: loses exited threads and can go "
        "backwards; not reconcilable"
    ),
}


@dataclass(frozen=True)
class CtxCounts:
    """Context switches of the whole process so far (since exec for perf)."""

    voluntary: int
    involuntary: int
    source: str

    @property
    def total(self) -> int:
        return self.voluntary + self.involuntary

    def to_dict(self) -> dict:
        return asdict(self)


def task_report_max(format_text: str) -> int:
    """The prev_state value of a task preempted in the kernel, from sched_switch's format.

    The print format lists the reportable state bits ({ 0x01, "S" } ... { 0x80, "I" }); the
    preempted marker is the next bit above the highest (TASK_REPORT_MAX).
    """
    flags = [int(x, 16) for x in re.findall(r"\{\s*(0x[0-9a-fA-F]+)\s*,\s*\"", format_text)]
    if not flags:
        raise PerfUnavailable("sched_switch format: no prev_state flag list to derive R+ from")
    return max(flags) << 1


class PerfCtxSwitches:
    """The perf source. Open it on a pid that has not exec'd its server yet (see module doc)."""

    source = SOURCE_PERF

    def __init__(self, pid: int, *, before_exec: bool = True):
        tp = tracepoint_dir("sched", "sched_switch")
        tp_id = int((tp / "id").read_text())
        preempted = task_report_max((tp / "format").read_text())
        self.filter = f"prev_state == 0 || prev_state == {preempted}"
        self.before_exec = before_exec
        self._total = Counter(
            pid,
            PERF_TYPE_SOFTWARE,
            PERF_COUNT_SW_CONTEXT_SWITCHES,
            enable_on_exec=before_exec,
            name="context-switches",
        )
        try:
            self._invol = Counter(
                pid,
                PERF_TYPE_TRACEPOINT,
                tp_id,
                enable_on_exec=before_exec,
                filter_=self.filter,
                name="sched:sched_switch(runnable)",
            )
        except BaseException:
            self._total.close()
            raise

    def read(self) -> CtxCounts:
        # Involuntary first: a switch landing between the two reads then shows as one extra
        # voluntary switch for a moment, never as a negative count.
        invol = self._invol.value
        total = self._total.value
        return CtxCounts(max(total - invol, 0), invol, self.source)

    def close(self) -> None:
        self._total.close()
        self._invol.close()


class ProcfsCtxSwitches:
    """The weaker fallback: live threads only. Costs ~40 ms per read at 1500 threads."""

    source = SOURCE_PROCFS

    def __init__(self, pid: int, procfs: ProcFS):
        self.pid = pid
        self.procfs = procfs
        self._last = CtxCounts(0, 0, self.source)

    def read(self) -> CtxCounts:
        vol = invol = 0
        for tid in self.procfs.task_ids(self.pid):
            got = self.procfs.task_status_ctxsw(self.pid, tid)
            if got is not None:
                vol += got[0]
                invol += got[1]
        self._last = CtxCounts(vol, invol, self.source)
        return self._last

    def close(self) -> None:
        pass


def open_source(
    pid: int, *, use_perf: bool, before_exec: bool, procfs: ProcFS
) -> tuple[PerfCtxSwitches | ProcfsCtxSwitches, str | None]:
    """The best available source and, when it is the fallback, why perf was not used."""
    if not use_perf:
        return ProcfsCtxSwitches(pid, procfs), "perf disabled by configuration (collect.perf)"
    try:
        return PerfCtxSwitches(pid, before_exec=before_exec), None
    except ProcessGone:
        raise
    except (PerfUnavailable, OSError, ValueError) as e:
        return ProcfsCtxSwitches(pid, procfs), str(e)


def reconcile(counts: CtxCounts | dict | None, rusage: dict | None, *, note: str = "") -> dict:
    """Compare whole-life counts with os.wait4's ru_nvcsw/ru_nivcsw.

    Passes when voluntary and involuntary each differ by at most 2% of wait4's figure or by at
    most ABS_TOLERANCE switches. Only the perf source can pass or fail; anything else, or a
    missing rusage (process not reaped by us), is "not-checked" with the reason.
    """
    if isinstance(counts, dict):
        counts = CtxCounts(int(counts["voluntary"]), int(counts["involuntary"]), counts["source"])
    out: dict = {
        "check": "not-checked",
        "source": counts.source if counts else None,
        "perf_voluntary": None,
        "wait4_voluntary": None,
        "perf_involuntary": None,
        "wait4_involuntary": None,
        "diff_pct": None,
        "tolerance": f"{REL_TOLERANCE:.0%} or {ABS_TOLERANCE} switches per class",
        "reason": note or None,
    }
    if rusage:
        out["wait4_voluntary"] = int(rusage["ru_nvcsw"])
        out["wait4_involuntary"] = int(rusage["ru_nivcsw"])
    if counts is None or counts.source != SOURCE_PERF:
        out["reason"] = note or f"source {out['source']} cannot be reconciled"
        return out
    out["perf_voluntary"] = counts.voluntary
    out["perf_involuntary"] = counts.involuntary
    if not rusage:
        out["reason"] = note or "no wait4 rusage (the process was not reaped by us)"
        return out
    ok = True
    for cls in ("voluntary", "involuntary"):
        mine, kernel = out[f"perf_{cls}"], out[f"wait4_{cls}"]
        d = abs(mine - kernel)
        out[f"diff_{cls}"] = mine - kernel
        out[f"diff_pct_{cls}"] = round(100.0 * d / kernel, 3) if kernel else None
        if d > max(REL_TOLERANCE * kernel, ABS_TOLERANCE):
            ok = False
    pcts = [out[f"diff_pct_{c}"] for c in ("voluntary", "involuntary")]
    out["diff_pct"] = max((p for p in pcts if p is not None), default=None)
    out["check"] = "passed" if ok else "failed"
    return out


def psutil_style(procfs: ProcFS, pid: int) -> CtxCounts:
    """What psutil's num_ctx_switches() reports: the main thread's counters. For comparison only."""
    st = procfs.status(pid)
    if st.voluntary_ctxt_switches is None:
        raise CollectorError(f"{procfs.root}/{pid}/status has no ctxt_switches lines")
    return CtxCounts(st.voluntary_ctxt_switches, st.nonvoluntary_ctxt_switches or 0, "main-thread")


def tracefs_root() -> Path | None:
    """Where tracefs is mounted, for doctor-style reports; None when not found."""
    try:
        return tracepoint_dir("sched", "sched_switch").parents[2]
    except PerfUnavailable:
        return None
