"""A sysbench suite's warmup: the classic procedure with its parts — full PRIMARY-key scans of
the workloads' tables, then one continuous run of a workload — handed to suites.workloads.warmup, which
decides when the server is warm from its cache counters."""

from __future__ import annotations

import time
from pathlib import Path

from suites.errors import SuiteError
from suites.workloads.level_result import ClientTarget
from suites.workloads.sysbench.options import Script, SysbenchOptions
from suites.workloads.sysbench.runner import run_level
from suites.workloads.warmup import CHECK_S, FILL, MISSES, cache_counters, warm_up


def scan_tables(connect, driver, database: str, tables: list[str], stock: bool) -> float:
    """The warmup's full primary-key scans, in the target's dialect (its `driver`:
    Driver.scan_sql, e.g. the classic `SELECT AVG(id) ... FORCE KEY (PRIMARY)` on the stock
    tables); returns seconds. SuiteError naming the table on failure."""
    started = time.monotonic()
    try:
        conn = connect()
    except Exception as e:  # noqa: BLE001 - a server gone before warmup is a failed cell, one line
        raise SuiteError(f"warmup could not connect to the server: {e}") from None
    try:
        cur = conn.cursor()
        keyed = set(tables) if stock else driver.primary_keyed(cur, database)
        for name in tables:
            try:
                cur.execute(driver.scan_sql(database, name, stock, name in keyed))
                cur.fetchall()
            except Exception as e:  # noqa: BLE001 - any driver error becomes a one-line SuiteError
                raise SuiteError(f"warmup scan of {database}.{name} failed: {e}") from None
        cur.close()
    finally:
        conn.close()
    return time.monotonic() - started


def sysbench_warm_up(
    connect,
    target: ClientTarget,
    opts: SysbenchOptions,
    counters,
    names: tuple[str, str],
    *,
    load: Script,
    stock: list[str],
    own: list[str],
    cap_s: float,
    min_s: float,
    log_dir: Path,
    scan: bool = True,
    threads: int = 8,
    on_interval=None,
    engine: str = "innodb",
    check_s: float = CHECK_S,
) -> dict:
    """suites.workloads.warmup.warm_up with sysbench's parts: the scans of the `stock` tables and the
    user's scripts' `own` tables, then one continuous run of `load` (one sysbench process, its
    clients connected once) stopped when warm. `counters` reads the cache's two counters,
    `names` are the server's names for them."""

    def scan_all() -> float:
        d, db = target.driver, target.database
        took = scan_tables(connect, d, db, stock, stock=True) if stock else 0.0
        return took + (scan_tables(connect, d, db, own, stock=False) if own else 0.0)

    def run(seconds, interval, stop_when):
        return run_level(
            target, load, threads, seconds, opts, log_dir / "warmup.log",
            on_interval=interval, stop_when=stop_when,
        )  # fmt: skip

    return warm_up(
        counters,
        names,
        cap_s=cap_s,
        min_s=min_s,
        scan=scan_all if scan else None,
        load=run,
        load_name=load.name.upper(),
        threads=threads,
        check_s=check_s,
        on_interval=on_interval,
        engine=engine,
    )


def warm_up_in(
    ctx, opts: SysbenchOptions, *, load: Script, stock: list[str], own: list[str]
) -> dict:
    """sysbench_warm_up for a workload's level context (suites.workloads.context.LevelContext):
    the suite's [warmup] settings, the server's cache counters by meaning, the console's
    progress and the timeline's intervals."""
    w = ctx.suite.warmup
    names = (ctx.counter_name(MISSES), ctx.counter_name(FILL))
    ctx.progress("warmup", w.cap_s)
    return sysbench_warm_up(
        ctx.connect,
        ctx.target(),
        opts,
        cache_counters(ctx.counters, names),
        names,
        load=load,
        stock=stock,
        own=own,
        cap_s=w.cap_s,
        min_s=w.min_s,
        log_dir=ctx.logs,
        scan=w.scan,
        threads=w.threads,
        on_interval=ctx.on_warmup_interval,
        engine=ctx.engine,  # whose cache counters say "warm"
    )
