"""The collectors of one server life (one cell): the facade the runner uses.

Life cycle, driven by the runner:
    coll = Collectors(samples_csv, SAMPLE_COLUMNS, ...)
    spawn(..., on_spawn=lambda pid: (coll.on_spawn(pid), coll.start(pid, "startup")))
    coll.set_status_source(fn)      # e.g. SHOW GLOBAL STATUS, read at boundaries only
    coll.begin_phase("warmup"); coll.begin_phase("oltp_ro@64"); ...; coll.begin_phase("shutdown")
    exit = child.terminate()        # reaped with os.wait4
    section = coll.stop(exit.rusage)   # reconciliation with the kernel's whole-life totals
    coll.phase_figures("oltp_ro@64")

Phases chain: each boundary snapshot ends one phase and starts the next, so per-phase deltas add
up to the whole life and their sum is what is reconciled with wait4.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from collectors.ctxsw import (
    SOURCE_NOTES,
    CtxCounts,
    PerfCtxSwitches,
    ProcfsCtxSwitches,
    open_source,
    reconcile,
)
from collectors.errors import CollectorError, ProcessGone
from collectors.procfs import ProcFS
from collectors.sampler import ProcessReader, Sampler, Snapshot, TimelineWriter

# /proc/vmstat counters that become per-phase columns (system-wide: one server at a time).
_THP_COUNTERS = {
    "thp_fault_alloc": "thp_fault_alloc",
    "thp_collapse_alloc": "thp_collapse_alloc",
    "thp_split": "thp_split_page",
}
# SHOW GLOBAL STATUS counters that become per-phase columns (deltas).
_STATUS_DELTAS = {
    "threads_created": "Threads_created",
    "bp_reads": "Innodb_buffer_pool_reads",
    "bp_read_requests": "Innodb_buffer_pool_read_requests",
}

FIGURE_KEYS = (
    "rss_start_kb",
    "rss_end_kb",
    "rss_peak_kb",
    "vsz_start_kb",
    "vsz_end_kb",
    "anon_huge_kb",
    "cpu_user_s",
    "cpu_sys_s",
    "ctxsw_voluntary",
    "ctxsw_involuntary",
    "wall_s",
    "threads_created",
    "bp_reads",
    "bp_read_requests",
    "server_memory_used_kb",
    "thp_fault_alloc",
    "thp_collapse_alloc",
    "thp_split",
    "process_thp_enabled",
    "status_delta",
)


@dataclass
class _Boundary:
    snap: Snapshot
    vmstat: dict[str, int]
    status: dict[str, float] | None


@dataclass
class _Phase:
    name: str
    start: _Boundary
    peak_rss_kb: int | None = None
    last_anon_huge_kb: int | None = None
    last_thp_enabled: int | None = None
    samples: int = 0
    end: _Boundary | None = None
    figures: dict = field(default_factory=dict)

    def see(self, snap: Snapshot) -> None:
        if snap.rss_kb is not None and snap.live:
            self.peak_rss_kb = max(self.peak_rss_kb or 0, snap.rss_kb)
        if snap.anon_huge_kb is not None:
            self.last_anon_huge_kb = snap.anon_huge_kb
        if snap.thp_enabled is not None:
            self.last_thp_enabled = snap.thp_enabled


def _numeric(d: dict | None) -> dict[str, float]:
    out: dict[str, float] = {}
    for k, v in (d or {}).items():
        try:
            out[k] = float(v)
        except (TypeError, ValueError):
            continue
    return out


def _delta(a, b, digits: int | None = None):
    if a is None or b is None:
        return None
    d = b - a
    return round(d, digits) if digits is not None else d


def _int_if_whole(x: float):
    return int(x) if float(x).is_integer() else x


class Collectors:
    """Everything measured during one server life. See the module doc for the call order."""

    def __init__(
        self,
        samples_csv: Path,
        columns: list[str],
        sample_interval_s: float = 1.0,
        smaps_interval_s: float = 30.0,
        proc_root: str = "/proc",
        use_perf: bool = True,
    ):
        if sample_interval_s <= 0:
            raise CollectorError(f"collect.sample_interval_s must be > 0, got {sample_interval_s}")
        if smaps_interval_s < 0:
            raise CollectorError(f"collect.smaps_interval_s must be >= 0, got {smaps_interval_s}")
        self.procfs = ProcFS(proc_root)
        self.writer = TimelineWriter(Path(samples_csv), columns)
        self.sample_interval_s = sample_interval_s
        self.smaps_interval_s = smaps_interval_s
        self.use_perf = use_perf
        self.pid: int | None = None
        self.gone_reason: str | None = None  # set once the process is known to have exited
        self.errors: list[str] = []
        self._ctx: PerfCtxSwitches | ProcfsCtxSwitches | None = None
        self._ctx_note: str | None = None  # why the weaker source, or why not reconcilable
        self._reader: ProcessReader | None = None
        self._sampler: Sampler | None = None
        self._t0 = 0.0
        self._lock = threading.Lock()  # phase state: the sampler thread and the runner thread
        self._phase: _Phase | None = None
        self._phases: dict[str, _Phase] = {}
        self._last: Snapshot | None = None
        self._status_fn: Callable[[], dict[str, float]] | None = None
        self._tps: float | None = None
        self._qps: float | None = None
        self._boundary_cpu_s = 0.0
        self._stopped: dict | None = None

    # -- attach ---------------------------------------------------------------------------------
    def on_spawn(self, pid: int) -> None:
        """Open the context-switch counters while `pid` waits in the launch gate (before exec)."""
        if self._ctx is not None:
            raise CollectorError(f"collectors already attached to pid {self.pid}")
        self.pid = pid
        self._ctx, self._ctx_note = open_source(
            pid, use_perf=self.use_perf, before_exec=True, procfs=self.procfs
        )

    def start(self, pid: int, phase: str = "startup") -> None:
        """Begin the timeline and the first phase. Without on_spawn first, perf counts only from
        now and only threads created from now on: such a cell cannot be reconciled."""
        if self._reader is not None:
            raise CollectorError("collectors already started")
        if self._ctx is None:
            self.pid = pid
            self._ctx, note = open_source(
                pid, use_perf=self.use_perf, before_exec=False, procfs=self.procfs
            )
            self._ctx_note = note or "attached after the server started (on_spawn not used)"
        elif pid != self.pid:
            raise CollectorError(f"start({pid}) but on_spawn attached to pid {self.pid}")
        self._reader = ProcessReader(self.procfs, pid, self._ctx)
        self.writer.open()
        self._t0 = time.monotonic()
        self.begin_phase(phase)
        self._sampler = Sampler(
            self._reader, self._on_sample, self.sample_interval_s, self.smaps_interval_s
        )
        self._sampler.start()

    def set_status_source(self, fn: Callable[[], dict[str, float]] | None) -> None:
        self._status_fn = fn

    def set_throughput(self, tps: float, qps: float) -> None:
        self._tps, self._qps = tps, qps

    # -- sampling -------------------------------------------------------------------------------
    def _on_sample(self, snap: Snapshot) -> None:
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
                return self._reader.read(smaps=smaps)
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

    def _server_status(self) -> dict[str, float] | None:
        if self._status_fn is None or self.gone:
            return None
        try:
            return _numeric(self._status_fn())
        except Exception as e:  # noqa: BLE001 - status is optional; the failure is recorded
            self.errors.append(f"status source: {type(e).__name__}: {e}"[:300])
            return None

    def _boundary(self, smaps: bool, status: bool = True) -> _Boundary:
        c0 = time.thread_time()
        snap = self._snapshot(smaps)
        try:
            vm = self.procfs.vmstat("thp_")
        except CollectorError as e:
            self.errors.append(str(e))
            vm = {}
        b = _Boundary(snap, vm, self._server_status() if status else None)
        self._boundary_cpu_s += time.thread_time() - c0
        return b

    # -- phases ---------------------------------------------------------------------------------
    def begin_phase(self, name: str) -> None:
        """A phase boundary: snapshot everything, close the current phase, open `name`."""
        if self._reader is None:
            raise CollectorError(f"begin_phase({name!r}) before start()")
        if name in self._phases or (self._phase and self._phase.name == name):
            raise CollectorError(f"phase name {name!r} used twice in one cell; names must differ")
        if self._sampler is not None and self._sampler.gone:
            self._mark_gone(str(self._sampler.gone))
        b = self._boundary(smaps=True)
        with self._lock:
            if self._phase is not None:
                self._close(self._phase, b)
            self._phase = _Phase(name, b)
            self._phase.see(b.snap)
            if b.snap.live:
                self._last = b.snap
            self._tps = self._qps = None
        if b.snap.live:
            self.writer.write(self._t0, name, b.snap, None, None)

    def _close(self, ph: _Phase, end: _Boundary) -> None:
        ph.see(end.snap)
        ph.end = end
        ph.figures = self._figures(ph)
        self._phases[ph.name] = ph

    def _figures(self, ph: _Phase) -> dict:
        s, e = ph.start, ph.end
        a, b = s.snap, e.snap
        fig = {
            "rss_start_kb": a.rss_kb,
            "rss_end_kb": b.rss_kb,
            "rss_peak_kb": ph.peak_rss_kb,
            "vsz_start_kb": a.vsz_kb,
            "vsz_end_kb": b.vsz_kb,
            "anon_huge_kb": b.anon_huge_kb if b.anon_huge_kb is not None else ph.last_anon_huge_kb,
            "cpu_user_s": _delta(a.cpu_user_s, b.cpu_user_s, 3),
            "cpu_sys_s": _delta(a.cpu_sys_s, b.cpu_sys_s, 3),
            "ctxsw_voluntary": _delta(
                a.ctx.voluntary if a.ctx else None, b.ctx.voluntary if b.ctx else None
            ),
            "ctxsw_involuntary": _delta(
                a.ctx.involuntary if a.ctx else None, b.ctx.involuntary if b.ctx else None
            ),
            "wall_s": round(b.t - a.t, 3),
            "process_thp_enabled": b.thp_enabled
            if b.thp_enabled is not None
            else ph.last_thp_enabled,
        }
        for key, counter in _THP_COUNTERS.items():
            fig[key] = _delta(s.vmstat.get(counter), e.vmstat.get(counter))
        sd = None
        if s.status is not None and e.status is not None:
            sd = {
                k: _int_if_whole(round(e.status[k] - v, 6))
                for k, v in s.status.items()
                if k in e.status
            }
        fig["status_delta"] = sd
        for key, var in _STATUS_DELTAS.items():
            fig[key] = sd.get(var) if sd else None
        used = (e.status or {}).get("Memory_used")
        fig["server_memory_used_kb"] = round(used / 1024) if used is not None else None
        return {k: fig[k] for k in FIGURE_KEYS}

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
        self._stopped = {
            "reconciliation": self._reconcile(phases, exit_rusage),
            "ctxsw_source": self._ctx.source if self._ctx else None,
            "ctxsw_source_note": SOURCE_NOTES.get(self._ctx.source) if self._ctx else None,
            "ctxsw_fallback_reason": self._ctx_note,
            "sampler_cpu_s": round(self.sampler_cpu_s, 4),
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
            "phases": phases,
        }
        return self._stopped

    def _reconcile(self, phases: dict[str, dict], rusage: dict | None) -> dict:
        if self._ctx is None:
            return reconcile(None, rusage, note="collectors were never attached")
        vol = [p["ctxsw_voluntary"] for p in phases.values()]
        inv = [p["ctxsw_involuntary"] for p in phases.values()]
        if not phases or None in vol or None in inv:
            return reconcile(None, rusage, note="a phase has no context-switch figures")
        counts = CtxCounts(sum(vol), sum(inv), self._ctx.source)
        note = self._ctx_note
        if self._ctx.source == "perf" and note:
            # Attached after exec: threads that existed before attaching were never counted.
            return reconcile(None, rusage, note=note) | {
                "source": counts.source,
                "perf_voluntary": counts.voluntary,
                "perf_involuntary": counts.involuntary,
            }
        return reconcile(counts, rusage, note=note or "")
