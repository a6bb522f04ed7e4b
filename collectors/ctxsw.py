"""Whole-process voluntary and involuntary context switches, reconciled with wait4 at exit.

Why not /proc: `/proc/PID/status` (and psutil's num_ctx_switches()) counts the main thread only,
and summing `/proc/PID/task/*/status` forgets every thread that has exited, so it can go backwards.

Sources, in the order they are tried (the manifest names the one used and why the better ones
were not: ctxsw_source, ctxsw_source_note, ctxsw_fallback_reason):

1. "taskstats" (collectors.taskstats): the kernel's per-thread-group counters over generic
   netlink. A TGID reading is what wait4 reports at exit — nvcsw/nivcsw of every thread, those
   that exited included — read at any moment, and nothing is attached to the server, so it costs
   the server nothing between our reads. Needs root (CAP_NET_ADMIN), CONFIG_TASKSTATS, and a
   kernel that keeps exited threads' switches in TGID readings (checked by a probe once per
   process; kernels before the 2026 fix lose them).
   It counts from fork: the pid is the same task before and after the launch gate execs the
   server, so its counts include the gate's (/bin/sh blocks on its pipe: measured 1 voluntary
   switch, and the few between fork and exec), exactly as wait4's do. So the first phase starts
   from zero, the sum of the phase deltas equals the final reading, and the final reading is
   taken when the server has exited but is not reaped yet (a zombie: every thread is gone, the
   totals are final and the pid cannot be reused) by a hook servers.launch calls before wait4
   (CollectorSession.before_reap). Reconciliation compares that whole-life reading with wait4 per
   class. What can still differ: a thread's last switches after fill_tgid_exit() (in do_exit,
   before exit_mm and friends) that wait4's totals, folded in later, do count. Measured: 8
   voluntary and 1 involuntary of ~15,000/1,700 for a process whose 500 threads exited; 1
   voluntary of 6,333 with 1,200 exited threads, and 1 of each of 3,082/544 for MariaDB after
   400 connection threads exited (tests/integration/test_ctxsw_reconcile.py). On a loaded
   machine the exit path is preempted more: the same MariaDB test beside another test run
   (make test's second worker) gave 3,177 of 3,178 voluntary but 400 of 485 involuntary (17.5%
   short), so a life whose threads come and go on a busy machine can fail the involuntary check.
   That failure is then the true answer (its per-level involuntary figures are short too) and
   the report says so.

2. "perf" (the fallback when taskstats is unavailable, allowed by `[collect] perf`): two counting
   perf events opened on the server's pid while it still waits in the launch gate
   (servers.launch.spawn calls on_spawn before exec), with inherit=1 (every thread the server
   ever creates gets a clone of the event; an exiting thread's count is folded into ours) and
   enable_on_exec=1 (counting starts at the server's first instruction, not in the gate):

   - total = PERF_COUNT_SW_CONTEXT_SWITCHES, counted in the scheduler for every switch-out,
     exactly where the kernel increments a task's nvcsw or nivcsw;
   - involuntary = the sched:sched_switch tracepoint filtered on the switched-out task's
     prev_state: the kernel counts a switch as involuntary (nivcsw) when the task was still
     runnable. The tracepoint reports a runnable task as prev_state 0 ("R") and a task preempted
     inside the kernel as TASK_REPORT_MAX ("R+"; 0x100 here, read from the tracepoint's format).
     Measured on this kernel (6.18, preempt=none): a CPU-bound thread losing its slice at the
     tick shows up as 0, not as R+, and sched_yield() also shows as 0 and counts as nivcsw; so
     the filter takes both values;
   - voluntary = total - involuntary.

   One kernel path is misattributed: a task that goes to sleep just as a signal arrives is
   counted voluntary by the kernel but reported runnable by the tracepoint. It is rare (a race
   with signal delivery); reconciliation would show it.

   What the perf counts miss: the switches of the launch gate (enable_on_exec) and a thread's
   last few switches between perf_event_exit_task() and the point where the kernel folds its
   nvcsw into the process totals. Measured: 1 to 12 voluntary switches per process life with up
   to 1000 exited threads.

   Its cost is why it is only the fallback: every context switch of every server thread pays
   for the inherited events (and tracefs must be mounted). Measured on POINT_SELECT@64, six
   interleaved lives each: median 32.6k QPS with perf counters vs 38.4k with the same collectors
   without them — a bias, too, since an allocator that causes more switches pays more.
   `make bench` measures taskstats against perf side by side.

3. "procfs-task-sum": the sum over live threads; loses exited threads, never reconciled.

The absolute tolerance of the reconciliation covers the few switches either source can miss.
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
from collectors.taskstats import TaskstatsClient, check_usable
from rundir.format import CTXSW_PERF, CTXSW_PROCFS, CTXSW_TASKSTATS, WHOLE_PROCESS_SOURCES

# Pass when both classes agree with wait4 within this relative difference...
REL_TOLERANCE = 0.02
# ...or within this many switches: what the launch gate and thread exits can account for
# (measured <= 12, see the module doc). It only decides for totals below 1500 switches.
ABS_TOLERANCE = 30

# The names a run directory records (rundir.format); whole-process sources count every thread
# the process ever had: reconciled with wait4, trusted per op.
SOURCE_TASKSTATS = CTXSW_TASKSTATS
SOURCE_PERF = CTXSW_PERF
SOURCE_PROCFS = CTXSW_PROCFS
SOURCE_NOTES = {
    SOURCE_TASKSTATS: (
        "kernel taskstats (generic netlink) TGID readings: nvcsw/nivcsw of every thread, exited "
        "ones included, counted from fork (the launch gate's few switches too, as wait4); final "
        "reading taken at exit before reaping; nothing attached to the server"
    ),
    SOURCE_PERF: (
        "perf counting events attached before exec with inherit: software context-switches "
        "(total) and sched:sched_switch filtered on a runnable prev_state (involuntary); "
        "includes exited threads; every switch of every server thread pays for the events"
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


class TaskstatsCtxSwitches:
    """The taskstats source (see module doc). One netlink socket, closed by close()."""

    source = SOURCE_TASKSTATS
    cheap = True  # one netlink round trip: fine at every window mark
    counts_from_fork = True  # the pid's whole life, launch gate included

    def __init__(self, pid: int):
        self.pid = pid
        self.final: CtxCounts | None = None  # the whole-life reading at exit (read_final)
        self.probe: dict | None = None
        self._client = TaskstatsClient()
        try:
            self.probe = check_usable(self._client)
            self._client.read_tgid(pid)  # the pid is there and readable (ProcessGone if not)
        except BaseException:
            self._client.close()
            raise

    def read(self) -> CtxCounts:
        r = self._client.read_tgid(self.pid)
        return CtxCounts(r.nvcsw, r.nivcsw, self.source)

    def read_final(self) -> CtxCounts:
        """Call once the process has exited and before it is reaped: its whole-life totals."""
        self.final = self.read()
        return self.final

    def after_exit(self) -> CtxCounts | None:
        """What is known once the process is gone: the reading taken at exit, if one was."""
        return self.final

    def close(self) -> None:
        self._client.close()


class PerfCtxSwitches:
    """The perf source. Open it on a pid that has not exec'd its server yet (see module doc)."""

    source = SOURCE_PERF
    cheap = True  # two 24-byte reads
    counts_from_fork = False  # from exec (enable_on_exec) or from when it was opened

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

    def read_final(self) -> CtxCounts:
        return self.read()

    def after_exit(self) -> CtxCounts:
        """perf counters keep their final totals after the target exits."""
        return self.read()

    def close(self) -> None:
        self._total.close()
        self._invol.close()


