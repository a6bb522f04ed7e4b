"""The collectors of one server life (one cell): the facade the runner uses.

Life cycle, driven by the runner:
    coll = CollectorSession(samples_csv, SAMPLE_COLUMNS, ...)
    spawn(..., on_spawn=lambda pid: (coll.on_spawn(pid), coll.start(pid, "startup")))
    coll.set_status_source(fn)      # e.g. SHOW GLOBAL STATUS, read at boundaries only
    coll.begin_phase("warmup", mark="server_start")     # the server answers: its start figures
    coll.begin_phase("oltp_ro@64")
    coll.mark_window(); coll.mark_window(); ...        # at the workload's interval reports
    coll.check_sampling()           # after each level, while the server is alive
    coll.begin_phase("shutdown", mark="server_stop")    # the last live figures before stopping
    exit = child.terminate()        # reaped with os.wait4; before that, with spawn(...,
                                    # before_reap=coll.before_reap), the final whole-life reading
    section = coll.stop(exit.rusage)   # reconciliation with the kernel's whole-life totals
    coll.phase_figures("oltp_ro@64"); coll.window_figures("oltp_ro@64", 0, -2)

Two windows, on purpose:
- a *phase* runs from one boundary to the next. Phases chain: each boundary snapshot ends one
  phase and starts the next, so per-phase deltas add up to the whole life and their sum is what
  is reconciled with wait4. A level's phase includes the client's start, connecting N threads,
  preparing statements, and disconnecting — work the workload's operation count excludes.
- a *measured window* lies inside a phase, between two marks taken when the workload reported an
  interval: only the timed run, all clients connected. Per-operation rates (CPU per op, context
  switches per op, CPU/wall) are computed over it; the caller picks which marks bound it.

The first boundary (start() in the launch hook) is taken in the launch gate, before exec: CPU time
and the context-switch counters carry across execve (perf counts from the exec), so it is the right
baseline for counters, but the gate's memory is /bin/sh's. Snapshots taken before exec are flagged
and never used for memory figures or written to the timeline. With the taskstats source, which
counts the pid's whole life from fork (as wait4 does), that first baseline is zero: the startup
phase holds the gate's few switches, and the phases add up to the whole-life reading taken at exit.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from collectors.ctxsw import (
    SOURCE_NOTES,
    SOURCE_PERF,
    SOURCE_TASKSTATS,
    CtxCounts,
    CtxSource,
    open_source,
    reconcile,
)
from collectors.errors import CollectorError, ProcessGone
from collectors.hugepages import HugepageReader
from collectors.priority import boost
from collectors.procfs import ProcFS
from collectors.sampler import ProcessReader, Sampler, Snapshot, TimelineWriter
from collectors.smaps import SmapsRead
from rundir.derive.phases import (
    phase_figures,
    vmstat_delta,
    window_figures,
)

# /proc/vmstat counters read at every boundary: THP's and compaction's (system-wide).
VMSTAT_PREFIXES = ("thp_", "compact_")
# Memory figures of one moment, for the cell's server_start / server_stop record.
_MEMORY_FIELDS = ("rss_kb", "vsz_kb", "hwm_kb", "rss_anon_kb", "anon_huge_kb", "threads")
MEMORY_MARKS = ("server_start", "server_stop")


@dataclass
class _Boundary:
    snap: Snapshot
    vmstat: dict[str, int]
    status: dict[str, float] | None
    # collectors.hugepages.HugepageReading as a dict: the process's huge pages (from the
    # boundary's smaps read, when it read one) and the system's (HugePages_*, khugepaged's CPU)
    hugepages: dict | None = None


@dataclass
class _Phase:
    name: str
    start: _Boundary
    peak_rss_kb: int | None = None
    last_anon_huge_kb: int | None = None
    last_thp_enabled: int | None = None
    first_server: Snapshot | None = None  # first live snapshot of the server itself (after exec)
    samples: int = 0
    end: _Boundary | None = None
    marks: list[Snapshot] = field(default_factory=list)  # measured-window marks, in time order
    marker: _Marker | None = None
    # The server's status read once while the workload runs (started at the first mark, in its
    # own thread: under 1536 clients one SHOW GLOBAL STATUS can take seconds, and the marks that
    # follow must not wait for it).
    mid_status: dict[str, float] | None = None
    mid_status_t: float | None = None  # when the read returned (monotonic)
    mid_status_thread: threading.Thread | None = None
    figures: dict = field(default_factory=dict)
    raw: dict | None = None  # what was observed, once the phase is closed (to_raw)

    def to_raw(self, t0: float) -> dict:
        """What was observed over this phase (rundir.records.RawPhase), times since `t0`; the
        phase's figures are derived from it (rundir.derive.phases)."""
        return {
            "name": self.name,
            "start": _boundary_raw(self.start, t0),
            "end": _boundary_raw(self.end, t0) if self.end is not None else None,
            "first_server": snap_raw(self.first_server, t0) if self.first_server else None,
            "peak_rss_kb": self.peak_rss_kb,
            "last_anon_huge_kb": self.last_anon_huge_kb,
            "last_thp_enabled": self.last_thp_enabled,
            "samples": self.samples,
            "mid_status": self.mid_status,
            "mid_status_t_s": None if self.mid_status_t is None else self.mid_status_t - t0,
            "marks": [snap_raw(m, t0) for m in self.marks],
        }

    def finish_marks(self, timeout_s: float = 60.0) -> None:
        """Stop the periodic marks and wait for the mid-level status read."""
        if self.marker is not None:
            self.marker.stop()
            self.marker = None
        t = self.mid_status_thread
        if t is not None:
            t.join(timeout_s)
            self.mid_status_thread = None

    def see(self, snap: Snapshot) -> None:
        if snap.pre_exec:
            return  # the launch gate's memory is not the server's
        if self.first_server is None and snap.live:
            self.first_server = snap
        if snap.rss_kb is not None and snap.live:
            self.peak_rss_kb = max(self.peak_rss_kb or 0, snap.rss_kb)
        if snap.anon_huge_kb is not None:
            self.last_anon_huge_kb = snap.anon_huge_kb
        if snap.thp_enabled is not None:
            self.last_thp_enabled = snap.thp_enabled


