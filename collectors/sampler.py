"""The timeline sampler: cheap whole-process readings at a fixed rate, in its own thread.

Each sample reads two small procfs files (status: memory and threads; stat: whole-group CPU time)
and the context-switch source. smaps_rollup (AnonHugePages) is read only when the caller asks for
it: at phase boundaries and every `smaps_interval_s` (it walks the target's page tables under its
mmap lock and can stall a large server). A boundary that wants the mappings (the parts, the
hugepage reading) reads the whole smaps instead, once (collectors.smaps.read_smaps), and takes
AnonHugePages from it. The thread never raises: a process that exits ends the
sampling (`gone`), anything else unexpected is recorded in `error`; the session decides.

The sampler measures its own CPU time with time.thread_time(), which `make bench` reports next to
the server's throughput with collectors on and off.
"""

from __future__ import annotations

import csv
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from collectors.ctxsw import (
    CtxCounts,
    CtxSource,
    PerfCtxSwitches,
    ProcfsCtxSwitches,
    TaskstatsCtxSwitches,
)
from collectors.errors import CollectorError, ProcessGone
from collectors.priority import boost
from collectors.procfs import ProcFS
from collectors.smaps import Decomposition, SmapsRead, read_smaps
from rundir.format import MEMORY_PART_COLUMNS, SAMPLE_COLUMNS


@dataclass(frozen=True)
class Snapshot:
    """Whole-process figures at one moment (monotonic seconds `t`)."""

    t: float
    rss_kb: int | None
    vsz_kb: int | None
    hwm_kb: int | None
    rss_anon_kb: int | None
    threads: int | None
    cpu_user_s: float | None
    cpu_sys_s: float | None
    ctx: CtxCounts | None
    thp_enabled: int | None
    anon_huge_kb: int | None = None  # only when smaps_rollup (or smaps) was read for it
    live: bool = True  # False: the process is gone and these are the last known values
    # True while the pid is still the launch gate (/bin/sh waiting to exec the server): its
    # cumulative counters are valid baselines (CPU and context-switch counts carry across
    # execve; perf counts from the exec, taskstats from fork), but its memory is the shell's.
    pre_exec: bool = False
    # RSS taken apart by mapping (collectors.smaps): only at phase boundaries that ask for it
    parts: Decomposition | None = None
    # The whole smaps read for this snapshot, when the caller asked for the mappings: for the
    # caller to derive what else it needs from the same read (the hugepage reading), then drop.
    # Never recorded.
    smaps_read: SmapsRead | None = field(default=None, repr=False, compare=False)


