"""What a sysbench level is run with: our workload names, the user's own scripts, options, and
the command line.

One place builds sysbench's argv, so a level, a warmup chunk and `prepare` cannot drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from suites.errors import SuiteError
from suites.workloads.level_result import ClientTarget

# our name -> the stock script in sysbench's data dir (/usr/share/sysbench), used unchanged
WORKLOADS = {"oltp_ro": "oltp_read_only", "point_select": "oltp_point_select"}
# The stock scripts' tables: sbtest1..N of the dataset's `tables` (oltp_common.lua).
STOCK_TABLE = "sbtest{n}"


@dataclass(frozen=True)
class Script:
    """A sysbench workload: a stock script of sysbench's (by its module name), or the user's own
    Lua script ([sysbench] scripts), both run through our wrapper (mallocsweep.lua), which
    records the same figures for either."""

    name: str  # as results.csv names the workload (oltp_ro, point_select, tpcc)
    module: str = ""  # a stock script's module in sysbench's data dir
    path: str = ""  # the user's own script (absolute)
    options: tuple[tuple[str, str], ...] = ()  # its own --options, as the suite gives them

    @property
    def stock(self) -> bool:
        return bool(self.module)

    def environment(self) -> dict[str, str]:
        """What tells our wrapper which script to load."""
        if self.stock:
            return {"MALLOCSWEEP_WORKLOAD": self.module}
        return {"MALLOCSWEEP_SCRIPT": self.path}

    def option_args(self) -> list[str]:
        return [f"--{k}={v}" for k, v in self.options]


# Server-side prepared statements one client thread keeps open with --db-ps-mode=auto
# (oltp_common.lua): oltp_read_only prepares BEGIN and COMMIT plus five statements per table,
# oltp_point_select one per table. The server's max_prepared_stmt_count (16382 by default) caps
# the total: 1536 OLTP_RO threads on 4 tables need 33 792.
_PS_FIXED = {"oltp_ro": 2, "point_select": 0}
_PS_PER_TABLE = {"oltp_ro": 5, "point_select": 1}

PS_MODES = ("auto", "disable")


@dataclass(frozen=True)
class SysbenchOptions:
    """How every sysbench level of a suite runs (the dataset size is part of it: the tables the
    workload reads must be the ones `prepare` made)."""

    tables: int = 4
    table_size: int = 10000
    report_interval_s: float = 1  # sysbench takes whole seconds
    rate: int = 0  # 0: closed loop; >0: --rate events/s arrive on a schedule (open-ish loop)
    ps_mode: str = "auto"  # --db-ps-mode: "auto" (server-side prepared) or "disable"
    extra_args: tuple[str, ...] = ()
    sysbench: str = "/usr/bin/sysbench"
    # The engine `prepare` creates the tables on (our name: the driver says it in its dialect,
    # Driver.sysbench_prepare_args).
    storage_engine: str = "innodb"

    def __post_init__(self):
        for name in ("tables", "table_size"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise SuiteError(f"sysbench option {name} must be a positive integer, got {v!r}")
        if whole_seconds(self.report_interval_s, "report_interval_s") < 1:
            raise SuiteError(
                f"sysbench option report_interval_s must be at least 1, got {self.report_interval_s!r}"
            )
        if not isinstance(self.rate, int) or isinstance(self.rate, bool) or self.rate < 0:
            raise SuiteError(f"sysbench option rate must be an integer >= 0, got {self.rate!r}")
        if self.ps_mode not in PS_MODES:
            raise SuiteError(
                f"sysbench option ps_mode must be one of {PS_MODES}, got {self.ps_mode!r}"
            )
        for a in self.extra_args:
            if not isinstance(a, str) or not a.startswith("--"):
                raise SuiteError(f"sysbench extra_args entries must be --options, got {a!r}")


def whole_seconds(value: float, name: str) -> int:
    """sysbench 1.0.20 takes whole seconds (--time, --report-interval): never round silently."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise SuiteError(f"{name} must be a number of seconds, got {value!r}") from None
    if v != int(v):
        raise SuiteError(f"{name} must be whole seconds for sysbench 1.0.20, got {value!r}")
    return int(v)


