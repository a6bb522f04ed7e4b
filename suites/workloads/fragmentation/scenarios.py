"""The fragmentation scenarios' cycles, as levels: one (phase name, callable) per cycle, each
returning the cycle's LevelResult with its `scenario` record (rundir.records.ScenarioLevel).

A thin leaf per scenario over one helper (`_cycles`), as sysbench's own scripts are leaves over
oltp_common.lua: the time-based ones run one of our sysbench scripts for `cycle_s` per cycle
(session_churn.lua, table_cache.lua, fulltext.lua, beside this module); the dump runs the server's
dump client beside a background oltp_read_write load; the spike runs a stock workload at its
burst's client count and then follows RSS through the idle time (LevelContext.memory_now).
Settings a scenario changes on the server (thread_cache_size, the table caches) are set before
its first cycle and put back after its last.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from rundir.records import ScenarioLevel
from servers import interrupts
from servers.shipped import shipped
from suites.workloads.fragmentation.dumpclient import find_dump_client
from suites.workloads.fragmentation.settings import REPORTS, SERVER_THREAD_CACHE
from suites.workloads.level_result import LevelResult
from suites.workloads.sysbench import run_level
from suites.workloads.sysbench.options import Script, SysbenchOptions, as_script, stock_tables

PACKAGE = "suites.workloads.fragmentation"
SESSION_LUA = shipped(PACKAGE, "session_churn.lua")
TABLE_CACHE_LUA = shipped(PACKAGE, "table_cache.lua")
FULLTEXT_LUA = shipped(PACKAGE, "fulltext.lua")
# The dump's background load: sysbench's stock read-write OLTP on the sbtest tables.
OLTP_RW = Script("oltp_rw", module="oltp_read_write")

Phase = tuple[str, Callable[[], LevelResult]]


def options(suite, engine: str) -> SysbenchOptions:
    f = suite.fragmentation
    return SysbenchOptions(
        tables=suite.dataset.tables,
        table_size=suite.dataset.table_size,
        report_interval_s=f.report_interval_s,
        storage_engine=engine,
    )


def session_name(tc: int) -> str:
    return "session_churn_tc" + ("sized" if tc == SERVER_THREAD_CACHE else str(tc))


def session_script(suite, tc: int) -> Script:
    s = suite.session_churn
    rows = min(s.rows, suite.dataset.table_size - 1)
    return Script(
        session_name(tc),
        path=str(SESSION_LUA),
        options=(
            ("tables", str(suite.dataset.tables)),
            ("table_size", str(suite.dataset.table_size)),
            ("statements", str(s.statements)),
            ("rows", str(max(rows, 1))),
        ),
    )


def _own_tables_script(name: str, lua, engine: str, **options) -> Script:
    """A scenario script whose `prepare` makes tables of its own, on `engine`."""
    # our engine name in the scripts' CREATE TABLE ... ENGINE = (MySQL takes it in any case)
    opts = tuple((k, str(v)) for k, v in options.items()) + (("engine", engine),)
    return Script(name, path=str(lua), options=opts)


def table_cache_script(suite, engine: str) -> Script:
    t = suite.table_cache
    return _own_tables_script(
        "table_cache", TABLE_CACHE_LUA, engine, tc_tables=t.tables, tc_rows=t.rows
    )


def fulltext_script(suite, engine: str) -> Script:
    t = suite.fulltext
    return _own_tables_script(
        "fulltext", FULLTEXT_LUA, engine,
        ft_docs=t.docs, ft_words=t.words, ft_vocabulary=t.vocabulary,
    )  # fmt: skip


def dataset_scripts(suite, engine: str) -> list[Script]:
    """The scripts whose `prepare` makes tables of their own (table_cache, fulltext)."""
    out = []
    if "table_cache" in suite.fragmentation.scenarios:
        out.append(table_cache_script(suite, engine))
    if "fulltext" in suite.fragmentation.scenarios:
        out.append(fulltext_script(suite, engine))
    return out


# -- the server's settings a scenario changes ---------------------------------------------------
def _variables(connect, names: tuple[str, ...]) -> dict[str, str]:
    conn = connect()
    try:
        cur = conn.cursor()
        quoted = ",".join(f"'{n}'" for n in names)
        cur.execute(f"SHOW GLOBAL VARIABLES WHERE Variable_name IN ({quoted})")
        got = {str(k).lower(): str(v) for k, v in cur.fetchall()}
        cur.close()
        return got
    finally:
        conn.close()


def _set(connect, values: dict[str, int | str]) -> None:
    conn = connect()
    try:
        cur = conn.cursor()
        for name, value in values.items():
            cur.execute(f"SET GLOBAL {name} = {int(value)}")
        cur.close()
    finally:
        conn.close()


# -- the cycles ---------------------------------------------------------------------------------
def _cycles(
    ctx,
    name: str,
    threads: int,
    cycles: int,
    one: Callable[[int, str], LevelResult],
    settings: dict[str, int] | None = None,
    recorded: dict | None = None,
    only: int | None = None,
) -> Iterator[Phase]:
    """Phases "<name>@<threads>#c<k>", k = 1..cycles (as thread churn names its cycles: a
    run's level_visits finds them): `one(k, phase)` runs cycle k. `settings` (server variables)
    are set before the first cycle and put back after the last. `only` (a soak's pass k): that
    one cycle alone, numbered k, its settings set before it and put back after it (a soak's
    scenarios take turns, one cycle each, so each cycle sees the server as the suite left it)."""
    scenario = name.split("_tc")[0]
    saved: dict[str, str] = {}
    numbers = range(1, cycles + 1) if only is None else range(only, only + 1)
    first, last = numbers[0], numbers[-1]
    for k in numbers:
        phase = f"{name}@{threads}#c{k}"

        def run(k=k, phase=phase) -> LevelResult:
            if k == first and settings:
                saved.update(_variables(ctx.connect, tuple(settings)))
                _set(ctx.connect, settings)
            try:
                res = one(k, phase)
            finally:
                if k == last and saved:
                    _set(ctx.connect, saved)
            res.workload = name
            extra = res.scenario.model_dump() if res.scenario is not None else {}
            extra.update(
                scenario=scenario,
                cycle=k,
                report=REPORTS.get(scenario, ""),
                settings=dict(recorded or {}, **(extra.get("settings") or {})),
            )
            res.scenario = ScenarioLevel.model_validate(extra)
            return res

        yield phase, run


def sysbench_cycles(
    ctx, script: Script, threads: int, settings: dict | None = None, only: int | None = None
) -> Iterator[Phase]:
    suite = ctx.suite
    f = suite.fragmentation
    opts = options(suite, ctx.engine)
    target = ctx.target()

    def one(k: int, phase: str) -> LevelResult:
        ctx.progress(phase, f.cycle_s + 1)
        return run_level(
            target, script, threads, f.cycle_s, opts, ctx.logs / f"{phase}.log",
            on_interval=ctx.on_interval,
        )  # fmt: skip

    recorded = dict(settings or {})
    yield from _cycles(ctx, script.name, threads, f.cycles, one, settings, recorded, only)


def session_churn(ctx, only: int | None = None) -> Iterator[Phase]:
    s = ctx.suite.session_churn
    for tc in s.thread_cache_sizes:
        script = session_script(ctx.suite, tc)
        settings = {} if tc == SERVER_THREAD_CACHE else {"thread_cache_size": tc}
        yield from sysbench_cycles(ctx, script, s.threads, settings, only)


def table_cache(ctx, only: int | None = None) -> Iterator[Phase]:
    t = ctx.suite.table_cache
    settings = {
        "table_open_cache": t.table_open_cache,
        "table_definition_cache": t.table_definition_cache,
    }
    yield from sysbench_cycles(
        ctx, table_cache_script(ctx.suite, ctx.engine), t.threads, settings, only
    )


def fulltext(ctx, only: int | None = None) -> Iterator[Phase]:
    yield from sysbench_cycles(
        ctx, fulltext_script(ctx.suite, ctx.engine), ctx.suite.fulltext.threads, only=only
    )


def dump(ctx, only: int | None = None) -> Iterator[Phase]:
    """A full logical dump of the sbtest tables per cycle (the server's own dump client, to a
    file in the cell's work dir, removed after), beside `background_threads` oltp_read_write
    clients for cycle_s. The cycle lasts as long as the longer of the two."""
    suite = ctx.suite
    d, f = suite.dump, suite.fragmentation
    client = find_dump_client(ctx.server)
    target = ctx.target()
    opts = options(suite, ctx.engine)
    tables = stock_tables(suite.dataset.tables)

    def one(k: int, phase: str) -> LevelResult:
        ctx.progress(phase, f.cycle_s + 2)
        out = Path(ctx.work) / f"dump-{k}.sql"
        argv = [
            client.path,
            "--no-defaults",
            f"--socket={target.socket}",
            f"--user={target.user}",
            *([f"--password={target.password}"] if target.password else []),
            *d.options,
            f"--result-file={out}",
            target.database,
            *tables,
        ]
        done: dict = {}

        def run_dump() -> None:
            try:
                done["run"] = ctx.run_client(
                    argv, ctx.logs / f"{phase}.dump.log", timeout_s=d.timeout_s,
                    in_root=client.in_root,
                )  # fmt: skip
            except BaseException as e:  # noqa: BLE001 - handed to the level's thread below
                done["error"] = e

        t0 = time.monotonic()
        dumper = threading.Thread(target=run_dump, name="mallocsweep-dump", daemon=True)
        dumper.start()
        try:
            if d.background_threads:
                res = run_level(
                    target, OLTP_RW, d.background_threads, f.cycle_s, opts,
                    ctx.logs / f"{phase}.log", on_interval=ctx.on_interval,
                )  # fmt: skip
            else:
                res = LevelResult(workload="dump", threads=0)
        finally:
            while dumper.is_alive():
                dumper.join(0.5)
                interrupts.check()
        error = done.get("error")
        if isinstance(error, BaseException) and not isinstance(error, OSError):
            raise error
        run = done.get("run")
        size = out.stat().st_size if out.exists() else None
        out.unlink(missing_ok=True)
        if run is None or not run.ok:
            why = (
                str(error)
                if error is not None
                else ("timed out" if run.exit is None else run.exit.describe)
            )
            res.status, res.error = (
                "failed",
                f"the dump failed ({why}); see {run.log if run else ''}",
            )
        if not d.background_threads:
            res.duration_s = round(time.monotonic() - t0, 3)
        res.scenario = ScenarioLevel(
            scenario="dump",
            cycle=k,
            dump={
                "client": client.path,
                "in_root": client.in_root,
                "seconds": run.seconds if run else None,
                "bytes": size,
                "exit": run.exit.to_manifest() if run and run.exit else None,
            },
        )
        return res

    yield from _cycles(
        ctx, "dump", d.background_threads, f.cycles, one,
        recorded={"background_threads": d.background_threads}, only=only,
    )  # fmt: skip


def spike(ctx, only: int | None = None) -> Iterator[Phase]:
    """A burst of `threads` clients for burst_s, then idle_s with RSS read every sample_s."""
    suite = ctx.suite
    s = suite.spike
    opts = options(suite, ctx.engine)
    target = ctx.target()
    script = as_script(s.workload)

    def one(k: int, phase: str) -> LevelResult:
        ctx.progress(phase, s.burst_s + s.idle_s + 2)
        _, pre = ctx.memory_now()
        res = run_level(
            target, script, s.threads, s.burst_s, opts, ctx.logs / f"{phase}.log",
            on_interval=ctx.on_interval,
        )  # fmt: skip
        t_end, end = ctx.memory_now()
        idle: list[tuple[float, int | None]] = []
        start = time.monotonic()
        steps = max(1, round(s.idle_s / s.sample_s))
        for j in range(1, steps + 1):
            # due at fixed times from the burst's end: a late wake-up reads late, never skips
            interrupts.sleep(max(0.0, start + min(j * s.sample_s, s.idle_s) - time.monotonic()))
            t, rss = ctx.memory_now()
            idle.append((round(t - t_end, 3), rss))
        res.scenario = ScenarioLevel(
            scenario="spike",
            cycle=k,
            pre_burst_kb=pre,
            burst_end_kb=end,
            idle=idle,
            idle_s=s.idle_s,
            settings={"threads": s.threads, "burst_s": s.burst_s, "workload": s.workload},
        )
        return res

    yield from _cycles(ctx, "spike", s.threads, s.cycles, one, only=only)


def soak_phases(ctx) -> Iterator[Phase]:
    """A soak's cycles, without end: pass k runs cycle k of every scenario in the suite's order
    (session_churn: one per thread cache size). The soak driver (suites/runner/soak.py) ends the
    life when its time is up or its verdicts are decided."""
    k = 0
    while True:
        k += 1
        for name in ctx.suite.fragmentation.scenarios:
            yield from RUNNERS[name](ctx, only=k)


def pass_phases(suite) -> int:
    """Cycles (levels) in one soak pass: one per scenario, one per session_churn block."""
    on = suite.fragmentation.scenarios
    n = len(on)
    if "session_churn" in on:
        n += len(suite.session_churn.thread_cache_sizes) - 1
    return n


RUNNERS = {
    "dump": dump,
    "session_churn": session_churn,
    "table_cache": table_cache,
    "fulltext": fulltext,
    "spike": spike,
}