class _Marker(threading.Thread):
    """Window marks every `period_s` between the workload's reports, so that a window end falls
    close to where the load ends even when the reports reach us late (see rundir.derive.window)."""

    def __init__(self, take: Callable[[], bool], period_s: float):
        super().__init__(name="mallocsweep-window-marks", daemon=True)
        self.take = take
        self.period_s = period_s
        self._halt = threading.Event()

    def run(self) -> None:
        boost()  # a mark on time, even when every CPU is busy (collectors.priority)
        while not self._halt.wait(self.period_s):
            try:
                if not self.take():
                    break
            except Exception:  # noqa: BLE001 - a mark lost is a shorter window, not a failure
                break

    def stop(self) -> None:
        self._halt.set()
        if self.is_alive():
            self.join(10)


def _numeric(d: dict | None) -> dict[str, float]:
    out: dict[str, float] = {}
    for k, v in (d or {}).items():
        try:
            out[k] = float(v)
        except (TypeError, ValueError):
            continue
    return out


def _memory_of(snap: Snapshot, t0: float, source: str) -> dict:
    return {"t_s": round(snap.t - t0, 3), "source": source} | {
        k: getattr(snap, k) for k in _MEMORY_FIELDS
    }


def snap_raw(snap: Snapshot, t0: float) -> dict:
    """One snapshot as the raw record keeps it (rundir.records.RawSnap): times since start()."""
    return {
        "t_s": snap.t - t0,
        "rss_kb": snap.rss_kb,
        "vsz_kb": snap.vsz_kb,
        "hwm_kb": snap.hwm_kb,
        "rss_anon_kb": snap.rss_anon_kb,
        "threads": snap.threads,
        "cpu_user_s": snap.cpu_user_s,
        "cpu_sys_s": snap.cpu_sys_s,
        "ctxsw_voluntary": snap.ctx.voluntary if snap.ctx else None,
        "ctxsw_involuntary": snap.ctx.involuntary if snap.ctx else None,
        "thp_enabled": snap.thp_enabled,
        "anon_huge_kb": snap.anon_huge_kb,
        "live": snap.live,
        "pre_exec": snap.pre_exec,
    } | ({"parts": snap.parts.to_raw()} if snap.parts is not None else {})


