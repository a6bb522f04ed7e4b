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

from analysis.rundir_format import RESULTS_COLUMNS, SAMPLE_COLUMNS
from collectors.errors import CollectorError
from collectors.host import cell_host_state
from collectors.session import FIGURE_KEYS, Collectors
from servers.errors import ServerError
from suites.errors import SuiteError
from suites.plan import CellPlan
from suites.rundir import RunDir, now_iso
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
    dataset: object | None  # suites.datasets.Prepared (sysbench / MySQL iibench) or None
    on_progress: Callable[[str, float], None] | None = None  # (phase label, seconds expected)
    on_interval: Callable[[float, float, float], None] | None = None


def _level_row(ctx: CellContext, server_info: dict, res: LevelResult, fig: dict) -> dict:
    alloc = ctx.allocator
    row = {
        "cell": ctx.plan.id,
        "server": server_info["label"],
        "server_flavor": server_info["flavor"],
        "server_version": server_info["version"],
        "allocator": alloc.name,
        "allocator_version": alloc.version or "",
        "thp": ctx.plan.thp,
        "repeat": ctx.plan.round,
        "status": res.status,
        "error": res.error or "",
    }
    row.update(res.row())
    for k in FIGURE_KEYS:  # the collectors' per-phase figures that are results columns
        if k in RESULTS_COLUMNS:
            row[k] = fig.get(k)
    ops = _ops(res)
    cpu = (fig.get("cpu_user_s") or 0) + (fig.get("cpu_sys_s") or 0)
    csw = (fig.get("ctxsw_voluntary") or 0) + (fig.get("ctxsw_involuntary") or 0)
    row["cpu_us_per_op"] = round(cpu * 1e6 / ops, 3) if ops else None
    row["ctxsw_per_op"] = (
        round(csw / ops, 5) if ops and fig.get("ctxsw_voluntary") is not None else None
    )
    wall = fig.get("wall_s") or 0
    row["cpu_overhead"] = round(cpu / wall, 4) if wall else None
    return row


def _ops(res: LevelResult) -> float:
    """Operations of a level: queries for sysbench, rows for iibench ."""
    if res.workload == "iibench":
        return float(res.events)
    return res.qps * res.duration_s


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

    # -- hooks for the server family -----------------------------------------------------------
    def make_server(self, thp_disable: bool):
        raise NotImplementedError

    def prepare_datadir(self) -> dict:
        raise NotImplementedError

    def target(self) -> ClientTarget:
        raise NotImplementedError

    def status_source(self):
        return None

    def workload_phases(self):
        """Yield (phase name, callable returning LevelResult) for each level."""
        raise NotImplementedError

    def warmup(self) -> dict | None:
        return None

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
                use_perf=ctx.suite.collect.perf,
            )
            self.server = self.make_server(applied.thp_disable)
            coll = self.collectors

            def attach(pid: int) -> None:
                coll.on_spawn(pid)
                coll.start(pid, "startup")

            self._progress("starting server", 10)
            self.server.start(on_spawn=attach, timeout_s=ctx.suite.server.startup_timeout_s)
            self.record["server"] = self.server.to_manifest()
            self.record["verification"] = self.server.evidence
            coll.set_status_source(self.status_source())

            coll.begin_phase("warmup")
            self.record["warmup"] = self.warmup()
            self._check_alive("warmup")

            for phase, run_level in self.workload_phases():
                coll.begin_phase(phase)
                res = run_level()
                self.levels.append((phase, res))
                self.record["levels"].append(
                    {
                        "workload": res.workload,
                        "threads": res.threads,
                        "status": res.status,
                        "error": res.error,
                        "phase": phase,
                    }
                )
                self._check_alive(phase)
            coll.begin_phase("shutdown")
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
            for phase, res in self.levels:
                try:
                    fig = self.collectors.phase_figures(phase)
                except KeyError:
                    fig = {}
                rows.append(_level_row(ctx, self.server_info(), res, fig))
            if self.record["status"] == "ok":
                self._check_reconciliation()
        if self.record["status"] == "ok" and any(r.status != "ok" for _, r in self.levels):
            failed = [f"{p}: {r.error}" for p, r in self.levels if r.status != "ok"]
            self.record["level_failures"] = failed
        return CellOutcome(self.record, rows)

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
        from suites.rundir import owned

        if self.work.exists() and owned(self.work.parent):
            shutil.rmtree(self.work, ignore_errors=True)

    def _progress(self, label: str, seconds: float) -> None:
        if self.ctx.on_progress:
            self.ctx.on_progress(label, seconds)
