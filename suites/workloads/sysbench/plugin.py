"""The sysbench sweep: OLTP workloads × client thread counts, each level `duration_s` long, on a
prepared dataset, after a cache warmup. A workload is a stock script of sysbench's (oltp_ro,
point_select: the sbtest tables of [dataset]) or the user's own Lua script ([sysbench] scripts:
its own tables, made by its own prepare), run and recorded the same way (suites.workloads.sysbench)."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field, PositiveInt, ValidationInfo, field_validator, model_validator

from rundir.records import ChurnLevel
from suites.config.errors import FieldError, did_you_mean
from suites.config.settings import MAX_THREADS, NonNegFloat, Section, existing
from suites.workloads.base import PreparedData, Workload
from suites.workloads.sysbench import SysbenchOptions, churn, prepared_statements_needed, run_level
from suites.workloads.sysbench import scripts as user_scripts
from suites.workloads.sysbench.blocks import compose as compose_blocks
from suites.workloads.sysbench.dataset import prepare_tables
from suites.workloads.sysbench.options import WORKLOADS as STOCK
from suites.workloads.sysbench.options import Script, as_script, stock_tables
from suites.workloads.sysbench.warm import warm_up_in

# On-disk size of a sysbench row with InnoDB overhead (page fill, secondary index on k).
SYSBENCH_ROW_BYTES = 230
WORKLOAD_NAMES = tuple(STOCK)
# A user's script's name: it names results rows, phases and log files.
SCRIPT_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,31}")
# Script option values: as sysbench's command line takes them.
OptionValue = str | int | float | bool
# A sysbench level of a week is surely a typo; sysbench's --time is a C int anyway.
MAX_LEVEL_S = 7 * 24 * 3600
# A sysbench level lasts at least this many report intervals (see SysbenchSection._interval).
MIN_INTERVALS_PER_LEVEL = 3


class DatasetSection(Section):
    tables: PositiveInt = Field(
        4, description="sysbench tables of the stock workloads (sbtest1..N)."
    )
    table_size: PositiveInt = Field(10000, description="Rows per table (stock workloads).")


class WarmupSection(Section):
    scan: bool = Field(
        True, description="SELECT AVG(id) ... FORCE KEY (PRIMARY) over each table first."
    )
    min_s: NonNegFloat = Field(
        5,
        description="The warmup load (OLTP_RO; a user's script when the suite runs no stock "
        "workload) runs at least this long.",
    )
    cap_s: NonNegFloat = Field(
        120, description="...and at most this long, warm or not (0 = scan only)."
    )
    threads: Annotated[int, Field(ge=1, le=MAX_THREADS)] = Field(
        8, description="Client threads during the warmup load."
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
        description="oltp_ro (sysbench oltp_read_only) and/or point_select (oltp_point_select), "
        "and/or the names of your own scripts (scripts).",
    )
    scripts: dict[str, str] = Field(
        default_factory=dict,
        description="Your own sysbench Lua scripts as workloads, by name: a path relative to the "
        "suite file's directory. Each needs event() and a prepare command (its own tables); it "
        "finds its own modules beside it, and is recorded exactly as the stock workloads are.",
    )
    script_options: dict[str, dict[str, OptionValue]] = Field(
        default_factory=dict,
        description="Options of your scripts, by script name: the --options each declares "
        "(sysbench.cmdline.options), e.g. { tpcc = { warehouses = 2 } }; used by its prepare "
        "and every level.",
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
    settle_cap_s: Annotated[int, Field(ge=0, le=MAX_LEVEL_S)] = Field(
        0,
        description="Steady state: seconds a level may run beyond duration_s while its ramp has "
        "not ended. The steady-state rule (MSER over the interval reports, rundir/derive/steady.py) "
        "is applied live: the level ends once duration_s seconds follow the ramp's end, at most "
        "duration_s + settle_cap_s; a level still moving then is flagged (results column "
        "settled = 0). 0: every level runs exactly duration_s (the ramp is still left out of the "
        "measured window). Levels on client hosts run their planned length.",
    )
    rate: Annotated[int, Field(ge=0)] = Field(
        0, description="Target tps (0 = closed loop, as fast as possible)."
    )
    ps_mode: Literal["auto", "disable"] = Field("auto", description="sysbench --db-ps-mode.")

    @field_validator("workloads")
    @classmethod
    def _workloads(cls, v: list[str]) -> list[str]:
        # Which names exist (stock or scripts) is checked with the scripts (_names).
        if not v:
            raise ValueError("expected at least one workload")
        if len(set(v)) != len(v):
            raise ValueError(f"duplicate workloads in {v}")
        return v

    @field_validator("scripts")
    @classmethod
    def _scripts(cls, v: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        out = {}
        for name, path in v.items():
            where = ("sysbench", "scripts", name)
            if name in STOCK:
                raise FieldError(
                    where,
                    f"{name!r} is a stock workload's name; name your script otherwise",
                    path,
                )
            if not SCRIPT_NAME.fullmatch(name):
                raise FieldError(
                    where,
                    "a script's name is 1-32 letters, digits and '_', starting with a letter "
                    "(it names results rows and log files)",
                    name,
                )
            try:
                full = existing(path, info, "file")
                user_scripts.check(full)
            except ValueError as e:  # a missing file, or a script that is not a workload
                raise FieldError(where, str(e), path) from None
            out[name] = full
        return out

    @model_validator(mode="after")
    def _names(self):
        known = (*WORKLOAD_NAMES, *self.scripts)
        for w in self.workloads:
            if w not in known:
                hint = did_you_mean(w, known)
                raise FieldError(
                    ("sysbench", "workloads"),
                    f"unknown workload {w!r}{hint}; expected one of {', '.join(known)}",
                    w,
                )
        for name in self.scripts:
            if name not in self.workloads:
                raise FieldError(
                    ("sysbench", "scripts", name),
                    f"script {name!r} is not among sysbench.workloads: add it there to run it",
                )
        for name, options in self.script_options.items():
            where = ("sysbench", "script_options", name)
            if name not in self.scripts:
                raise FieldError(where, f"no script named {name!r} in sysbench.scripts")
            declared = user_scripts.check(self.scripts[name]).options
            for key in options:
                if key not in declared:
                    raise FieldError(
                        (*where, key),
                        f"{self.scripts[name].rsplit('/', 1)[-1]} declares no option --{key} "
                        f"(it declares: {', '.join(declared) or 'none'})",
                    )
        return self

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


def sysbench_options(suite, engine: str = "innodb") -> SysbenchOptions:
    s = suite.sysbench
    return SysbenchOptions(
        storage_engine=engine,
        tables=suite.dataset.tables,
        table_size=suite.dataset.table_size,
        report_interval_s=s.report_interval_s,
        rate=s.rate,
        ps_mode=s.ps_mode,
    )


def sysbench_scripts(suite) -> list[Script]:
    """The suite's workloads, in order: stock ones by name, the user's with their options."""
    s = suite.sysbench
    out = []
    for name in s.workloads:
        if name in s.scripts:
            options = s.script_options.get(name, {})
            out.append(
                Script(
                    name,
                    path=s.scripts[name],
                    options=tuple((k, user_scripts.option_text(v)) for k, v in options.items()),
                )
            )
        else:
            out.append(as_script(name))
    return out


class Sysbench(Workload):
    kind = "sysbench"
    summary = "thread sweep of OLTP_RO/POINT_SELECT or your own sysbench scripts"
    database = "sbtest"
    sections = {"dataset": DatasetSection, "warmup": WarmupSection, "sysbench": SysbenchSection}
    clients_field = (("sysbench", "threads"), "thread level")
    options = {"threads": ("sysbench", "threads"), "duration": ("sysbench", "duration_s")}
    churns = True
    alternates = True
    remote_clients = True
    remote_split = True

    def max_clients(self, suite) -> int:
        return max(suite.sysbench.threads)

    def min_clients(self, suite) -> int:
        return min(suite.sysbench.threads)

    def check_family(self, suite, family) -> None:
        # sysbench runs on whatever its driver speaks (Driver.sysbench_driver: --db-driver)
        driver = family.driver
        if driver is None or not driver.sysbench_driver:
            other = ': set suite.kind = "iibench"' if driver and driver.iibench_backend else ""
            raise FieldError(
                ("server", "flavor"),
                f"sysbench cannot drive {family.summary} servers (no sysbench driver speaks "
                f"{driver.name if driver else 'to them'}){other}",
            )
        if suite.memory.churn_cycles and not family.mysql_compatible:
            raise FieldError(
                ("memory", "churn_cycles"),
                "thread churn sets the server's thread_cache_size: MySQL-family servers only",
            )

    def phases(self, ctx):
        s = ctx.suite.sysbench
        if ctx.suite.memory.churn_cycles:
            yield from self.churn_phases(ctx)
            return
        opts = sysbench_options(ctx.suite, ctx.engine)
        # on the client host(s) when there are some: an account of this server life, over TCP
        target = ctx.remote_target() if ctx.clients is not None else ctx.target()
        for script in sysbench_scripts(ctx.suite):
            for threads in s.threads:
                phase = f"{script.name}@{threads}"

                def run(script=script, threads=threads, phase=phase):
                    ctx.progress(phase, s.duration_s)
                    return run_level(
                        target, script, threads, s.duration_s, opts, ctx.logs / f"{phase}.log",
                        on_interval=ctx.on_interval, clients=ctx.clients,
                        settle_cap_s=s.settle_cap_s,
                    )  # fmt: skip

                yield phase, run

    def block_levels(self, ctx, block_s: int):
        """The levels of `phases`, each as blocks of `block_s` seconds (the alternate design):
        same script, threads and options, a log per block. A block is a fixed slice of time
        shared out between the arms (its first report is left out as its ramp,
        rundir/derive/blocks.py), or, with [run] block_settle_cap_s, runs until block_s seconds
        of reports follow its ramp, as a solo level settles (settle.py)."""
        opts = sysbench_options(ctx.suite, ctx.engine)
        target = ctx.target()
        cap = ctx.suite.run.block_settle_cap_s
        for script in sysbench_scripts(ctx.suite):
            for threads in ctx.suite.sysbench.threads:
                phase = f"{script.name}@{threads}"

                def run(index: int, script=script, threads=threads, phase=phase):
                    ctx.progress(f"{phase} block {index + 1}", block_s)
                    return run_level(
                        target, script, threads, block_s, opts,
                        ctx.logs / f"{phase}.block{index + 1}.log", on_interval=ctx.on_interval,
                        settle_cap_s=cap,
                    )  # fmt: skip

                yield phase, run

    def compose_blocks(self, results):
        return compose_blocks(results)

    def churn_phases(self, ctx):
        """The sysbench levels in cycles (suites.workloads.sysbench.churn): clients come and go, threads exit."""
        suite = ctx.suite
        s, mem = suite.sysbench, suite.memory
        opts = sysbench_options(suite, ctx.engine)
        target = ctx.target()
        scripts = {w.name: w for w in sysbench_scripts(suite)}
        own = churn.server_thread_cache(ctx.connect)  # what the server runs with
        for lv in churn.churn_plan(
            s.workloads, s.threads, mem.churn_cycles, mem.churn_thread_cache
        ):

            def run(lv=lv):
                if lv.first_of_block and lv.thread_cache is not None:
                    churn.set_thread_cache(ctx.connect, lv.thread_cache)
                ctx.progress(lv.phase, s.duration_s)
                res = run_level(
                    target, scripts[lv.workload], lv.threads, s.duration_s, opts,
                    ctx.logs / f"{lv.phase.replace('/', '_')}.log", on_interval=ctx.on_interval,
                )  # fmt: skip
                res.churn = ChurnLevel(**churn.row_columns(lv, own))
                return res

            yield lv.phase, run

    def clock(self, suite):
        # A level's planned --time; one ended early by settle_cap_s records when (settled_stop_s).
        # Churn levels and levels on client hosts always run their planned duration_s.
        s = suite.sysbench
        settles = not suite.memory.churn_cycles and not suite.clients.hosts
        planned = s.duration_s + (s.settle_cap_s if settles else 0)
        return float(planned), float(s.report_interval_s), False

    def warmup(self, ctx):
        """The stock tables' scans and an OLTP_RO run (the classic procedure); a suite of only
        its own scripts scans their tables and runs the first of them."""
        suite = ctx.suite
        scripts = sysbench_scripts(suite)
        stock = any(x.stock for x in scripts)
        made = dict(getattr(ctx.dataset, "tables", None) or {})
        return warm_up_in(
            ctx,
            sysbench_options(suite, ctx.engine),
            load=as_script("oltp_ro") if stock else scripts[0],
            stock=stock_tables(suite.dataset.tables) if stock else [],
            own=[t for x in scripts if not x.stock for t in made.get(x.name, [])],
        )

    def prepared_statements(self, suite) -> int:
        s = suite.sysbench
        return max(
            prepared_statements_needed(w, max(s.threads), suite.dataset.tables, s.ps_mode)
            for w in sysbench_scripts(suite)
        )

    def estimate_cell_seconds(self, suite) -> float:
        warm = suite.warmup.cap_s if suite.warmup.cap_s else 5.0
        s = suite.sysbench
        levels = len(s.workloads) * len(s.threads)
        # Each level also spends time starting its client threads (up to ~1 s per 100 threads).
        init = sum(1 + t / 100 for t in s.threads) * len(s.workloads)
        # A level that settles late runs up to settle_cap_s longer: plan for the cap.
        return warm + levels * (s.duration_s + s.settle_cap_s) + init

    def dataset_spec(self, suite) -> dict:
        scripts = sysbench_scripts(suite)
        spec: dict = {"kind": "sysbench"}
        if any(x.stock for x in scripts):
            spec |= {"tables": suite.dataset.tables, "table_size": suite.dataset.table_size}
        own = {
            x.name: {"digest": user_scripts.digest(x.path), "options": dict(x.options)}
            for x in scripts
            if not x.stock
        }
        # Only with scripts: the key of a stock dataset stays what it always was.
        return spec | ({"scripts": own} if own else {})

    def prepare_dataset(
        self, suite, target, logs, engine: str = "innodb", connect=None
    ) -> PreparedData:
        took, tables = prepare_tables(
            sysbench_scripts(suite), target, sysbench_options(suite, engine), logs, engine, connect
        )
        return PreparedData(took, tables)

    def dataset_kb(self, suite) -> int:
        if not any(x.stock for x in sysbench_scripts(suite)):
            return 0  # a script's data is its own: not known before it is made
        return suite.dataset.tables * suite.dataset.table_size * SYSBENCH_ROW_BYTES // 1024

    def remote_files(self, suite) -> list[str]:
        return [x.path for x in sysbench_scripts(suite) if not x.stock]