class ProcessReader:
    """Reads one process, refusing to read a different process that reused its pid.

    `gate_exe` is what /proc/PID/exe pointed at while the pid was still the launch gate (read by
    the session before exec). Until the link changes, snapshots are flagged `pre_exec`; after
    that the link is no longer read (one readlink per sample only during the first instants).
    """

    def __init__(
        self,
        procfs: ProcFS,
        pid: int,
        ctx: CtxSource | None = None,
        gate_exe: str | None = None,
        pool_kb: int | None = None,
    ):
        """`pool_kb`: the server's buffer pool, for the parts (collectors.smaps.pool_mappings)."""
        self.procfs = procfs
        self.pool_kb = pool_kb
        self.pid = pid
        self.ctx = ctx
        self.starttime = procfs.stat(pid).starttime_ticks  # identity: unchanged by exec
        self.gate_exe = gate_exe
        self.execd = gate_exe is None
        self.smaps_reads = 0
        self.smaps_seconds = 0.0

    def _pre_exec(self) -> bool:
        if self.execd:
            return False
        exe = self.procfs.exe(self.pid)
        if exe == self.gate_exe:
            return True
        # A different executable, or one we can no longer read: the gate has exec'd.
        self.execd = True
        return False

    def read(
        self,
        smaps: bool = False,
        memory: bool = True,
        ctx: bool = True,
        parts: bool = False,
        mappings: bool = False,
    ) -> Snapshot:
        """One snapshot. `memory=False` skips /proc/PID/status (memory figures None): a window
        mark needs only the counters. `ctx=False` skips the context-switch source. Its time `t`
        is taken around the counter reads. `smaps` reads smaps_rollup (AnonHugePages); with
        `parts` or `mappings`, the whole smaps instead, once (AnonHugePages is its mappings'
        sum): `parts` takes it apart (collectors.smaps), `mappings` hands the read over in
        `smaps_read`, except before exec (the launch gate's mappings are the shell's)."""
        pre_exec = self._pre_exec()  # before status/stat: a "server" snapshot is really one
        mappings = mappings and not pre_exec
        st = self.procfs.status(self.pid) if memory else None
        t0 = time.monotonic()
        sa = self.procfs.stat(self.pid)
        if sa.starttime_ticks != self.starttime or sa.state in ("Z", "X"):
            raise ProcessGone(self.pid, "stat (exited; pid reaped or reused)")
        counts = self.ctx.read() if ctx and self.ctx is not None else None
        t = (t0 + time.monotonic()) / 2
        huge = dec = whole = None
        if smaps:
            t0 = time.perf_counter()
            if parts or mappings:
                whole = read_smaps(self.procfs, self.pid, parts=parts)
                huge = whole.anon_huge_kb
                dec = whole.decompose(self.pool_kb) if parts else None
            else:
                huge = self.procfs.smaps_rollup(self.pid).get("AnonHugePages")
            self.smaps_seconds += time.perf_counter() - t0
            self.smaps_reads += 1
        return Snapshot(
            t=t,
            rss_kb=st.vm_rss_kb if st else None,
            vsz_kb=st.vm_size_kb if st else None,
            hwm_kb=st.vm_hwm_kb if st else None,
            rss_anon_kb=st.rss_anon_kb if st else None,
            threads=sa.num_threads,
            cpu_user_s=sa.utime_s,
            cpu_sys_s=sa.stime_s,
            ctx=counts,
            thp_enabled=st.thp_enabled if st else None,
            anon_huge_kb=huge,
            pre_exec=pre_exec,
            parts=dec,
            smaps_read=whole if mappings else None,
        )

    def after_exit(self, last: Snapshot | None) -> Snapshot:
        """Last known values, with what is still known once the process is gone: the source's
        final totals (perf counters keep them; taskstats' reading taken at exit, before the
        reap), else the last snapshot's (the procfs fallback)."""
        final = self.ctx.after_exit() if self.ctx is not None else None
        ctx = final if final is not None else (last.ctx if last else None)
        if last is None:
            return Snapshot(
                t=time.monotonic(), rss_kb=None, vsz_kb=None, hwm_kb=None, rss_anon_kb=None,
                threads=None, cpu_user_s=None, cpu_sys_s=None, ctx=ctx, thp_enabled=None,
                live=False,
            )  # fmt: skip
        return replace(
            last, t=time.monotonic(), ctx=ctx, anon_huge_kb=None, live=False, parts=None,
            smaps_read=None,
        )  # fmt: skip


def part_columns(dec: Decomposition | None) -> dict:
    """The timeline's MEMORY_PART_COLUMNS of one snapshot (None where it has no parts)."""
    if dec is None:
        return dict.fromkeys(MEMORY_PART_COLUMNS)
    return {
        "heap_resident_kb": dec.heap.rss_kb,
        "bufpool_resident_kb": dec.bufpool.rss_kb,
        "stacks_kb": dec.stacks.rss_kb,
        "file_kb": dec.file.rss_kb,
        "swap_kb": dec.swap_kb,
        "hugetlb_kb": dec.hugetlb_kb,
        "heap_anon_huge_kb": dec.heap_huge_kb,
    }


