"""One cell: one server life under one allocator and THP mode, measured from spawn to exit.

The collectors are attached by the server launch hook before the server's first instruction and are
stopped only after the server has been reaped: a cell cannot run without them (YCSB's DBWrapper
idea). Every exit path stops the server; a failure fails this cell only.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from collectors.collector_session import CollectorSession
from collectors.errors import CollectorError
from collectors.host import cell_host_state
from collectors.procfs import ProcFS
from rundir.derive.levels import derive_cell
from rundir.derive.window import Interval
from rundir.errors import RunDirError
from rundir.format import RAW_VERSION, SAMPLE_COLUMNS
from rundir.write import RunDir, now_iso, owned, remove_owned_dir
from servers import interrupts
from servers.errors import ServerError
from suites.errors import SuiteError
from suites.runner import disk_full
from suites.runner.alloc_memory import AllocMemory
from suites.runner.plan import CellPlan
from suites.workloads.level_result import ClientTarget, LevelResult


@dataclass
class CellOutcome:
    record: dict
    rows: list[dict] = field(default_factory=list)


@dataclass
class CellContext:
    """What a cell needs from the matrix: the suite, the resolved server and allocator, shared state."""

    suite: object  # suites.suite.model.Suite
    plan: CellPlan
    run_dir: RunDir
    server_binary: object  # what the server family resolved (Family.resolve)
    allocator: object  # servers.allocators.Allocator
    thp: object  # suites.runner.thp.ThpController
    dataset: object | None  # suites.datasets.prepare.Prepared (a family that restores one) or None
    on_progress: Callable[[str, float], None] | None = None  # (phase label, seconds expected)
    on_interval: Callable[[float, float, float], None] | None = None
    on_note: Callable[[str], None] | None = None  # one line for the user, e.g. a server warning
    # suites.remote.clients.RemoteClients: the levels' clients run on that host (None: here)
    clients: object | None = None
    # This cell's server's [server] section (a run with several servers: the suite's settings
    # with its own source, suites.families.registry.server_entries); None: suite.server.
    server: object | None = None

    @property
    def server_section(self):
        return self.server if self.server is not None else self.suite.server


class CellRunner:
    """Runs one cell. Its subclass (suites.runner.workload_cell.WorkloadCell) joins the suite's server family
    and workload plugins through the hooks below."""

    def __init__(self, ctx: CellContext):
        self.ctx = ctx
        self.plan = ctx.plan
        self.run_dir = ctx.run_dir
        self.logs = ctx.run_dir.logs_dir(ctx.plan.id)
        self.work = ctx.run_dir.work_dir(ctx.plan.id)
        self.server = None
        self.collectors: CollectorSession | None = None
        self.record: dict = {}
        self.levels: list[tuple[str, LevelResult]] = []
        self.intervals: dict[str, list[Interval]] = {}  # per level phase, as reported
        self._current: list[Interval] | None = None
        # The allocator's own accounting (suites.runner.alloc_memory): a family that can preload the
        # alloc_stats shim sets alloc_stats in make_server; readings start once the server answers.
        self.alloc_stats = None  # servers.allocstats.AllocStats
        self.alloc_memory = None  # suites.runner.alloc_memory.AllocMemory
        # The cell's hugepage setting puts the buffer pool on explicit huge pages (make_server
        # starts the server with its family's large-pages setting; proven at server start).
        self.large_pages = False
        self.ending = False  # end_after_level: the life ends after its current level
        # what checkpoint() has written so far (a soak's journal, checkpoints/<cell>/)
        self._cp_parts, self._cp_levels, self._cp_readings = 0, 0, 0
        self._cp_phases: set[str] = set()
        self.broken = False  # a stage failed (guard): the rest of the life is skipped
        self._closed = False  # abort ran: the server is stopped, the work removed
        # The alternate design: each blocked level's blocks (raw record) and results, and the
        # block running now's interval reports ([t_s, qps]; None: no block running)
        self.blocks: dict[str, list[dict]] = {}
        self._block_results: dict[str, list[LevelResult]] = {}
        self._block: list[list[float]] | None = None

    # -- hooks for the server family -----------------------------------------------------------
    def make_server(self, thp_disable: bool):
        raise NotImplementedError

    def prepare_datadir(self) -> dict:
        raise NotImplementedError

    def target(self) -> ClientTarget:
        raise NotImplementedError

    def status_source(self):
        return None

    def pool_kb(self) -> int | None:
        """The server's buffer pool (data cache), kB: how the collectors tell its mappings from
        the heap's (collectors.hugepages)."""
        return None

    def live_status_source(self):
        """A cheaper status read for inside a level (None: status_source's)."""
        return None

    def counters(self) -> dict[str, str]:
        """The status counter the server has for each meaning (rundir.format.COUNTER_MEANINGS)."""
        return {}

    def compose_blocks(self, results: list[LevelResult]) -> LevelResult:
        """A level run as blocks (the alternate design), as one LevelResult."""
        raise NotImplementedError

    def workload_phases(self):
        """Yield (phase name, callable returning LevelResult) for each level."""
        raise NotImplementedError

    def warmup(self) -> dict | None:
        return None

    def level_clock(self) -> tuple[float | None, float | None, bool]:
        """(planned seconds of a level, report interval, whether the last report marks the end
        of the load) as far as the workload knows them: how measured_window picks its end."""
        return None, None, False

    def server_info(self) -> dict:
        b = self.ctx.server_binary
        return {"label": self.plan.server_label, "flavor": b.flavor, "version": b.version}

    # -- the life of a cell ------------------------------------------------------------------
    # A life in stages, so that the alternate design (suites/runner/alternate.py) can keep
    # several cells alive at once: open (start, proof, warmup), the levels (whole, or in blocks),
    # close (idle, stop, records). `run` is a solo life: the three in a row. A failure inside a
    # stage fails this cell only (`guard`); Interrupted passes through, and `abort` then stops
    # everything as `close` would.
    def run(self) -> CellOutcome:
        try:
            self.open()
            with self.guard():
                if not self.broken:
                    for phase, run_level in self.workload_phases():
                        interrupts.check()  # safe point: between levels
                        self.run_level(phase, run_level)
        except BaseException:
            self.abort()
            raise
        return self.close()

    def end_after_level(self) -> None:
        """A soak's time is up: the life ends after the level it is in (or at its next step)."""
        self.ending = True

    def park(self, label: str) -> dict | None:
        """A soak's arm hands the machine to the next arm: the time it waits is a phase of its
        own (`label`), which also closes its last cycle's phase, and the cell is checkpointed
        with its cycles since the last checkpoint (a runner killed meanwhile loses none of
        them). Returns the checkpoint's raw piece (checkpoint())."""
        if self.collectors is None or self.server is None:
            return None
        self.collectors.begin_phase(label)
        return self.checkpoint()

    def checkpoint(self) -> dict | None:
        """checkpoints/<cell>/: one more piece of its journal, with every level whose phase has
        closed since the last piece, those phases and the allocator's readings since
        (rundir/write.py); returns the piece's raw record (a raw record of those levels alone,
        which derives their rows), or None when nothing is new."""
        closed = self.collectors.raw_phases()
        levels = [(p, r) for p, r in self.levels if p in closed]
        new = levels[self._cp_levels :]
        phases = {n: ph for n, ph in closed.items() if n not in self._cp_phases}
        if not new and not phases:
            return None
        readings = self.alloc_memory.readings if self.alloc_memory is not None else None
        raw = self._raw_dict(new)
        raw["phases"] = phases
        raw["alloc_readings"] = None if readings is None else readings[self._cp_readings :]
        head = {k: v for k, v in self.record.items() if k != "levels"}
        head["checkpoint_at"] = now_iso()
        part = {"raw": raw, "record_levels": self.record["levels"][self._cp_levels : len(levels)]}
        part = json.loads(json.dumps(part, default=str))
        self._cp_parts += 1
        self.run_dir.write_checkpoint(
            self.plan.id,
            part,
            json.loads(
                json.dumps(
                    {"record": head, "parts": self._cp_parts, "cycles": len(levels)}, default=str
                )
            ),
        )
        self._cp_levels = len(levels)
        self._cp_phases |= set(phases)
        self._cp_readings = len(readings) if readings is not None else 0
        return part["raw"]

    def life(self):
        """The cell's life as a generator, for a soak (suites/runner/soak.py) that runs several
        arms' lives in turns: it yields after the warmup and after every level, and returns the
        CellOutcome. `end_after_level` ends a workload whose levels have no end (a soak's);
        closing the generator stops the server and collectors (abort)."""
        try:
            self.open()
            if not self.broken:
                yield "warmup"
                for phase, run_level in self.workload_phases():
                    if self.ending or self.broken:
                        break
                    interrupts.check()  # safe point: between levels
                    with self.guard():
                        self.run_level(phase, run_level)
                    if self.broken:
                        break
                    yield phase
        except BaseException:
            self.abort()
            raise
        return self.close()

    @contextmanager
    def guard(self):
        """Record a failure of what runs inside as this cell's error (the first one kept) and mark
        the cell broken: its later stages are skipped, its close still stops everything."""
        try:
            yield
        except (ServerError, SuiteError, CollectorError, OSError) as e:
            self.broken = True
            msg = self._kept_log_named(disk_full.describe(e, self.run_dir.path))
            self.record["error"] = self.record.get("error") or msg
        except Exception as e:  # noqa: BLE001 - a driver error or a bug fails this cell only
            # The matrix goes on (a cell fails alone); the type says where to look. Interrupted is
            # a BaseException and passes through to the runner.
            self.broken = True
            first = str(e).splitlines()[0] if str(e) else ""
            self.record["error"] = self.record.get("error") or f"{type(e).__name__}: {first}"

    def open(self) -> None:
        """The record, the datadir, THP, the collectors, the server started and proven, warm."""
        ctx, plan = self.ctx, self.plan
        self.record = {
            "id": plan.id,
            "index": plan.index,
            "round": plan.round,
            "repeat": plan.round,
            "server": {},
            "allocator": ctx.allocator.to_manifest(),
            "thp": {"requested": plan.thp},
            "engine": plan.engine,
            "status": "failed",
            "error": None,
            "started_at": now_iso(),
            "finished_at": None,
            "verification": None,
            "warmup": None,
            "exit": None,
            "collectors": None,
            "levels": [],
            "host_at_start": cell_host_state(),
            "samples_file": f"samples/{plan.id}.csv",
            "logs_dir": f"logs/{plan.id}",
        }
        with self.guard():
            self._start_and_warm()

    def _start_and_warm(self) -> None:
        ctx, plan = self.ctx, self.plan
        self.work.mkdir(parents=True, exist_ok=False)
        self.record["datadir"] = self.prepare_datadir()
        applied = ctx.thp.apply(plan.thp)
        self.record["thp"] = applied.to_manifest()
        # a suites.config.hugepage_settings.HugepageSetting
        setting = getattr(applied, "setting", None)
        self.large_pages = bool(setting and setting.large_pages)
        self.collectors = CollectorSession(
            ctx.run_dir.samples_path(plan.id),
            list(SAMPLE_COLUMNS),
            sample_interval_s=ctx.suite.collect.sample_interval_s,
            smaps_interval_s=ctx.suite.collect.smaps_interval_s,
            use_perf=ctx.suite.collect.perf,  # allows the fallback when taskstats is not
            pool_kb=self.pool_kb(),
            parts=ctx.suite.memory.parts,
        )
        self.server = self.make_server(applied.thp_disable)
        coll = self.collectors

        def attach(pid: int) -> None:
            coll.on_spawn(pid)
            coll.start(pid, "startup")

        self._progress("starting server", 10)
        # before_reap: the whole-life context-switch reading, on every path that reaps.
        self.server.start(
            on_spawn=attach,
            timeout_s=ctx.suite.server.startup_timeout_s,
            before_reap=coll.before_reap,
        )
        # The label names the engine too (suites.runner.plan.engine_label): --resume reads it back.
        self.record["server"] = (
            self.server.to_manifest()
            | {"label": plan.server_label}
            | ({"name": plan.server} if plan.server else {})
        )
        self._note_server_warnings()
        self.record["verification"] = self.server.evidence
        coll.set_status_source(self.status_source(), self.live_status_source(), self.counters())
        interrupts.check()  # safe point: the server is up, nothing half-done
        if self.alloc_stats is not None:
            self.alloc_memory = AllocMemory(self.alloc_stats, self.server.pid, coll.elapsed)
            self.alloc_memory.read("startup", "server start")

        # The server answers: its memory now is "at server start" (Percona's table).
        coll.begin_phase("warmup", mark="server_start")
        if self.large_pages:
            self._prove_large_pages(coll.boundary_hugepages())
        self.record["warmup"] = self.warmup()
        self._check_alive("warmup")
        self._alloc_read("warmup", "warmup end")
        coll.check_sampling()

    def run_level(self, phase: str, run_level: Callable[[], LevelResult]) -> None:
        """One whole level (a solo life's): its phase, its load, its record."""
        self.collectors.begin_phase(phase)
        self._current = self.intervals.setdefault(phase, [])
        try:
            res = run_level()
        finally:
            self._current = None
        self._end_level(phase, res)

    # -- a level in blocks (the alternate design) ------------------------------------------------
    def begin_blocks(self, phase: str) -> None:
        """The level's phase opens (on every arm at once, before the first block of any)."""
        self.collectors.begin_phase(phase)
        self.blocks[phase] = []

    def run_block(
        self, phase: str, run_block: Callable[[int], LevelResult], index: int, position: int
    ) -> LevelResult:
        """One block of the level on this server; its reports go to the timeline, not to a
        measured window (the server idles between its blocks)."""
        coll = self.collectors
        self._block = []
        start, started_at = coll.elapsed(), time.time()
        cpu0 = self._server_cpu_s()
        try:
            res = run_block(index)
        finally:
            got, self._block = self._block, None
        cpu1 = self._server_cpu_s()
        self.blocks[phase].append(
            {
                "index": index,
                "position": position,
                "start_s": round(start, 3),
                "end_s": round(coll.elapsed(), 3),
                "started_at": round(started_at, 3),
                "ended_at": round(time.time(), 3),
                "status": res.status,
                "error": res.error,
                "qps": res.qps,
                "events": res.events,
                "duration_s": res.duration_s,
                "intervals": got,
                # the server's CPU over the block (utime + stime of the whole process, from
                # before its clients start to after they exit): the block's CPU per query
                # (rundir/derive/blocks.py), which the level's phase cannot give since it spans
                # the other arms' blocks
                "cpu_s": None if cpu0 is None or cpu1 is None else round(cpu1 - cpu0, 3),
            }
        )
        self._block_results.setdefault(phase, []).append(res)
        return res

    def _server_cpu_s(self) -> float | None:
        """The server's CPU seconds so far (every thread, exited ones too), or None when it
        cannot be read (the process gone: the block then fails on its own)."""
        try:
            st = ProcFS().stat(self.server.pid)
        except CollectorError:
            return None
        return st.utime_s + st.stime_s

    def end_blocks(self, phase: str) -> None:
        """The level's phase closes (after the last block of every arm): its result is its
        blocks' put together by its workload (compose_blocks)."""
        self._end_level(phase, self.compose_blocks(self._block_results.get(phase) or []))

    def _end_level(self, phase: str, res: LevelResult) -> None:
        self.levels.append((phase, res))
        level = {
            "workload": res.workload,
            "threads": res.threads,
            "status": res.status,
            "error": disk_full.note_if_full(res.error, self.run_dir.path),
            "phase": phase,
        }
        if res.sysbench is not None and res.sysbench.priority:
            # which threads ran boosted, and a boost withdrawn because its thread ran
            level["priority"] = res.sysbench.priority
        self.record["levels"].append(level)
        self._check_alive(phase)
        self._alloc_read(phase, "level end")
        self.collectors.check_sampling()  # collectors are mandatory: a dead sampler fails the cell

    def close(self) -> CellOutcome:
        """Idle, stop, reap, give back; the raw record written and the rows derived."""
        exit_info = None
        try:
            with self.guard():
                if not self.broken:
                    self._idle_phase()
                    self._alloc_read("shutdown", "server stop")
                    self.collectors.begin_phase("shutdown", mark="server_stop")
                    self._progress("stopping server", 5)
                    exit_info = self.server.stop()
                    self.record["status"] = "ok"
        finally:
            self.abort(exit_info)
        rows: list[dict] = []
        if self.collectors is not None:
            rows = self._derive(self._record_raw())
            if self.record["status"] == "ok":
                self._check_reconciliation()
        if self.record["status"] == "ok" and any(r.status != "ok" for _, r in self.levels):
            failed = [f"{p}: {r.error}" for p, r in self.levels if r.status != "ok"]
            self.record["level_failures"] = failed
        return CellOutcome(self.record, rows)

    def abort(self, exit_info=None) -> None:
        """Every exit path, once: server stopped and reaped, collectors stopped, settings given
        back, work removed. Signals are held: the clean-up completes in order whatever arrives."""
        if self._closed:
            return
        self._closed = True
        with interrupts.held():
            self._stop_everything(exit_info)
            self._give_back()
            self.record["finished_at"] = now_iso()
        if self.alloc_memory is not None:
            self.record["alloc_memory"] = self.alloc_memory.to_manifest()
            warnings = self.alloc_memory.warnings()
            if warnings:
                self.record["warnings"] = self.record.get("warnings", []) + warnings

    def _prove_large_pages(self, reading: dict | None) -> None:
        """The buffer pool is on explicit huge pages, from /proc/PID/smaps at server start
        (collectors.hugepages: its mappings' KernelPageSize and hugetlb pages), or the cell fails:
        a server that fell back to small pages would be measured as a large-pages cell."""
        lp = self.record["thp"].setdefault("large_pages", {})
        r = reading or {}
        pool_mb = (self.pool_kb() or 0) / 1024
        huge = r.get("hugepage_size_kb") or 2048
        if not r.get("pool_mappings"):
            raise ServerError(
                f"large pages: no mapping the size of the buffer pool ({pool_mb:,.0f} MB) in "
                f"/proc/{self.server.pid}/smaps at server start; cannot prove it is on huge pages"
            )
        proof = {
            k: r.get(k)
            for k in ("pool_mappings", "pool_kb", "pool_page_kb", "pool_hugetlb_kb", "hugetlb_kb",
                      "hugepages_total", "hugepages_free", "hugepages_rsvd")
        }  # fmt: skip
        lp["proof"] = proof | {"source": "/proc/PID/smaps at server start"}
        if r.get("pool_page_kb") != huge or not r.get("pool_hugetlb_kb"):
            raise ServerError(
                f"large pages: the buffer pool ({r.get('pool_kb')} kB in {r.get('pool_mappings')} "
                f"mapping(s)) is on {r.get('pool_page_kb')} kB pages with "
                f"{r.get('pool_hugetlb_kb') or 0} kB of hugetlb pages: the server fell back to "
                f"small pages ({lp.get('reserved', 0)} huge pages reserved, HugePages_Free "
                f"{r.get('hugepages_free')}; see its error log)"
            )
        lp["proven"] = True

    def _give_back(self) -> None:
        """The cell's server is reaped: the system settings it changed go back now, not at the
        end of the run (other work on the machine sees them only while the cell ran)."""
        thp = self.ctx.thp
        if thp is None or getattr(thp, "original", None) is None:
            return
        with interrupts.doing("THP and huge pages to be given back"):
            restored = thp.restore()
        rec = self.record.setdefault("thp", {})
        if restored is not None:
            rec["restored"] = restored
        elif thp.restore_error:
            rec["restore_error"] = thp.restore_error
            self.record["warnings"] = self.record.get("warnings", []) + [thp.restore_error]

    def _alloc_read(self, phase: str, at: str) -> None:
        if self.alloc_memory is not None:
            self.alloc_memory.read(phase, at)

    def _idle_phase(self) -> None:
        """After the load: no client, RSS in the timeline, allocator readings (memory.idle_s)."""
        mem = self.ctx.suite.memory
        if not mem.idle_s:
            return
        self.collectors.begin_phase("idle")
        self._progress("idle", mem.idle_s)
        if self.alloc_memory is not None:
            self.alloc_memory.idle(mem.idle_s, mem.idle_sample_s)
        else:
            interrupts.sleep(mem.idle_s)  # the timeline samples RSS meanwhile
        self._check_alive("idle")

    def _record_raw(self) -> dict:
        """raw/<cell>.json: what this cell observed, written once; returns it as written (read
        back from its text, so the rows below come from exactly what a --rederive will read)."""
        raw = self._raw_dict(self.levels)
        try:
            text = self.run_dir.write_raw(raw)
        except (OSError, RunDirError) as e:
            # Figures can still be derived for this record; a run that cannot keep what it saw
            # cannot be re-derived, so the cell does not count as done.
            if self.record["status"] == "ok":
                self.record["status"] = "failed"
                self.record["error"] = f"raw record not written: {e}"
            text = json.dumps(raw)
        return json.loads(text)

    def _raw_dict(self, levels: list[tuple[str, LevelResult]]) -> dict:
        """The raw record of these levels (all of them at the end; a checkpoint's closed ones)."""
        duration, interval, last_ends_load = self.level_clock()
        server = self.server_info()
        alloc = self.ctx.allocator
        raw = {
            "raw_version": RAW_VERSION,
            "cell": self.plan.id,
            "identity": {
                "cell": self.plan.id,
                "server": server["label"],
                "server_flavor": server["flavor"],
                "server_version": server["version"],
                "allocator": alloc.name,
                "allocator_version": alloc.version or "",
                "thp": self.plan.thp,
                "engine": self.plan.engine,
                "repeat": self.plan.round,
            },
            "clock": {  # planned_s: the suite's length of a level (results' duration_s: measured)
                "planned_s": duration,
                "interval_s": interval,
                "last_ends_load": last_ends_load,
            },
            "ctxsw_source": self.collectors.ctxsw_source,
            "phases": self.collectors.raw_phases(),
            "levels": [
                {
                    "phase": phase,
                    "workload": res.workload,
                    "threads": res.threads,
                    "status": res.status,
                    "error": res.error,
                    "report": res.row(),
                    "intervals": [
                        [iv.t_s, iv.ops_per_s, iv.mark_t] for iv in self.intervals.get(phase, [])
                    ],
                    # what is particular to the workload, and what its level adds beside
                    **res.records(),
                    # the alternate design: the blocks the level was (rundir.derive.blocks)
                    **({"blocks": self.blocks[phase]} if phase in self.blocks else {}),
                }
                for phase, res in levels
            ],
            "exit": self.record.get("exit"),
            # which of the status's counters means what: how the derivations read it
            "counters": self.counters(),
            # the allocator's own accounting (suites.runner.alloc_memory): its level columns are derived
            "alloc_readings": self.alloc_memory.readings if self.alloc_memory is not None else None,
        }
        return raw

    def _derive(self, raw: dict) -> list[dict]:
        """The cell's rows from its raw record (rundir.derive). A derivation that fails fails this
        cell's figures, with the reason in the record; the matrix goes on."""
        try:
            derived = derive_cell(raw)
        except Exception as e:  # noqa: BLE001 - a bug in a derivation must not end the matrix
            first = str(e).splitlines()[0] if str(e) else ""
            why = f"{type(e).__name__}: {first}"[:300]
            self.record["derive_error"] = why
            if self.record["status"] == "ok":
                self.record["status"] = "failed"
                self.record["error"] = (
                    f"figures could not be derived ({why}); raw/{self.plan.id}.json keeps what "
                    "was observed: `mallocsweep report RUN --rederive` after a fix"
                )
            return []
        for level, window in zip(self.record["levels"], derived.windows, strict=True):
            level["window"] = window
        return derived.rows

    def on_interval(self, t: float, tps: float, qps: float) -> None:
        """The workload's interval report: timeline throughput and a measured-window mark."""
        mark_t = None
        if self.collectors is not None:
            self.collectors.set_throughput(tps, qps)
            if self._current is not None:
                try:
                    mark_t = self.collectors.mark_window()
                except CollectorError as e:
                    self.collectors.errors.append(f"window mark at t={t:.1f}s: {e}")
        if self._current is not None:
            self._current.append(Interval(float(t), float(qps), mark_t))
        if self._block is not None:
            self._block.append([round(float(t), 3), round(float(qps), 1)])
        if self.ctx.on_interval:
            self.ctx.on_interval(t, tps, qps)

    def _check_alive(self, phase: str) -> None:
        """A server that died in a phase fails the cell there, with its exit and error log."""
        if self.server.alive:
            return
        exit_info = self.server.stop()
        tail = " | ".join(self.server.error_log_tail(5).splitlines())
        raise ServerError(f"server died during {phase}: {exit_info.describe}; error log: {tail}")

    def _check_reconciliation(self) -> None:
        rec = (self.record.get("collectors") or {}).get("reconciliation") or {}
        if rec.get("check") == "failed":
            self.record["warnings"] = self.record.get("warnings", []) + [
                f"context switches did not reconcile with wait4: {rec}"
            ]

    def _stop_everything(self, exit_info):
        """Every exit path: server stopped and reaped, collectors stopped, work dir removed."""
        server = self.server
        if server is not None:
            try:
                exit_info = server.stop()
            except Exception as e:  # noqa: BLE001 - the cell is failing anyway; keep the first error
                self.record["error"] = self.record["error"] or f"stopping the server: {e}"
            if exit_info is not None:
                self.record["exit"] = exit_info.to_manifest()
            self._keep_logs()
        if self.collectors is not None:
            try:
                with interrupts.doing("the collectors to stop"):
                    self.record["collectors"] = self.collectors.stop(
                        exit_info.rusage if exit_info else None
                    )
            except Exception as e:  # noqa: BLE001
                self.record["collectors"] = {"error": str(e)}
            figs = (
                self.record["collectors"].get("phases", {})
                if isinstance(self.record["collectors"], dict)
                else {}
            )
            thp_state = next(
                (
                    f.get("process_thp_enabled")
                    for f in figs.values()
                    if f.get("process_thp_enabled") is not None
                ),
                None,
            )
            self.record["thp"]["process_thp_enabled"] = thp_state
            section = self.record["collectors"]
            if isinstance(section, dict):
                self.record["memory"] = section.get("memory")
                self.record["ctxsw_source"] = section.get("ctxsw_source")
                self.record["thp"]["vmstat_delta"] = section.get("thp_vmstat_delta")
        with interrupts.doing("the cell's datadir copy to be removed"):
            self._remove_work()
        return exit_info

    def _kept_log_named(self, message: str) -> str:
        """The server's error log lives in work/<cell>/, removed when the cell ends: a message
        names the copy _keep_logs makes under logs/<cell>/ instead, which stays."""
        log = getattr(self.server, "error_log", None)
        if not log:
            return message
        return message.replace(str(log), str(self.logs / Path(log).name))

    def _keep_logs(self) -> None:
        log = getattr(self.server, "error_log", None)
        if log and Path(log).is_file():
            try:
                shutil.copy2(log, self.logs / Path(log).name)
            except OSError:
                pass

    def _remove_work(self) -> None:
        """The cell's datadir copy is ours (marker in work/); remove it so disk use stays one cell."""

        if self.work.exists() and owned(self.work.parent):
            remove_owned_dir(self.work)

    def _note_server_warnings(self) -> None:
        """What the server recorded against its own setup (MongoDB's THP advice for its version,
        a missing rseq tunable), shown as it starts: the manifest keeps them, but a long run should
        not leave them unseen until the report."""
        if self.ctx.on_note is None:
            return
        for warning in self.record["server"].get("warnings") or ():
            self.ctx.on_note(f"{self.plan.id}: warning: {warning}")

    def _progress(self, label: str, seconds: float) -> None:
        if self.ctx.on_progress:
            self.ctx.on_progress(label, seconds)