def stock_script(workload: str) -> str:
    try:
        return WORKLOADS[workload]
    except KeyError:
        raise SuiteError(
            f"unknown sysbench workload {workload!r}; choose one of {', '.join(WORKLOADS)}"
        ) from None


def as_script(workload: str | Script) -> Script:
    """A Script, given one or the name of a stock workload."""
    if isinstance(workload, Script):
        return workload
    return Script(workload, module=stock_script(workload))


def stock_tables(tables: int) -> list[str]:
    """The stock scripts' tables of a dataset of `tables` tables."""
    return [STOCK_TABLE.format(n=n) for n in range(1, tables + 1)]


def prepared_statements_needed(
    workload: str | Script, threads: int, tables: int, ps_mode: str = "auto"
) -> int:
    """Server-side prepared statements a level holds at once (0 with ps_mode "disable"). What a
    user's own script prepares is not known: 0, and the server keeps its per-connection default
    (suites.families.mysql.my_cnf.PREPARED_PER_THREAD per connection)."""
    script = as_script(workload)
    if ps_mode == "disable" or not script.stock:
        return 0
    return threads * (_PS_FIXED[script.name] + _PS_PER_TABLE[script.name] * tables)


def connection_args(target: ClientTarget) -> list[str]:
    """sysbench's --db-driver and connection options: the target's driver says them
    (suites.families.driver.Driver.sysbench_args); SuiteError for a driver sysbench cannot use."""
    return target.driver.sysbench_args(target)


def dataset_args(opts: SysbenchOptions, workload: Script | None) -> list[str]:
    """The dataset's options: a stock script's tables and rows, or the user's script's own."""
    if workload is not None and not workload.stock:
        return workload.option_args()
    return [f"--tables={opts.tables}", f"--table-size={opts.table_size}"]


def level_argv(
    script: str | Path,
    target: ClientTarget,
    opts: SysbenchOptions,
    threads: int,
    duration_s: int,
    workload: Script | None = None,
) -> list[str]:
    """argv of one `run` level of our wrapper `script` running `workload` (a stock one when not
    given). --percentile=95 makes sysbench's own figure the p95 we cross-check."""
    argv = [
        opts.sysbench,
        str(script),
        *connection_args(target),
        *dataset_args(opts, workload),
        f"--threads={threads}",
        f"--time={duration_s}",
        "--events=0",
        f"--report-interval={whole_seconds(opts.report_interval_s, 'report_interval_s')}",
        "--percentile=95",
        f"--db-ps-mode={opts.ps_mode}",
    ]
    if opts.rate:
        argv.append(f"--rate={opts.rate}")
    return [*argv, *opts.extra_args, "run"]


def prepare_argv(
    target: ClientTarget,
    opts: SysbenchOptions,
    threads: int,
    workload: Script | None = None,
    wrapper: str | Path | None = None,
    command: str = "prepare",
) -> list[str]:
    """argv of `prepare` (or `cleanup`). The stock scripts' tables are created in parallel, one
    thread per table at most, by sysbench's own oltp_read_only. A user's script runs its command
    through our wrapper (which finds the script and its own modules), with its own options only:
    its CREATE TABLE says its engine (sysbench refuses an option the script does not declare)."""
    if workload is not None and not workload.stock:
        return [
            opts.sysbench,
            str(wrapper),
            *connection_args(target),
            *workload.option_args(),
            command,
        ]
    return [
        opts.sysbench,
        WORKLOADS["oltp_ro"],
        *connection_args(target),
        f"--tables={opts.tables}",
        f"--table-size={opts.table_size}",
        f"--threads={threads}",
        *target.driver.sysbench_prepare_args(opts.storage_engine),
        command,
    ]