class ProcfsCtxSwitches:
    """The weaker fallback: live threads only. Costs ~40 ms per read at 1500 threads."""

    source = SOURCE_PROCFS
    cheap = False  # walks every thread: ~80 ms at 1536 threads, kept out of window marks
    counts_from_fork = False

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

    def read_final(self) -> None:
        return None  # a zombie's task directory no longer lists its threads

    def after_exit(self) -> None:
        return None

    def close(self) -> None:
        pass


CtxSource = TaskstatsCtxSwitches | PerfCtxSwitches | ProcfsCtxSwitches


def open_source(
    pid: int,
    *,
    use_perf: bool,
    before_exec: bool,
    procfs: ProcFS,
    use_taskstats: bool = True,
) -> tuple[CtxSource, str | None]:
    """The best available source (taskstats, then perf if allowed, then procfs) and, when it is
    a fallback, why each better one was not used (None when taskstats is used)."""
    why: list[str] = []
    live = Path(procfs.root).resolve() == Path("/proc")
    if not live:
        # A fixture procfs (tests): its pids are not the kernel's, whatever the kernel says.
        why.append(f"procfs root {procfs.root} is not the live /proc: kernel sources not used")
    elif not use_taskstats:
        why.append("taskstats not used (disabled by the caller)")
    else:
        try:
            return TaskstatsCtxSwitches(pid), None
        except ProcessGone:
            raise
        except (CollectorError, OSError) as e:
            why.append(f"taskstats unavailable: {e}")
    if live and not use_perf:
        why.append("perf fallback not allowed (collect.perf = false)")
    elif live:
        try:
            return PerfCtxSwitches(pid, before_exec=before_exec), "; ".join(why)
        except ProcessGone:
            raise
        except (PerfUnavailable, OSError, ValueError) as e:
            why.append(f"perf unavailable: {e}")
    return ProcfsCtxSwitches(pid, procfs), "; ".join(why)


def reconcile(counts: CtxCounts | dict | None, rusage: dict | None, *, note: str = "") -> dict:
    """Compare whole-life counts with os.wait4's ru_nvcsw/ru_nivcsw.

    `counts` are the source's whole-life figures: taskstats' reading at exit, or the sum of the
    perf phase deltas. Passes when voluntary and involuntary each differ by at most 2% of wait4's
    figure or by at most ABS_TOLERANCE switches. Only whole-process sources (taskstats, perf) can
    pass or fail; anything else, or a missing rusage (process not reaped by us), is
    "not-checked" with the reason.
    """
    if isinstance(counts, dict):
        counts = CtxCounts(int(counts["voluntary"]), int(counts["involuntary"]), counts["source"])
    out: dict = {
        "check": "not-checked",
        "source": counts.source if counts else None,
        "counted_voluntary": None,
        "wait4_voluntary": None,
        "counted_involuntary": None,
        "wait4_involuntary": None,
        "diff_pct": None,
        "tolerance": f"{REL_TOLERANCE:.0%} or {ABS_TOLERANCE} switches per class",
        "reason": note or None,
    }
    if rusage:
        out["wait4_voluntary"] = int(rusage["ru_nvcsw"])
        out["wait4_involuntary"] = int(rusage["ru_nivcsw"])
    if counts is None or counts.source not in WHOLE_PROCESS_SOURCES:
        out["reason"] = note or f"source {out['source']} cannot be reconciled"
        return out
    out["counted_voluntary"] = counts.voluntary
    out["counted_involuntary"] = counts.involuntary
    if not rusage:
        out["reason"] = note or "no wait4 rusage (the process was not reaped by us)"
        return out
    ok = True
    for cls in ("voluntary", "involuntary"):
        mine, kernel = out[f"counted_{cls}"], out[f"wait4_{cls}"]
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
