"""The sysbench sweep: OLTP workloads × client thread counts, each level `duration_s` long, on a
prepared sbtest dataset, after a buffer-pool warmup."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, PositiveInt, ValidationInfo, field_validator, model_validator

from suites.config_errors import FieldError, did_you_mean
from suites.settings import MAX_THREADS, NonNegFloat, Section
from suites.workloads.base import Workload

# On-disk size of a sysbench row with InnoDB overhead (page fill, secondary index on k).
SYSBENCH_ROW_BYTES = 230
WORKLOAD_NAMES = ("oltp_ro", "point_select")
# A sysbench level of a week is surely a typo; sysbench's --time is a C int anyway.
MAX_LEVEL_S = 7 * 24 * 3600
# A sysbench level lasts at least this many report intervals (see SysbenchSection._interval).
MIN_INTERVALS_PER_LEVEL = 3


class DatasetSection(Section):
    tables: PositiveInt = Field(4, description="sysbench tables (sbtest1..N).")
    table_size: PositiveInt = Field(10000, description="Rows per table.")


class WarmupSection(Section):
    scan: bool = Field(
        True, description="SELECT AVG(id) ... FORCE KEY (PRIMARY) over each table first."
    )
    min_s: NonNegFloat = Field(5, description="OLTP_RO warmup runs at least this long.")
    cap_s: NonNegFloat = Field(
        120, description="...and at most this long, warm or not (0 = scan only)."
    )
    threads: Annotated[int, Field(ge=1, le=MAX_THREADS)] = Field(
        8, description="Client threads during the OLTP_RO warmup."
    )

    @model_validator(mode="after")
    def _order(self):
        if self.cap_s and self.min_s > self.cap_s:
            raise FieldError(
                ("warmup", "min_s"), f"min_s ({self.min_s}) is larger than cap_s ({self.cap_s})"
            )
        return self


class SysbenchSection(Section):
    workloads: list[str] = Field(
        default_factory=lambda: ["oltp_ro", "point_select"],
        description="oltp_ro (sysbench oltp_read_only) and/or point_select (oltp_point_select).",
    )
    threads: list[int] = Field(
        default_factory=lambda: [8, 64, 128, 256, 512, 1024, 1536],
        description="Client thread levels, one measured phase each.",
    )
    duration_s: float = Field(
        30,
        description="Seconds per level: whole seconds (sysbench 1.0.20 takes an integer --time), "
        "at least 3 x report_interval_s (the per-op figures need a measured window).",
    )
    report_interval_s: float = Field(
        1,
        description="sysbench interval reports (timeline): whole seconds, at most duration_s / 3 "
        "(sysbench 1.0.20 takes an integer --report-interval).",
    )
    rate: Annotated[int, Field(ge=0)] = Field(
        0, description="Target tps (0 = closed loop, as fast as possible)."
    )
    ps_mode: Literal["auto", "disable"] = Field("auto", description="sysbench --db-ps-mode.")

    @field_validator("workloads")
    @classmethod
    def _workloads(cls, v: list[str]) -> list[str]:
        if not v:
            raise ValueError("expected at least one workload")
        for w in v:
            if w not in WORKLOAD_NAMES:
                hint = did_you_mean(w, WORKLOAD_NAMES)
                raise ValueError(
                    f"unknown workload {w!r}{hint}; expected one of {', '.join(WORKLOAD_NAMES)}"
                )
        if len(set(v)) != len(v):
            raise ValueError(f"duplicate workloads in {v}")
        return v

    @field_validator("duration_s", "report_interval_s")
    @classmethod
    def _whole_seconds(cls, v: float, info: ValidationInfo) -> float:
        flag = "--time" if info.field_name == "duration_s" else "--report-interval"
        if not 1 <= v <= MAX_LEVEL_S or v != int(v):
            raise ValueError(
                f"expected whole seconds, 1 to {MAX_LEVEL_S} (sysbench 1.0.20 takes an integer {flag})"
            )
        return v

    @model_validator(mode="after")
    def _interval(self):
        # The per-op columns (CPU and context switches per query) come from the measured window:
        # from the first interval report (every client connected) to half an interval before the
        # planned end (rundir.derive.window.measured_window). It lasts duration - 1.5 x interval, and below
        # 3 intervals no report mark is left to close it.
        if self.duration_s < MIN_INTERVALS_PER_LEVEL * self.report_interval_s:
            raise FieldError(
                ("sysbench", "duration_s"),
                f"duration_s ({self.duration_s:g}) is shorter than {MIN_INTERVALS_PER_LEVEL} x "
                f"report_interval_s ({MIN_INTERVALS_PER_LEVEL * self.report_interval_s:g} s): "
                "per-op figures are measured between interval reports, from the first (all "
                "clients connected) to half an interval before the level ends, so a shorter level "
                "has no measured window and leaves them empty",
            )
        return self

    @field_validator("threads")
    @classmethod
    def _threads(cls, v: list[int]) -> list[int]:
        if not v:
            raise ValueError("expected at least one thread level")
        for t in v:
            if t <= 0 or t > MAX_THREADS:
                raise ValueError(f"thread level {t} is out of range; expected 1..{MAX_THREADS}")
        if len(set(v)) != len(v):
            raise ValueError(f"duplicate thread levels in {v}")
        return v


def sysbench_options(suite, engine: str = "innodb"):
    from servers.engines import SQL_NAME
    from suites.sysbench import SysbenchOptions

    s = suite.sysbench
    return SysbenchOptions(
        storage_engine=SQL_NAME[engine],
        tables=suite.dataset.tables,
        table_size=suite.dataset.table_size,
        report_interval_s=s.report_interval_s,
        rate=s.rate,
        ps_mode=s.ps_mode,
    )


class Sysbench(Workload):
    kind = "sysbench"
    summary = "thread sweep of OLTP_RO/POINT_SELECT"
    database = "sbtest"
    sections = {"dataset": DatasetSection, "warmup": WarmupSection, "sysbench": SysbenchSection}
    clients_field = (("sysbench", "threads"), "thread level")
    options = {"threads": ("sysbench", "threads"), "duration": ("sysbench", "duration_s")}
    churns = True
    remote_clients = True
    remote_split = True

    def max_clients(self, suite) -> int:
        return max(suite.sysbench.threads)

    def min_clients(self, suite) -> int:
        return min(suite.sysbench.threads)

    def check_family(self, suite, family) -> None:
        if not family.sql:
            raise FieldError(
                ("server", "flavor"),
                'MongoDB runs the iibench insert load only: set suite.kind = "iibench" '
                "(the sysbench workloads are SQL)",
            )

    def phases(self, cell):
        from suites import sysbench
        from suites.remote.hosts import ClientHosts
        from suites.sysbench.split import run_split_level

        s = cell.ctx.suite.sysbench
        if cell.ctx.suite.memory.churn_cycles:
            yield from self.churn_phases(cell)
            return
        opts = sysbench_options(cell.ctx.suite, cell.plan.engine)
        remote = cell.ctx.clients  # suites.remote.clients.RemoteClients, or None: clients run here
        target = cell.remote_target() if remote is not None else cell.target()
        for workload in s.workloads:
            for threads in s.threads:
                phase = f"{workload}@{threads}"
                log = cell.logs / f"{phase}.log"

                def run(workload=workload, threads=threads, log=log, phase=phase):
                    cell._progress(phase, s.duration_s)
                    before = remote.load() if remote is not None else None
                    if isinstance(remote, ClientHosts):  # several hosts: the threads split
                        res = run_split_level(
                            target, workload, threads, s.duration_s, opts, log, remote,
                            on_interval=cell.on_interval,
                        )  # fmt: skip
                        # summed in the client_* columns, each host's kept in the record
                        res.extra["client_load"], each = remote.level_load(before)
                        for rec, load in zip(res.extra["client_hosts"], each, strict=True):
                            rec["load"] = load
                        return res
                    res = sysbench.run_level(
                        target,
                        workload,
                        threads,
                        s.duration_s,
                        opts,
                        log,
                        on_interval=cell.on_interval,
                        timeout_s=None,
                        remote=remote,
                    )
                    if remote is not None:
                        # the client host's own CPU, context switches and network over the level
                        res.extra["client_load"] = remote.level_load(before)
                    return res

                yield phase, run

    def churn_phases(self, cell):
        """The sysbench levels in cycles (suites.churn): clients come and go, threads exit."""
        from suites import churn, sysbench

        suite = cell.ctx.suite
        s, mem = suite.sysbench, suite.memory
        opts = sysbench_options(suite, cell.plan.engine)
        target = cell.target()
        own = cell.server.settings.thread_cache_size
        for lv in churn.churn_plan(
            s.workloads, s.threads, mem.churn_cycles, mem.churn_thread_cache
        ):

            def run(lv=lv):
                if lv.first_of_block and lv.thread_cache is not None:
                    churn.set_thread_cache(cell.server.connect, lv.thread_cache)
                cell._progress(lv.phase, s.duration_s)
                res = sysbench.run_level(
                    target,
                    lv.workload,
                    lv.threads,
                    s.duration_s,
                    opts,
                    cell.logs / f"{lv.phase.replace('/', '_')}.log",
                    on_interval=cell.on_interval,
                    timeout_s=None,
                )
                res.extra["row"] = churn.row_columns(lv, own)
                return res

            yield lv.phase, run

    def clock(self, suite):
        return float(suite.sysbench.duration_s), float(suite.sysbench.report_interval_s), False

    def warmup(self, cell):
        from suites.warmup import warm_up

        suite = cell.ctx.suite
        w = suite.warmup
        cell._progress("warmup", w.cap_s)
        return warm_up(
            cell.server.connect,
            cell.target(),
            suite.dataset.tables,
            sysbench_options(suite, cell.plan.engine),
            cap_s=w.cap_s,
            min_s=w.min_s,
            log_dir=cell.logs,
            status_fn=cell.server.global_status,
            scan=w.scan,
            threads=w.threads,
            on_interval=cell.warmup_throughput,
            engine=cell.plan.engine,  # whose cache counters say "warm"
        )

    def prepared_statements(self, suite) -> int:
        from suites.sysbench import prepared_statements_needed

        s = suite.sysbench
        return max(
            prepared_statements_needed(w, max(s.threads), suite.dataset.tables, s.ps_mode)
            for w in s.workloads
        )

    def estimate_cell_seconds(self, suite) -> float:
        warm = suite.warmup.cap_s if suite.warmup.cap_s else 5.0
        s = suite.sysbench
        levels = len(s.workloads) * len(s.threads)
        # Each level also spends time starting its client threads (up to ~1 s per 100 threads).
        init = sum(1 + t / 100 for t in s.threads) * len(s.workloads)
        return warm + levels * s.duration_s + init

    def dataset_spec(self, suite) -> dict:
        return {
            "kind": "sysbench",
            "tables": suite.dataset.tables,
            "table_size": suite.dataset.table_size,
        }

    def prepare_dataset(self, suite, target, logs, engine: str = "innodb", connect=None) -> float:
        from servers.engines import check_tables
        from suites import sysbench

        took = sysbench.prepare(target, sysbench_options(suite, engine), logs / "prepare.log")
        if connect is not None:
            conn = connect()
            try:
                check_tables(conn.cursor(), "sbtest", engine)  # --mysql-storage-engine took
            finally:
                conn.close()
        return took

    def dataset_kb(self, tables: int, table_size: int) -> int:
        return tables * table_size * SYSBENCH_ROW_BYTES // 1024