class TimelineWriter:
    """samples/<cell>.csv with exactly the caller's columns (declared in rundir.format). Flushed
    per row: a crash keeps the timeline."""

    KNOWN = tuple(SAMPLE_COLUMNS)  # every timeline column the run-dir format declares

    def __init__(self, path: Path, columns: list[str]):
        unknown = [c for c in columns if c not in self.KNOWN]
        if unknown:
            raise CollectorError(
                f"sample columns {unknown} are not produced by the sampler; known: {self.KNOWN}"
            )
        self.path = Path(path)
        self.columns = list(columns)
        self.rows = 0
        self._lock = threading.Lock()
        self._file = None
        self._csv = None

    def open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists():
            raise CollectorError(f"{self.path} exists: a timeline is never overwritten")
        self._file = open(self.path, "w", newline="", encoding="utf-8")
        self._csv = csv.writer(self._file)
        self._csv.writerow(self.columns)
        self._file.flush()

    def write(self, t0: float, phase: str, snap: Snapshot, tps, qps) -> None:
        values = {
            "t_s": round(snap.t - t0, 3),
            "phase": phase,
            "rss_kb": snap.rss_kb,
            "vsz_kb": snap.vsz_kb,
            "hwm_kb": snap.hwm_kb,
            "rss_anon_kb": snap.rss_anon_kb,
            "anon_huge_kb": snap.anon_huge_kb,
            "threads": snap.threads,
            "cpu_user_s": snap.cpu_user_s,
            "cpu_sys_s": snap.cpu_sys_s,
            "ctxsw_voluntary": snap.ctx.voluntary if snap.ctx else None,
            "ctxsw_involuntary": snap.ctx.involuntary if snap.ctx else None,
            "workload_tps": tps,
            "workload_qps": qps,
        }
        values |= part_columns(snap.parts)
        row = ["" if values[c] is None else values[c] for c in self.columns]
        with self._lock:
            if self._csv is None:
                return
            self._csv.writerow(row)
            self._file.flush()
            self.rows += 1

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
            self._file = self._csv = None


