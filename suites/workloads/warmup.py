"""Warm the server's cache before the first level, until it is warm (with a cap), and say what we
saw.

Every cell restarts its server from the same cold datadir (buffer-pool dump/load is off), so
without a warmup the first allocator level would pay for the disk reads of the next ones. The
procedure is the classic one, with the workload's parts: its scans (a full PRIMARY-key scan of
each of its tables), then one continuous run of its load — its clients connected once (not short
runs that reconnect every few seconds, which warm the connection path instead) — while the
server's own counters are read every CHECK_S seconds of that run: it is warm when the reads that
missed the cache ("cache_misses": InnoDB's Innodb_buffer_pool_reads) no longer rise and what the
cache holds ("cache_fill": Innodb_buffer_pool_pages_data) has levelled off. Which counters those
are is the server family's declaration, for the tables' engine. Then the load is stopped. A fixed
600 s warmup is usually far longer than needed; one that stops at the first quiet check is too
short, hence `min_s`; `cap_s` bounds a cache that never settles. Every cell runs the same
procedure, so no allocator starts warmer than another — and the returned record shows it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from suites.errors import SuiteError
from suites.workloads.level_result import LevelResult

# The two counters the warmup watches, by meaning (rundir.format.COUNTER_MEANINGS).
MISSES = "cache_misses"
FILL = "cache_fill"
# How often (seconds of the warmup run) the server's counters are compared: long enough for a
# read from disk to show up, short enough to stop soon after warm.
CHECK_S = 2
# "Levelled off": the cache's fill moved by at most this fraction (or one page) in a check.
PAGES_TOLERANCE = 0.001

# (cache misses, cache fill) now
Counters = Callable[[], tuple[float, float]]
# Runs the warmup load for at most `seconds`: (seconds, on_interval, stop_when) -> its result
Load = Callable[[int, Callable[[float, float, float], None], Callable[[], bool]], LevelResult]


def is_warm(reads_delta: float, pages_before: float, pages_after: float) -> bool:
    """A check period with no reads from disk and a cache whose fill stopped growing."""
    steady = abs(pages_after - pages_before) <= max(1.0, PAGES_TOLERANCE * pages_before)
    return reads_delta <= 0 and steady


def cache_counters(read: Callable[..., dict], names: tuple[str, str]) -> Counters:
    """The two counters from `read(MISSES, FILL)` (suites.workloads.context.LevelContext.counters);
    SuiteError naming the server's counter when it has none."""

    def counters() -> tuple[float, float]:
        got = read(MISSES, FILL)
        for meaning, name in zip((MISSES, FILL), names, strict=True):
            if got.get(meaning) is None:
                raise SuiteError(
                    f"the server's status has no {name or meaning}: nothing says when it is warm"
                )
        return got[MISSES], got[FILL]

    return counters


def by_name(status: Mapping[str, float]) -> dict[str, float]:
    """A status by lower-case name: servers differ in case (MariaDB prints MyRocks' counters in
    lower case, rocksdb_block_cache_miss)."""
    return {str(k).lower(): float(v) for k, v in status.items()}


def status_counters(status: Callable[[], Mapping[str, float]], names: tuple[str, str]) -> Counters:
    """The two counters, by the server's names for them, from a whole status read (a server
    driven without a cell: the bench, tests)."""

    def read(*meanings: str) -> dict:
        got = by_name(status())
        return {m: got.get(n.lower()) for m, n in zip(meanings, names, strict=True)}

    return cache_counters(read, names)


def warm_up(
    counters: Counters,
    names: tuple[str, str],
    *,
    cap_s: float,
    min_s: float,
    scan: Callable[[], float] | None = None,
    load: Load | None = None,
    load_name: str = "",
    threads: int = 8,
    check_s: float = CHECK_S,
    on_interval: Callable[[float, float, float], None] | None = None,
    engine: str = "",
) -> dict:
    """`scan()` (seconds it took), then one run of `load` of at most `cap_s` seconds, stopped
    once warm after `min_s`. `names`: what the server calls its two counters (the record's
    criterion).

    Returns what it saw (all counters are the server's own): seconds, warm, bp_reads_start/end/
    during, pages_data_start/end, scan_seconds, oltp_seconds, checks [{t_s, oltp_t_s, qps,
    bp_reads_delta, pages_data, warm}] (one per `check_s` of the run), stopped_by ("warm", "cap"
    or "error"), and error when the run failed. `on_interval(t_s, tps, qps)` receives the load's
    interval reports (the timeline's throughput during warmup).
    """
    if cap_s < 0 or min_s < 0 or (cap_s and min_s > cap_s):
        raise SuiteError(f"warmup: need 0 <= min_s <= cap_s, got min_s={min_s} cap_s={cap_s}")
    if check_s <= 0:
        raise SuiteError(f"warmup: check_s must be > 0, got {check_s}")
    started = time.monotonic()
    reads0, pages0 = counters()
    out: dict = {
        "threads": threads,
        "scan": scan is not None,
        "cap_s": cap_s,
        "min_s": min_s,
        "check_s": check_s,
        "engine": engine,
        "criterion": (
            f"{names[0]} delta 0 and {names[1]} within {PAGES_TOLERANCE:.1%} over {check_s:g}s of "
            f"one continuous {load_name} run"
        ),
        "bp_reads_start": reads0,
        "pages_data_start": pages0,
        "scan_seconds": 0.0,
        "oltp_seconds": 0.0,
        "checks": [],
        "warm": False,
        "stopped_by": None,
    }
    if scan is not None:
        out["scan_seconds"] = round(scan(), 3)
    reads, pages = counters()
    out["bp_reads_after_scan"] = reads
    load_started = time.monotonic()
    seconds = int(cap_s)  # sysbench runs whole seconds; a cap below 1 s means scan only
    if seconds >= 1 and load is not None:
        watch = _WarmWatch(counters, reads, pages, min_s, check_s, started, on_interval)
        res = load(seconds, watch.interval, watch.is_done)
        out["oltp_seconds"] = round(time.monotonic() - load_started, 3)
        out["checks"] = watch.checks
        out["warm"] = watch.warm
        out["qps"] = round(res.qps, 2)
        out["sysbench_seconds"] = res.duration_s
        if res.status != "ok":
            out["error"] = f"warmup {load_name} run failed: {res.error}"
            out["stopped_by"] = "error"
        else:
            out["stopped_by"] = "warm" if watch.warm else "cap"
        reads, pages = counters()
    out["bp_reads_end"], out["pages_data_end"] = reads, pages
    out["bp_reads_during"] = reads - reads0
    out["seconds"] = round(time.monotonic() - started, 3)
    return out


class _WarmWatch:
    """Follows a running warmup: the server's counters every `check_s` of the load's clock."""

    def __init__(self, counters, reads, pages, min_s, check_s, started, on_interval):
        self.counters = counters
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
        reads, pages = self.counters()
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
