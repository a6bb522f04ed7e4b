"""Warm the buffer pool before the first level, until it is warm (with a cap), and say what we saw.

Every cell restarts its server from the same cold datadir (buffer-pool dump/load is off), so
without a warmup the first allocator level would pay for the disk reads of the next ones. The
procedure is the classic one: a full PRIMARY-key scan of each table (SELECT AVG(id) ... FORCE KEY
(PRIMARY)), then OLTP_RO — one continuous sysbench run, its clients connected once (not short
runs that reconnect every few seconds, which warm the connection path instead) — while the server's own counters are polled every CHECK_S seconds of
that run: it is warm when Innodb_buffer_pool_reads (reads that missed the pool and went to disk)
no longer rises and Innodb_buffer_pool_pages_data has levelled off. Then sysbench is stopped. A
fixed 600 s warmup is usually far longer than needed; one that stops at the first quiet check is
too short, hence `min_s`; `cap_s` bounds a pool that never settles. Every cell runs the same
procedure, so no allocator starts warmer than another — and the returned record shows it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path

from suites.errors import SuiteError
from suites.sysbench import SysbenchOptions, run_level
from suites.workload import ClientTarget

READS = "Innodb_buffer_pool_reads"
PAGES = "Innodb_buffer_pool_pages_data"
# The same two questions per storage engine: (reads that missed the engine's cache, what the cache
# holds). MyRocks keeps no gauge of its block cache's content in its status, so its second counter
# is the cumulative count of blocks added: "levelled off" then means no block was added in a check.
ENGINE_COUNTERS = {
    "innodb": (READS, PAGES),
    "rocksdb": ("Rocksdb_block_cache_miss", "Rocksdb_block_cache_add"),
}
# How often (seconds of the warmup run) the server's counters are compared: long enough for a
# read from disk to show up, short enough to stop soon after warm.
CHECK_S = 2
# "Levelled off": the pool's page count moved by at most this fraction (or one page) in a check.
PAGES_TOLERANCE = 0.001


def _get(status: Mapping[str, float], name: str) -> float:
    for k, v in status.items():
        if k.lower() == name.lower():
            return float(v)
    raise SuiteError(f"the server's global status has no {name}; is this an InnoDB server?")


def _counters(
    status_fn: Callable[[], Mapping[str, float]], names: tuple[str, str] = (READS, PAGES)
) -> tuple[float, float]:
    s = status_fn()
    return _get(s, names[0]), _get(s, names[1])


def is_warm(reads_delta: float, pages_before: float, pages_after: float) -> bool:
    """A check period with no reads from disk and a buffer pool whose pages stopped growing."""
    steady = abs(pages_after - pages_before) <= max(1.0, PAGES_TOLERANCE * pages_before)
    return reads_delta <= 0 and steady


def scan_tables(conn_factory, database: str, tables: int) -> float:
    """The FORCE KEY (PRIMARY) scans; returns seconds. SuiteError naming the table on failure."""
    started = time.monotonic()
    try:
        conn = conn_factory()
    except Exception as e:  # noqa: BLE001 - a server gone before warmup is a failed cell, one line
        raise SuiteError(f"warmup could not connect to the server: {e}") from None
    try:
        cur = conn.cursor()
        for n in range(1, tables + 1):
            table = f"`{database}`.`sbtest{n}`"
            try:
                cur.execute(f"SELECT AVG(id) FROM {table} FORCE KEY (PRIMARY)")
                cur.fetchall()
            except Exception as e:  # noqa: BLE001 - any driver error becomes a one-line SuiteError
                raise SuiteError(f"warmup scan of {table} failed: {e}") from None
        cur.close()
    finally:
        conn.close()
    return time.monotonic() - started


def warm_up(
    conn_factory: Callable[[], object],
    target: ClientTarget,
    tables: int,
    opts: SysbenchOptions,
    cap_s: float,
    min_s: float,
    log_dir: Path,
    status_fn: Callable[[], Mapping[str, float]],
    *,
    scan: bool = True,
    threads: int = 8,
    check_s: float = CHECK_S,
    on_interval: Callable[[float, float, float], None] | None = None,
    engine: str = "innodb",
) -> dict:
    """Scan, then one OLTP_RO run of at most `cap_s` seconds, stopped once warm after `min_s`.

    Returns what it saw (all counters are the server's own): seconds, warm, bp_reads_start/end/
    during, pages_data_start/end, scan_seconds, oltp_seconds, checks [{t_s, oltp_t_s, qps,
    bp_reads_delta, pages_data, warm}] (one per `check_s` of the run), stopped_by ("warm", "cap"
    or "error"), and error when the run failed. `on_interval(t_s, tps, qps)` receives sysbench's
    interval reports (the timeline's throughput during warmup).
    """
    if cap_s < 0 or min_s < 0 or (cap_s and min_s > cap_s):
        raise SuiteError(f"warmup: need 0 <= min_s <= cap_s, got min_s={min_s} cap_s={cap_s}")
    if check_s <= 0:
        raise SuiteError(f"warmup: check_s must be > 0, got {check_s}")
    log_dir = Path(log_dir)
    started = time.monotonic()
    names = ENGINE_COUNTERS[engine]
    reads0, pages0 = _counters(status_fn, names)
    out: dict = {
        "threads": threads,
        "scan": scan,
        "cap_s": cap_s,
        "min_s": min_s,
        "check_s": check_s,
        "engine": engine,
        "criterion": (
            f"{names[0]} delta 0 and {names[1]} within {PAGES_TOLERANCE:.1%} over {check_s:g}s of "
            "one continuous OLTP_RO run"
        ),
        "bp_reads_start": reads0,
        "pages_data_start": pages0,
        "scan_seconds": 0.0,
        "oltp_seconds": 0.0,
        "checks": [],
        "warm": False,
        "stopped_by": None,
    }
    if scan:
        out["scan_seconds"] = round(scan_tables(conn_factory, target.database, tables), 3)
    reads, pages = _counters(status_fn, names)
    out["bp_reads_after_scan"] = reads
    oltp_started = time.monotonic()
    seconds = int(cap_s)  # sysbench runs whole seconds; a cap below 1 s means scan only
    if seconds >= 1:
        watch = _WarmWatch(status_fn, reads, pages, min_s, check_s, started, on_interval, names)
        res = run_level(
            target,
            "oltp_ro",
            threads,
            seconds,
            opts,
            log_dir / "warmup.log",
            on_interval=watch.interval,
            stop_when=watch.is_done,
        )
        out["oltp_seconds"] = round(time.monotonic() - oltp_started, 3)
        out["checks"] = watch.checks
        out["warm"] = watch.warm
        out["qps"] = round(res.qps, 2)
        out["sysbench_seconds"] = res.duration_s
        if res.status != "ok":
            out["error"] = f"warmup OLTP_RO run failed: {res.error}"
            out["stopped_by"] = "error"
        else:
            out["stopped_by"] = "warm" if watch.warm else "cap"
        reads, pages = _counters(status_fn, names)
    out["bp_reads_end"], out["pages_data_end"] = reads, pages
    out["bp_reads_during"] = reads - reads0
    out["seconds"] = round(time.monotonic() - started, 3)
    return out


class _WarmWatch:
    """Follows a running warmup: the server's counters every `check_s` of sysbench's clock."""

    def __init__(
        self, status_fn, reads, pages, min_s, check_s, started, on_interval, names=(READS, PAGES)
    ):
        self.status_fn = status_fn
        self.names = names
        self.reads, self.pages = reads, pages
        self.min_s, self.check_s = min_s, check_s
        self.started = started
        self.on_interval = on_interval
        self.last_t = 0.0
        self.qps: list[float] = []
        self.checks: list[dict] = []
        self.warm = False

    def interval(self, t: float, tps: float, qps: float) -> None:
        if self.on_interval is not None:
            self.on_interval(t, tps, qps)
        self.qps.append(qps)
        if t - self.last_t < self.check_s - 1e-6 or self.warm:
            return
        reads, pages = _counters(self.status_fn, self.names)
        warm_now = is_warm(reads - self.reads, self.pages, pages)
        self.checks.append(
            {
                "t_s": round(time.monotonic() - self.started, 3),
                "oltp_t_s": round(t, 3),
                "qps": round(sum(self.qps) / len(self.qps), 2),
                "bp_reads_delta": reads - self.reads,
                "pages_data": pages,
                "warm": warm_now,
            }
        )
        self.reads, self.pages, self.last_t, self.qps = reads, pages, t, []
        if warm_now and t >= self.min_s:
            self.warm = True

    def is_done(self) -> bool:
        return self.warm


def warm_vs_fixed(start_to_warm_s: float, fixed_s: float = 600.0) -> dict:
    """For `make bench`: server start to warm, against the 2012 protocol's fixed 600 s warmup."""
    return {
        "start_to_warm_s": round(start_to_warm_s, 3),
        "fixed_s": fixed_s,
        "ratio": round(fixed_s / start_to_warm_s, 1) if start_to_warm_s > 0 else None,
    }
