"""Warm the buffer pool before the first level, until it is warm (with a cap), and say what we saw.

Every cell restarts its server from the same cold datadir (buffer-pool dump/load is off), so
without a warmup the first allocator level would pay for the disk reads of the next ones. The
procedure is the classic one: a full PRIMARY-key scan of each table (SELECT AVG(id) ... FORCE KEY
(PRIMARY)), then OLTP_RO in short chunks until the server's own counters say it is warm:
Innodb_buffer_pool_reads (reads that missed the pool and went to disk) no longer rises and
Innodb_buffer_pool_pages_data has levelled off. A fixed 600 s warmup (the 2012 protocol) is
usually far longer than needed; one that stops at the first quiet second is too short, hence
`min_s`. Every cell runs the same procedure, so no allocator starts warmer than another — and the
returned record lets the report show it.
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
CHUNK_S = 2  # long enough for sysbench to connect and settle, short enough to stop soon after warm
# "Levelled off": the pool's page count moved by at most this fraction (or one page) in a chunk.
PAGES_TOLERANCE = 0.001


def _get(status: Mapping[str, float], name: str) -> float:
    for k, v in status.items():
        if k.lower() == name.lower():
            return float(v)
    raise SuiteError(f"the server's global status has no {name}; is this an InnoDB server?")


def _counters(status_fn: Callable[[], Mapping[str, float]]) -> tuple[float, float]:
    s = status_fn()
    return _get(s, READS), _get(s, PAGES)


def is_warm(reads_delta: float, pages_before: float, pages_after: float) -> bool:
    """A chunk with no reads from disk and a buffer pool whose data pages stopped growing."""
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
    chunk_s: int = CHUNK_S,
) -> dict:
    """Scan, then OLTP_RO chunks for at least `min_s` and at most `cap_s` seconds until warm.

    Returns what it saw (all counters are the server's own): seconds, warm, bp_reads_start/end/
    during, pages_data_start/end, scan_seconds, oltp_seconds, chunks [{t_s, seconds, qps,
    bp_reads_delta, pages_data, status}], and error when a chunk failed.
    """
    if cap_s < 0 or min_s < 0 or (cap_s and min_s > cap_s):
        raise SuiteError(f"warmup: need 0 <= min_s <= cap_s, got min_s={min_s} cap_s={cap_s}")
    log_dir = Path(log_dir)
    started = time.monotonic()
    reads0, pages0 = _counters(status_fn)
    out: dict = {
        "threads": threads,
        "scan": scan,
        "cap_s": cap_s,
        "min_s": min_s,
        "criterion": f"{READS} delta 0 and {PAGES} within {PAGES_TOLERANCE:.1%} over a {chunk_s}s chunk",
        "bp_reads_start": reads0,
        "pages_data_start": pages0,
        "scan_seconds": 0.0,
        "oltp_seconds": 0.0,
        "chunks": [],
        "warm": False,
    }
    if scan:
        out["scan_seconds"] = round(scan_tables(conn_factory, target.database, tables), 3)
    reads, pages = _counters(status_fn)
    out["bp_reads_after_scan"] = reads
    oltp_started = time.monotonic()
    n = 0
    while True:
        elapsed = time.monotonic() - oltp_started
        remaining = cap_s - elapsed
        if remaining < 1:  # sysbench runs whole seconds; a cap of 0 means scan only
            break
        n += 1
        length = int(min(chunk_s, remaining))
        res = run_level(target, "oltp_ro", threads, length, opts, log_dir / f"warmup-{n:03d}.log")
        reads_after, pages_after = _counters(status_fn)
        chunk = {
            "t_s": round(time.monotonic() - started, 3),
            "seconds": res.duration_s,
            "qps": round(res.qps, 2),
            "bp_reads_delta": reads_after - reads,
            "pages_data": pages_after,
            "status": res.status,
        }
        out["chunks"].append(chunk)
        if res.status != "ok":
            out["error"] = f"warmup chunk {n} failed: {res.error}"
            reads, pages = reads_after, pages_after
            break
        warm_now = is_warm(reads_after - reads, pages, pages_after)
        reads, pages = reads_after, pages_after
        if warm_now and time.monotonic() - oltp_started >= min_s:
            out["warm"] = True
            break
    out["oltp_seconds"] = round(time.monotonic() - oltp_started, 3)
    out["bp_reads_end"], out["pages_data_end"] = reads, pages
    out["bp_reads_during"] = reads - reads0
    out["seconds"] = round(time.monotonic() - started, 3)
    return out


def warm_vs_fixed(start_to_warm_s: float, fixed_s: float = 600.0) -> dict:
    """For `make bench`: server start to warm, against the 2012 protocol's fixed 600 s warmup."""
    return {
        "start_to_warm_s": round(start_to_warm_s, 3),
        "fixed_s": fixed_s,
        "ratio": round(fixed_s / start_to_warm_s, 1) if start_to_warm_s > 0 else None,
    }