class Sampler(threading.Thread):
    """Calls reader.read() every `interval_s` and hands each Snapshot to `on_sample`."""

    def __init__(
        self,
        reader: ProcessReader,
        on_sample: Callable[[Snapshot], None],
        interval_s: float = 1.0,
        smaps_interval_s: float = 30.0,
    ):
        super().__init__(name=f"mallocsweep-sampler-{reader.pid}", daemon=True)
        if interval_s <= 0:
            raise CollectorError(f"sample interval must be > 0 seconds, got {interval_s}")
        if smaps_interval_s < 0:
            raise CollectorError(f"smaps interval must be >= 0 seconds, got {smaps_interval_s}")
        self.reader = reader
        self.on_sample = on_sample
        self.interval_s = interval_s
        self.smaps_interval_s = smaps_interval_s
        self.last_smaps = time.monotonic()  # the boundary that starts sampling has just read it
        self.samples = 0
        self.cpu_s = 0.0  # this thread's own CPU time, updated after every sample
        self.gone: ProcessGone | None = None
        self.error: str | None = None
        self.priority: str | None = None  # collectors.priority.POLICY when boosted
        self._halt = threading.Event()
        # pause()/resume(): set while sampling may run. A paused sampler sleeps on this event
        # (no wake-ups at all), and `_busy` is held around each reading so that pause() returns
        # only once no reading is in flight.
        self._running = threading.Event()
        self._running.set()
        self._busy = threading.Lock()
        self.paused_s = 0.0  # time spent paused: the timeline has no rows then, on purpose
        self._paused_at = 0.0

    def pause(self) -> None:
        """No reading from now until resume(); returns once a reading in flight has finished.

        For `make bench`'s raw arm (bench.paired): within one server life, raw sysbench
        blocks must run with nothing of ours touching the server, while our blocks run with the
        sampler exactly as a cell runs it."""
        if not self._running.is_set():
            return
        self._running.clear()
        with self._busy:
            self._paused_at = time.monotonic()

    def resume(self) -> None:
        if not self._running.is_set():
            self.paused_s += time.monotonic() - self._paused_at
            self._running.set()

    def run(self) -> None:
        self.priority = boost()  # samples on time even when every CPU is busy
        next_t = time.monotonic() + self.interval_s
        while not self._halt.wait(max(0.0, next_t - time.monotonic())):
            if not self._running.is_set():
                self._running.wait()  # paused: asleep until resume() (or stop())
                if self._halt.is_set():
                    break
                next_t = time.monotonic() + self.interval_s  # one interval after the resume
                continue
            now = time.monotonic()
            # A late tick (a stalled machine) is skipped, not caught up in a burst.
            next_t += self.interval_s * max(1, int((now - next_t) // self.interval_s) + 1)
            smaps = self.smaps_interval_s > 0 and now - self.last_smaps >= self.smaps_interval_s
            with self._busy:
                if not self._running.is_set():
                    continue  # paused while it woke: the pause wins, nothing is read
                try:
                    snap = self.reader.read(smaps=smaps)
                    if smaps:
                        self.last_smaps = now
                    self.on_sample(snap)
                    self.samples += 1
                except ProcessGone as e:
                    self.gone = e
                    break
                except Exception as e:  # noqa: BLE001 - never raise out of the thread; stop reports it
                    self.error = f"{type(e).__name__}: {e}"
                    break
                finally:
                    self.cpu_s = time.thread_time()
        self.cpu_s = time.thread_time()

    @property
    def failure(self) -> str | None:
        """Why the thread is no longer sampling a live process; None while it is.

        `gone` (the process exited) is not a failure of the sampler; the runner reports that
        through the server's own liveness.
        """
        if self.error:
            return self.error
        if self._halt.is_set() or self.gone is not None:
            return None
        if not self.is_alive():
            return "the sampler thread is not running"
        return None

    def stop(self, timeout: float = 10.0) -> None:
        self._halt.set()
        self._running.set()  # a paused sampler wakes to see the halt
        if self.is_alive():
            self.join(timeout)


def measure_sample_cost(
    pid: int,
    samples: int = 50,
    proc_root: str = "/proc",
    with_smaps: bool = False,
    ctx: str | None = "taskstats",
) -> dict:
    """CPU and wall time of one sampler reading of a running `pid` (for `make bench`).

    Reads what the 1 Hz loop reads (status, stat and the context-switch source: "taskstats",
    "perf", the "procfs" fallback that walks task/*/status, or None), plus smaps_rollup with
    `with_smaps`, `samples` times back to back in the calling thread. A perf counter opened on a
    running process counts only from now, but reading it costs the same as in a real cell.
    """
    procfs = ProcFS(proc_root)
    source = None
    if ctx == "taskstats":
        source = TaskstatsCtxSwitches(pid)
    elif ctx == "perf":
        source = PerfCtxSwitches(pid, before_exec=False)
    elif ctx == "procfs":
        source = ProcfsCtxSwitches(pid, procfs)
    elif ctx is not None:
        raise CollectorError(f"ctx must be 'taskstats', 'perf', 'procfs' or None, got {ctx!r}")
    try:
        reader = ProcessReader(procfs, pid, source)
        threads = reader.read().threads
        c0, w0 = time.thread_time(), time.perf_counter()
        for _ in range(samples):
            reader.read(smaps=with_smaps)
        cpu, wall = time.thread_time() - c0, time.perf_counter() - w0
    finally:
        if source is not None:
            source.close()
    return {
        "pid": pid,
        "threads": threads,
        "samples": samples,
        "ctx_source": ctx,
        "with_smaps": with_smaps,
        "cpu_ms_per_sample": round(1000 * cpu / samples, 4),
        "wall_ms_per_sample": round(1000 * wall / samples, 4),
        "core_fraction_at_1hz": round(cpu / samples, 6),
    }
