"""A sysbench suite's dataset: the stock scripts' sbtest tables and each user's script's own.

The stock tables are made by sysbench's own oltp_read_only `prepare` (opts.tables x
opts.table_size). A user's script makes its own tables with its own `prepare` (through our
wrapper); which tables those are is learnt from the database before and after it, recorded with
the cached dataset (the warmup scans them) and checked to be on the suite's engine.
"""

from __future__ import annotations

from pathlib import Path

from suites.errors import SuiteError
from suites.workloads.level_result import ClientTarget
from suites.workloads.sysbench.options import Script, SysbenchOptions, stock_tables
from suites.workloads.sysbench.runner import prepare


def table_names(connect, database: str) -> set[str]:
    """The tables of `database` now (`connect()` opens a control connection)."""
    conn = connect()
    try:
        cur = conn.cursor()
        cur.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
            (database,),
        )
        names = {str(r[0]) for r in cur.fetchall()}
        cur.close()
        return names
    finally:
        conn.close()


def prepare_tables(
    scripts: list[Script],
    target: ClientTarget,
    opts: SysbenchOptions,
    logs: Path,
    engine: str,
    connect,
) -> tuple[float, dict[str, list[str]]]:
    """Make every workload's tables in target.database; (seconds it took, each workload's
    tables). SuiteError (one line, naming the log) when a prepare fails or makes no table."""
    took, tables = 0.0, {}
    stock = [x for x in scripts if x.stock]
    if stock:
        took += prepare(target, opts, logs / "prepare.log")
        tables |= {x.name: stock_tables(opts.tables) for x in stock}
    for x in scripts:
        if x.stock:
            continue
        before = table_names(connect, target.database)
        took += prepare(target, opts, logs / f"prepare-{x.name}.log", workload=x)
        made = sorted(table_names(connect, target.database) - before)
        if not made:
            raise SuiteError(
                f"sysbench.scripts.{x.name}: its prepare made no table in database "
                f"{target.database!r} (sysbench's --mysql-db); see {logs}/prepare-{x.name}.log"
            )
        tables[x.name] = made
    conn = connect()
    try:
        # --mysql-storage-engine took (a user's script's own CREATE TABLE says its engine)
        every = sorted({t for names in tables.values() for t in names})
        target.driver.check_tables(conn.cursor(), target.database, engine, every)
    finally:
        conn.close()
    return took, tables