def _boundary_raw(b: _Boundary, t0: float) -> dict:
    return {
        "snap": snap_raw(b.snap, t0),
        "vmstat": dict(b.vmstat),
        "status": b.status,
        "hugepages": b.hugepages,
    }


class CollectorSession:
    """Everything measured during one server life. See the module doc for the call order."""

    def __init__(
        self,
        samples_csv: Path,
        columns: list[str],
        sample_interval_s: float = 1.0,
        smaps_interval_s: float = 30.0,
        proc_root: str = "/proc",
        use_perf: bool = True,
        mark_interval_s: float = 0.5,
        use_taskstats: bool = True,
        pool_kb: int | None = None,
        parts: bool = False,
    ):
        """`use_taskstats`/`use_perf`: which context-switch sources may be used, best first
        (taskstats, then perf as its fallback, then procfs; see collectors.ctxsw).
        `pool_kb`: the server's buffer pool, to tell its mappings from the heap's
        (collectors.smaps.pool_mappings). A boundary reads the server's whole smaps once (not
        smaps_rollup) and takes from it the hugepage reading (collectors.hugepages) and, with
        `parts`, RSS by mapping (collectors.smaps)."""
        if sample_interval_s <= 0:
            raise CollectorError(f"collect.sample_interval_s must be > 0, got {sample_interval_s}")
        if smaps_interval_s < 0:
            raise CollectorError(f"collect.smaps_interval_s must be >= 0, got {smaps_interval_s}")
        self.procfs = ProcFS(proc_root)
        self.pool_kb = pool_kb
        self._huge = HugepageReader(self.procfs, pool_kb)
        self.writer = TimelineWriter(Path(samples_csv), columns)
        self.sample_interval_s = sample_interval_s
        self.smaps_interval_s = smaps_interval_s
        self.mark_interval_s = mark_interval_s
        self.use_perf = use_perf
        self.use_taskstats = use_taskstats
        self.parts = parts
        self.pid: int | None = None
        self.gone_reason: str | None = None  # set once the process is known to have exited
        self.errors: list[str] = []
        self._ctx: CtxSource | None = None
        self._ctx_note: str | None = None  # why a fallback source, when one is used
        self._late_note: str | None = None  # set when attached after the server started
        self._ctx_at_attach: CtxCounts | None = None  # the gate's switches at the first boundary
        self._reader: ProcessReader | None = None
        self._sampler: Sampler | None = None
        self._t0 = 0.0
        self._lock = threading.Lock()  # phase state: the sampler thread and the runner thread
        self._phase: _Phase | None = None
        self._phases: dict[str, _Phase] = {}
        self._last: Snapshot | None = None
        self._status_fn: Callable[[], dict[str, float]] | None = None
        self._live_status_fn: Callable[[], dict[str, float]] | None = None
        self._counters: dict[str, str] = {}  # meaning -> the server's counter (phase figures)
        self._tps: float | None = None
        self._qps: float | None = None
        self._boundary_cpu_s = 0.0
        self._stopped: dict | None = None
        self._gate_exe: str | None = None
        self._first_vmstat: dict[str, int] | None = None
        self._first_khugepaged_s: float | None = None
        self._last_khugepaged_s: float | None = None
        self._last_vmstat: dict[str, int] | None = None
        self._memory: dict[str, dict] = {}

    # -- attach ---------------------------------------------------------------------------------
    def on_spawn(self, pid: int) -> None:
        """Open the context-switch counters while `pid` waits in the launch gate (before exec)."""
        if self._ctx is not None:
            raise CollectorError(f"collectors already attached to pid {self.pid}")
        self.pid = pid
        # What the gate is, so snapshots taken before its exec can be told apart (see module doc).
        self._gate_exe = self.procfs.exe(pid)
        self._ctx, self._ctx_note = open_source(
            pid,
            use_perf=self.use_perf,
            before_exec=True,
            procfs=self.procfs,
            use_taskstats=self.use_taskstats,
        )

    def start(self, pid: int, phase: str = "startup") -> None:
        """Begin the timeline and the first phase. Without on_spawn first, perf counts only from
        now and only threads created from now on: such a cell cannot be reconciled (taskstats
        still reads whole-life totals, but the first phase misses what came before it)."""
        if self._reader is not None:
            raise CollectorError("collectors already started")
        if self._ctx is None:
            self.pid = pid
            self._ctx, self._ctx_note = open_source(
                pid,
                use_perf=self.use_perf,
                before_exec=False,
                procfs=self.procfs,
                use_taskstats=self.use_taskstats,
            )
            self._late_note = "attached after the server started (on_spawn not used)"
        elif pid != self.pid:
            raise CollectorError(f"start({pid}) but on_spawn attached to pid {self.pid}")
        self._reader = ProcessReader(
            self.procfs, pid, self._ctx, gate_exe=self._gate_exe, pool_kb=self.pool_kb
        )
        self.writer.open()
        self._t0 = time.monotonic()
        self.begin_phase(phase)
        self._sampler = Sampler(
            self._reader, self._on_sample, self.sample_interval_s, self.smaps_interval_s
        )
        self._sampler.start()

    def set_status_source(
        self,
        fn: Callable[[], dict[str, float]] | None,
        live_fn: Callable[[], dict[str, float]] | None = None,
        counters: dict[str, str] | None = None,
    ) -> None:
        """`fn`: the server's status at phase boundaries (outside any measured window).
        `live_fn`: the narrower read taken once while a level runs (Threads_connected); `fn`
        when not given. It runs inside the measured window, so it should cost the server little.
        `counters`: which of the status's counters has which meaning (its family's declaration,
        rundir.format.COUNTER_MEANINGS), for the phase figures."""
        self._status_fn = fn
        self._live_status_fn = live_fn
        self._counters = dict(counters or {})

    def elapsed(self) -> float:
        """Seconds since start(): the timeline's t_s of this moment."""
        return time.monotonic() - self._t0

    def memory_now(self) -> tuple[float, int | None]:
        """(seconds since start(), RSS kB) now, from /proc/PID/status alone (cheap: no smaps, no
        counters); RSS None once the process is gone. For a workload that follows RSS inside a
        level (a spike's idle time)."""
        if self._reader is None:
            raise CollectorError("memory_now() before start()")
        if not self.gone:
            try:
                snap = self._reader.read(ctx=False)
                return snap.t - self._t0, snap.rss_kb
            except ProcessGone as e:
                self._mark_gone(str(e))
        return self.elapsed(), None

    def set_throughput(self, tps: float, qps: float) -> None:
        self._tps, self._qps = tps, qps

    # -- sampling -------------------------------------------------------------------------------
    def _on_sample(self, snap: Snapshot) -> None:
        if snap.pre_exec:
            return  # still the launch gate: not the server's timeline
        with self._lock:
            self._last = snap
            phase = self._phase
            if phase is not None:
                phase.see(snap)
                phase.samples += 1
            name = phase.name if phase else ""
        self.writer.write(self._t0, name, snap, self._tps, self._qps)

    def _snapshot(self, smaps: bool) -> Snapshot:
        if not self.gone:
            try:
                # The gate's snapshot (before exec) is the shell's: nothing to take apart, and
                # the reader hands over no mappings then. One read of smaps serves the rest.
                parts = smaps and self.parts and self._phase is not None
                return self._reader.read(smaps=smaps, parts=parts, mappings=smaps)
            except ProcessGone as e:
                self._mark_gone(str(e))
        return self._reader.after_exit(self._last)

    def _counters_snapshot(self) -> Snapshot:
        """CPU and context switches only (a window mark): no status file, no smaps.

        Context switches only from a cheap source (taskstats: one netlink round trip; perf: two
        24-byte reads). The procfs fallback walks every thread's status file, ~80 ms at 1536
        threads: at several marks a second it cost the server a third of a core in `make bench`,
        so window marks leave it out (the timeline and the phase figures still carry the
        fallback's counts)."""
        if not self.gone:
            try:
                return self._reader.read(memory=False, ctx=self._ctx.cheap)
            except ProcessGone as e:
                self._mark_gone(str(e))
        return self._reader.after_exit(self._last)

    def _mark_gone(self, reason: str) -> None:
        if self.gone_reason is None:
            self.gone_reason = reason

    @property
    def gone(self) -> bool:
        """True once the process has exited (seen by the sampler, a boundary, or stop)."""
        if self.gone_reason is None and self._sampler is not None and self._sampler.gone:
            self._mark_gone(str(self._sampler.gone))
        return self.gone_reason is not None

    def _server_status(self, live: bool = False) -> dict[str, float] | None:
        fn = (self._live_status_fn or self._status_fn) if live else self._status_fn
        if fn is None or self.gone:
            return None
        try:
            return _numeric(fn())
        except Exception as e:  # noqa: BLE001 - status is optional; the failure is recorded
            self.errors.append(f"status source: {type(e).__name__}: {e}"[:300])
            return None

    def _boundary(self, smaps: bool, status: bool = True) -> _Boundary:
        c0 = time.thread_time()
        snap = self._snapshot(smaps)
        try:
            # THP's counters and compaction's (what making huge pages costs): system-wide
            vm = self.procfs.vmstat(VMSTAT_PREFIXES)
        except CollectorError as e:
            self.errors.append(str(e))
            vm = {}
        huge = self._hugepages(snap.smaps_read)
        snap = replace(snap, smaps_read=None)  # read once, used: not kept for the phase
        if self._phase is None and not self._phases and snap.ctx is not None:
            # The first boundary. A source counting from fork, attached in the launch gate: the
            # phases start from the pid's birth, as wait4's totals do (see the module doc).
            self._ctx_at_attach = snap.ctx
            if self._ctx.counts_from_fork and snap.pre_exec and self._late_note is None:
                snap = replace(snap, ctx=CtxCounts(0, 0, snap.ctx.source))
        b = _Boundary(snap, vm, self._server_status() if status else None, huge)
        if huge and huge.get("khugepaged_cpu_s") is not None:
            if self._first_khugepaged_s is None:
                self._first_khugepaged_s = huge["khugepaged_cpu_s"]
            self._last_khugepaged_s = huge["khugepaged_cpu_s"]
        if vm:
            if self._first_vmstat is None:
                self._first_vmstat = vm
            self._last_vmstat = vm
        with self._lock:  # the mid-level status thread adds its share too
            self._boundary_cpu_s += time.thread_time() - c0
        return b

    def _hugepages(self, smaps: SmapsRead | None) -> dict | None:
        """The boundary's hugepage reading: the process's part from the boundary's smaps read
        when it has one (the server live and past exec), else the system's figures alone."""
        try:
            if smaps is not None:
                return self._huge.reading(smaps).to_dict()
            return self._huge.system().to_dict()
        except CollectorError as e:
            self.errors.append(f"hugepages: {e}"[:300])
            return None

    # -- phases ---------------------------------------------------------------------------------
    def begin_phase(self, name: str, mark: str | None = None) -> None:
        """A phase boundary: snapshot everything, close the current phase, open `name`.

        `mark` names this moment in the cell's memory record: "server_start" (the server has
        just become ready) or "server_stop" (the last moment before it is asked to stop).
        """
        if mark is not None and mark not in MEMORY_MARKS:
            raise CollectorError(f"begin_phase mark must be one of {MEMORY_MARKS}, got {mark!r}")
        if self._reader is None:
            raise CollectorError(f"begin_phase({name!r}) before start()")
        if name in self._phases or (self._phase and self._phase.name == name):
            raise CollectorError(f"phase name {name!r} used twice in one cell; names must differ")
        if self._sampler is not None and self._sampler.gone:
            self._mark_gone(str(self._sampler.gone))
        if self._phase is not None:
            self._phase.finish_marks()  # outside the lock: the sampler must not wait
        b = self._boundary(smaps=True)
        with self._lock:
            if self._phase is not None:
                self._close(self._phase, b)
            self._phase = _Phase(name, b)
            self._phase.see(b.snap)
            if b.snap.live and not b.snap.pre_exec:
                self._last = b.snap
            self._tps = self._qps = None
        if b.snap.live and not b.snap.pre_exec:
            self.writer.write(self._t0, name, b.snap, None, None)
        if mark is not None:
            self._remember_memory(mark, b.snap, b.hugepages)

    def boundary_hugepages(self) -> dict | None:
        """The hugepage reading of the latest phase boundary (collectors.hugepages)."""
        with self._lock:
            return dict(self._phase.start.hugepages or {}) if self._phase else None

    def _remember_memory(self, mark: str, snap: Snapshot, huge: dict | None = None) -> None:
        if snap.live and not snap.pre_exec:
            self._memory[mark] = _memory_of(snap, self._t0, "boundary")
            # Explicit huge pages are not in RSS (VmRSS leaves hugetlb pages out): kept beside it,
            # with where THP's huge pages are (collectors.hugepages).
            for k in ("hugetlb_kb", "heap_anon_huge_kb", "pool_anon_huge_kb", "shmem_pmd_kb"):
                if huge and huge.get(k) is not None:
                    self._memory[mark][k] = huge[k]
            return
        # The server is already gone (or not yet exec'd): the last live sample is what we know.
        last = self._last
        if last is not None and not last.pre_exec:
            self._memory[mark] = _memory_of(last, self._t0, "last sample before the boundary")

    def mark_window(self) -> float:
        """A measured-window mark in the current phase: CPU and context-switch counters now.
        Returns when it was taken (seconds since start()).

        Call it at each of the workload's interval reports. Cheap (status, stat and the
        context-switch source; no smaps_rollup, no server query), so it lands right after the
        report that triggered it. The first mark of a phase also starts periodic marks (every
        `mark_interval_s`, until the phase ends) and one read of the server's status in a thread
        of its own, for figures only meaningful while the clients are connected
        (Threads_connected).
        """
        if self._reader is None or self._phase is None:
            raise CollectorError("mark_window() outside a phase")
        phase = self._phase
        snap = self._mark_snapshot()
        with self._lock:
            phase.marks.append(snap)
            first = len(phase.marks) == 1
        if first and not self.gone:
            if self.mark_interval_s > 0:
                phase.marker = _Marker(lambda: self._periodic_mark(phase), self.mark_interval_s)
                phase.marker.start()
            if self._status_fn is not None:

                def read() -> None:
                    boost()
                    c0 = time.thread_time()
                    phase.mid_status = self._server_status(live=True)
                    phase.mid_status_t = time.monotonic()
                    with self._lock:
                        self._boundary_cpu_s += time.thread_time() - c0

                phase.mid_status_thread = threading.Thread(
                    target=read, name="mallocsweep-mid-status", daemon=True
                )
                phase.mid_status_thread.start()
        return snap.t - self._t0

    def _mark_snapshot(self) -> Snapshot:
        c0 = time.thread_time()
        snap = self._counters_snapshot()
        with self._lock:
            self._boundary_cpu_s += time.thread_time() - c0
        return snap

    def _periodic_mark(self, phase: _Phase) -> bool:
        """One periodic mark; False once the process is gone (the marker stops)."""
        snap = self._mark_snapshot()
        if not snap.live:
            return False
        with self._lock:
            phase.marks.append(snap)
        return True

    def pause(self) -> None:
        """Nothing of ours reads the server until resume(): the current phase's periodic marks
        end (its mid-level status read is waited for) and the sampler sleeps. Only `make bench`
        uses it, for raw sysbench blocks inside a life whose other blocks are ours
        (bench.paired); a cell never pauses. The phase open now spans the pause."""
        if self._phase is not None:
            self._phase.finish_marks()
        if self._sampler is not None:
            self._sampler.pause()

    def resume(self) -> None:
        if self._sampler is not None:
            self._sampler.resume()

    def mark_times(self, name: str) -> list[float]:
        """When each window mark of phase `name` was taken (seconds since start()), in order;
        window_figures() takes indices into this list."""
        return [m["t_s"] for m in self._phases[name].raw["marks"]]

    def check_sampling(self) -> None:
        """CollectorError if the timeline sampler is no longer sampling. Collectors are not
        optional: call this while the server is known to be alive (a sampler that stopped
        because the process exited is then a contradiction, and a failure too)."""
        s = self._sampler
        if s is None:
            raise CollectorError("collectors were never started")
        why = s.failure
        if why is None and s.gone is not None:
            why = f"it lost the server process ({s.gone}) while the server is running"
        if why is not None:
            raise CollectorError(f"the timeline sampler stopped: {why}; the timeline is incomplete")

    def _close(self, ph: _Phase, end: _Boundary) -> None:
        ph.marks.sort(key=lambda m: m.t)  # report marks and periodic marks, interleaved
        ph.see(end.snap)
        ph.end = end
        ph.figures = self._figures(ph)
        self._phases[ph.name] = ph

    def _figures(self, ph: _Phase) -> dict:
        """Deltas over the whole phase, from what was observed (rundir.derive.phases)."""
        ph.raw = ph.to_raw(self._t0)
        return phase_figures(ph.raw, self._counters)

    def window_figures(self, name: str, first: int = 0, last: int = -1) -> dict | None:
        """Deltas between marks `first` and `last` of phase `name` (list indices), or None when
        the phase has fewer than two marks or the process was gone at either
        (rundir.derive.phases.window_figures)."""
        return window_figures(self._phases[name].raw, first, last, self.ctxsw_source)

    def raw_phases(self) -> dict[str, dict]:
        """Every closed phase as observed (rundir.records.RawPhase), by name, in order."""
        return {n: p.raw for n, p in self._phases.items()}

    @property
    def ctxsw_source(self) -> str | None:
        """ "taskstats" or "perf" (whole process, reconcilable) or the fallback's name; None
        before on_spawn."""
        return self._ctx.source if self._ctx else None

    def before_reap(self, pid: int) -> None:
        """The server has exited and is not reaped yet (pass as spawn's `before_reap`): take the
        source's final whole-life reading. Never raises: a failure is recorded, reaping goes on."""
        ctx = self._ctx
        if ctx is None or pid != self.pid:
            return
        try:
            ctx.read_final()
        except Exception as e:  # noqa: BLE001 - the reaper must reap whatever happens here
            self.errors.append(f"context switches at exit: {type(e).__name__}: {e}"[:300])

    def phase_figures(self, name: str) -> dict:
        """Deltas over a closed phase (KeyError for a phase that is unknown or still open)."""
        return dict(self._phases[name].figures)

    @property
    def phase(self) -> str | None:
        return self._phase.name if self._phase else None

    # -- end ------------------------------------------------------------------------------------
    @property
    def sampler_cpu_s(self) -> float:
        """CPU seconds of the sampler thread itself (boundary work is reported separately)."""
        return self._sampler.cpu_s if self._sampler else 0.0

    @property
    def samples_taken(self) -> int:
        """Readings the sampler has taken so far."""
        return self._sampler.samples if self._sampler else 0

    @property
    def sampler_paused_s(self) -> float:
        """Seconds the sampler spent paused (pause()/resume(); only `make bench` pauses)."""
        return self._sampler.paused_s if self._sampler else 0.0

    @property
    def boundary_cpu_s(self) -> float:
        """CPU seconds the caller's thread spent in phase boundaries and window marks (status
        queries included): the collectors' cost outside the sampler thread."""
        return self._boundary_cpu_s

    def stop(self, exit_rusage: dict | None) -> dict:
        """Close the last phase, stop the thread, reconcile with wait4; the manifest section."""
        if self._stopped is not None:
            return self._stopped
        sampler = self._sampler
        if sampler is not None:
            sampler.stop()
            if sampler.gone:
                self._mark_gone(str(sampler.gone))
            if sampler.error:
                self.errors.append(f"sampler: {sampler.error}")
        if exit_rusage:
            # The server was reaped: do not read its pid again (it may already be reused).
            self._mark_gone("exited (reaped)")
        try:
            if self._reader is not None and self._phase is not None:
                self._phase.finish_marks(timeout_s=10.0)
                end = self._boundary(smaps=False, status=False)
                if exit_rusage and "ru_utime" in exit_rusage:
                    # wait4's whole-life CPU is exact where stat can no longer be read.
                    end.snap = replace(
                        end.snap,
                        cpu_user_s=float(exit_rusage["ru_utime"]),
                        cpu_sys_s=float(exit_rusage["ru_stime"]),
                    )
                with self._lock:
                    self._close(self._phase, end)
                    self._phase = None
        finally:
            if self._ctx is not None:
                self._ctx.close()
            self.writer.close()
        phases = {n: p.figures for n, p in self._phases.items()}
        if "server_stop" not in self._memory and self._last is not None:
            # No explicit stop mark (the cell failed before its shutdown boundary).
            self._memory["server_stop"] = _memory_of(
                self._last, self._t0, "last sample (no stop boundary)"
            )
        self._stopped = {
            "reconciliation": self._reconcile(phases, exit_rusage),
            "ctxsw_source": self._ctx.source if self._ctx else None,
            "ctxsw_source_note": SOURCE_NOTES.get(self._ctx.source) if self._ctx else None,
            "ctxsw_fallback_reason": self._ctx_note or None,
            # The source's counts at the first boundary: for taskstats attached in the launch
            # gate, the gate's own switches so far (counted in the startup phase, as by wait4).
            "ctxsw_at_attach": self._ctx_at_attach.to_dict() if self._ctx_at_attach else None,
            "sampler_cpu_s": round(self.sampler_cpu_s, 4),
            "sampler_priority": sampler.priority if sampler is not None else None,
            "sampler_cpu_ms_per_sample": (
                round(1000 * self.sampler_cpu_s / self._sampler.samples, 4)
                if self._sampler and self._sampler.samples
                else None
            ),
            "boundary_cpu_s": round(self._boundary_cpu_s, 4),
            "samples": self.writer.rows,
            "sample_interval_s": self.sample_interval_s,
            "smaps_interval_s": self.smaps_interval_s,
            "smaps_reads": self._reader.smaps_reads if self._reader else 0,
            "smaps_seconds": round(self._reader.smaps_seconds, 4) if self._reader else 0.0,
            "gone": self.gone_reason if self.gone and not exit_rusage else None,
            "errors": self.errors,
            # The server's memory when it became ready and just before it was asked to stop
            # (Percona's RSS/VSZ at server start and stop).
            "memory": {k: self._memory.get(k) for k in MEMORY_MARKS},
            # Every /proc/vmstat thp_* counter over the server's life (system-wide).
            "thp_vmstat_delta": (
                vmstat_delta(self._first_vmstat, self._last_vmstat)
                if self._first_vmstat is not None and self._last_vmstat is not None
                else None
            ),
            # khugepaged's CPU seconds over the server's life (a kernel thread: system-wide work)
            "khugepaged_cpu_s": (
                round(self._last_khugepaged_s - self._first_khugepaged_s, 3)
                if self._first_khugepaged_s is not None and self._last_khugepaged_s is not None
                else None
            ),
            "phases": phases,
        }
        return self._stopped

    def _reconcile(self, phases: dict[str, dict], rusage: dict | None) -> dict:
        ctx = self._ctx
        if ctx is None:
            return reconcile(None, rusage, note="collectors were never attached")
        vol = [p["ctxsw_voluntary"] for p in phases.values()]
        inv = [p["ctxsw_involuntary"] for p in phases.values()]
        if not phases or None in vol or None in inv:
            return reconcile(None, rusage, note="a phase has no context-switch figures") | {
                "source": ctx.source
            }
        summed = CtxCounts(sum(vol), sum(inv), ctx.source)
        if ctx.source == SOURCE_TASKSTATS:
            final = ctx.after_exit()
            extra = {"phases_voluntary": summed.voluntary, "phases_involuntary": summed.involuntary}
            if final is None:
                why = (
                    "no taskstats reading at exit: the server was reaped without the collectors' "
                    "before_reap hook (servers.launch.spawn before_reap)"
                    if rusage
                    else ""
                )
                return reconcile(None, rusage, note=why) | {"source": ctx.source} | extra
            # The whole-life reading at exit is what is compared; the phases add up to it
            # exactly when the first phase started from fork (attached in the launch gate).
            extra["phases_sum_to_final"] = summed == final
            return reconcile(final, rusage, note=self._late_note or "") | extra
        if ctx.source == SOURCE_PERF and self._late_note:
            # Attached after exec: threads that existed before attaching were never counted.
            return reconcile(None, rusage, note=self._late_note) | {
                "source": summed.source,
                "counted_voluntary": summed.voluntary,
                "counted_involuntary": summed.involuntary,
            }
        # perf passes or fails on its own (why it is the fallback is in ctxsw_fallback_reason);
        # procfs is never checked, and the fallback reason says why.
        return reconcile(summed, rusage, note="" if ctx.source == SOURCE_PERF else self._ctx_note)
