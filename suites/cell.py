"""One cell: one server life under one allocator and THP mode, measured from spawn to exit.

The collectors are attached by the server launch hook before the server's first instruction and are
stopped only after the server has been reaped: a cell cannot run without them (YCSB's DBWrapper
idea). Every exit path stops the server; a failure fails this cell only.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from collectors.errors import CollectorError
from collectors.host import cell_host_state
from collectors.session import FIGURE_KEYS, Collectors
from rundir.format import RESULTS_COLUMNS, SAMPLE_COLUMNS
from rundir.write import RunDir, now_iso
from servers.errors import ServerError
from suites.errors import SuiteError
from suites.plan import CellPlan
from suites.window import Interval, Window, connected_in_window, measured_window, window_rates
from suites.workload import ClientTarget, LevelResult


@dataclass
class CellOutcome:
    record: dict
    rows: list[dict] = field(default_factory=list)


@dataclass
class CellContext:
    """What a cell needs from the matrix: the suite, the resolved server and allocator, shared state."""

    suite: object  # suites.config.Suite
    plan: CellPlan
    run_dir: RunDir
    server_binary: object  # servers.mysql.ServerBinary or servers.mongodb.MongoBinary
    allocator: object  # servers.allocators.Allocator
    thp: object  # suites.thp.ThpController
    dataset: object | None  # suites.dataset_prepare.Prepared (sysbench / MySQL iibench) or None
    on_progress: Callable[[str, float], None] | None = None  # (phase label, seconds expected)
    on_interval: Callable[[float, float, float], None] | None = None
    on_note: Callable[[str], None] | None = None  # one line for the user, e.g. a server warning


def _level_row(
    ctx: CellContext,
    server_info: dict,
    res: LevelResult,
    fig: dict,
    win: dict | None,
    window: Window | None,
    ctxsw_source: str | None,
) -> dict:
    """One results.csv row. Which window each figure covers:

    - memory (rss_*, vsz_*, anon_huge_kb), server status deltas (threads_created, bp_*), THP
      counters: the whole level phase (boundary to boundary, clients' start and end included);
    - threads_connected: read from the first window mark on (all clients connected), kept only
      when the server answered before the window closed;
    - cpu_user_s, cpu_sys_s, ctxsw_voluntary, ctxsw_involuntary, and every per-op figure
      (cpu_us_per_op, ctxsw_per_op, cpu_s_per_1m_ops, ctxsw_per_1m_ops, cpu_overhead): the
      measured window only (window_s, window_ops), so that numerator and operation count cover
      the same time. Full-phase CPU and context switches stay in the manifest (collectors.phases),
      where their sum over the phases is reconciled with wait4.
    """
    alloc = ctx.allocator
    row = {
        "cell": ctx.plan.id,
        "server": server_info["label"],
        "server_flavor": server_info["flavor"],
        "server_version": server_info["version"],
        "allocator": alloc.name,
        "allocator_version": alloc.version or "",
        "thp": ctx.plan.thp,
        "engine": ctx.plan.engine,
        "repeat": ctx.plan.round,
        "status": res.status,
        "error": res.error or "",
    }
    row.update(res.row())
    row.update(res.extra.get("rww") or {})  # the read-while-writing columns (suites.rww.level)
    for k in FIGURE_KEYS:  # the collectors' per-phase figures that are results columns
        if k in RESULTS_COLUMNS:
            row[k] = fig.get(k)
    row["ctxsw_source"] = ctxsw_source or ""
    row["threads_connected"] = connected_in_window(fig, window)
    for k in ("cpu_user_s", "cpu_sys_s", "ctxsw_voluntary", "ctxsw_involuntary"):
        row[k] = win.get(k) if win else None
    row.update(window_rates(win, window, ctxsw_source))
    return row


def _sum_or_none(a, b):
    return None if a is None or b is None else round(a + b, 3)


class CellRunner:
    """Runs one cell. Subclasses know a server family (MySQL, MongoDB) and a workload kind."""

    def __init__(self, ctx: CellContext):
        self.ctx = ctx
        self.plan = ctx.plan
        self.run_dir = ctx.run_dir
        self.logs = ctx.run_dir.logs_dir(ctx.plan.id)
        self.work = ctx.run_dir.work_dir(ctx.plan.id)
        self.server = None
        self.collectors: Collectors | None = None
        self.record: dict = {}
        self.levels: list[tuple[str, LevelResult]] = []
        self.intervals: dict[str, list[Interval]] = {}  # per level phase, as reported
        self._current: list[Interval] | None = None

    # -- hooks for the server family -----------------------------------------------------------
    def make_server(self, thp_disable: bool):
        raise NotImplementedError

    def prepare_datadir(self) -> dict:
        raise NotImplementedError

    def target(self) -> ClientTarget:
        raise NotImplementedError

    def status_source(self):
        return None

    def live_status_source(self):
        """A cheaper status read for inside a level (None: status_source's)."""
        return None

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
    def run(self) -> CellOutcome:
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
        rows: list[dict] = []
        exit_info = None
        try:
            self.work.mkdir(parents=True, exist_ok=False)
            self.record["datadir"] = self.prepare_datadir()
            applied = ctx.thp.apply(plan.thp)
            self.record["thp"] = applied.to_manifest()
            self.collectors = Collectors(
                ctx.run_dir.samples_path(plan.id),
                list(SAMPLE_COLUMNS),
                sample_interval_s=ctx.suite.collect.sample_interval_s,
                smaps_interval_s=ctx.suite.collect.smaps_interval_s,
                use_perf=ctx.suite.collect.perf,  # allows the fallback when taskstats is not
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
            # The label names the engine too (suites.plan.engine_label): --resume reads it back.
            self.record["server"] = self.server.to_manifest() | {"label": plan.server_label}
            self._note_server_warnings()
            self.record["verification"] = self.server.evidence
            coll.set_status_source(self.status_source(), self.live_status_source())

            # The server answers: its memory now is "at server start" (Percona's table).
            coll.begin_phase("warmup", mark="server_start")
            self.record["warmup"] = self.warmup()
            self._check_alive("warmup")
            coll.check_sampling()

            for phase, run_level in self.workload_phases():
                coll.begin_phase(phase)
                self._current = self.intervals.setdefault(phase, [])
                try:
                    res = run_level()
                finally:
                    self._current = None
                self.levels.append((phase, res))
                level = {
                    "workload": res.workload,
                    "threads": res.threads,
                    "status": res.status,
                    "error": res.error,
                    "phase": phase,
                }
                if res.extra.get("priority"):
                    # which threads ran boosted, and a boost withdrawn because its thread ran
                    level["priority"] = res.extra["priority"]
                self.record["levels"].append(level)
                self._check_alive(phase)
                coll.check_sampling()  # collectors are mandatory: a dead sampler fails the cell
            coll.begin_phase("shutdown", mark="server_stop")
            self._progress("stopping server", 5)
            exit_info = self.server.stop()
            self.record["status"] = "ok"
        except (ServerError, SuiteError, CollectorError, OSError) as e:
            self.record["error"] = str(e).splitlines()[0] if str(e) else type(e).__name__
        except Exception as e:  # noqa: BLE001 - a driver error or a bug fails this cell only
            # The matrix goes on (a cell fails alone); the type says where to look. Interrupted is
            # a BaseException and passes through to the runner.
            first = str(e).splitlines()[0] if str(e) else ""
            self.record["error"] = f"{type(e).__name__}: {first}"
        finally:
            exit_info = self._stop_everything(exit_info)
            self.record["finished_at"] = now_iso()
        if self.collectors is not None:
            duration, interval, last_ends_load = self.level_clock()
            for n, (phase, res) in enumerate(self.levels):
                try:
                    fig = self.collectors.phase_figures(phase)
                except KeyError:
                    fig = {}
                window = measured_window(
                    self.intervals.get(phase, []),
                    self.collectors.mark_times(phase) if fig else [],
                    duration,
                    interval,
                    last_ends_load,
                )
                win = None
                if window is not None and fig:
                    win = self.collectors.window_figures(phase, window.first_mark, window.last_mark)
                row = _level_row(
                    ctx, self.server_info(), res, fig, win, window, self.collectors.ctxsw_source
                )
                rows.append(row)
                self.record["levels"][n]["window"] = self._window_record(
                    phase, fig, win, window, row
                )
            if self.record["status"] == "ok":
                self._check_reconciliation()
        if self.record["status"] == "ok" and any(r.status != "ok" for _, r in self.levels):
            failed = [f"{p}: {r.error}" for p, r in self.levels if r.status != "ok"]
            self.record["level_failures"] = failed
        return CellOutcome(self.record, rows)

    def _window_record(self, phase, fig: dict, win, window: Window | None, row: dict) -> dict:
        """What the manifest says about a level's measured window (and why there is none).

        `reports` pairs each interval report's time in the workload's clock with the time our
        mark was taken (seconds since the collectors started; None: no mark): their difference
        moving from report to report shows how late a mark came after its report (see
        measured_window).
        """
        ivs = self.intervals.get(phase, [])
        reports = [
            [round(iv.t_s, 3), None if iv.mark_t is None else round(iv.mark_t, 3)] for iv in ivs
        ]
        if window is None or win is None:
            return {
                "measured": False,
                "reason": (
                    f"{len(ivs)} interval report(s): no two marks inside the load "
                    "(too short a level, or marks too late)"
                ),
                "reports": reports,
            }
        return {
            "measured": True,
            "workload_first_t_s": round(window.first_t_s, 3),
            "workload_last_t_s": round(window.last_t_s, 3),
            "marks": len(self.collectors.mark_times(phase)),
            "workload_s": round(window.workload_s, 3),
            "workload_ops": round(window.ops, 1),
            "window_s": row["window_s"],
            "window_ops": row["window_ops"],
            "phase_wall_s": fig.get("wall_s"),
            "phase_cpu_s": _sum_or_none(fig.get("cpu_user_s"), fig.get("cpu_sys_s")),
            "window_cpu_s": _sum_or_none(win.get("cpu_user_s"), win.get("cpu_sys_s")),
            "reports": reports,
        }

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
        self._remove_work()
        return exit_info

    def _keep_logs(self) -> None:
        log = getattr(self.server, "error_log", None)
        if log and Path(log).is_file():
            try:
                shutil.copy2(log, self.logs / Path(log).name)
            except OSError:
                pass

    def _remove_work(self) -> None:
        """The cell's datadir copy is ours (marker in work/); remove it so disk use stays one cell."""
        from rundir.write import owned

        if self.work.exists() and owned(self.work.parent):
            shutil.rmtree(self.work, ignore_errors=True)

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
