"""One read-while-writing client process: the loader, the writer or a reader.

Run in a client process by the level (suites.workloads.client_procs starts it through the exec
helper and says how it shares state). Clients coordinate through the board only: one operation
counter slot per client, written by its owner and read by the level runner for the interval
rates; go starts every clock at once after all have connected; stop ends the writer (and any
reader still reading, at the time cap). A client's messages are "ready", then "done" (its
figures and encoded latency histogram) or "failed".

Statements go through the C client's low-level calls (query, store_result, fetch_row of
mysqlclient's _mysql connection): no cursor, no parameter conversion — the values are our own
ASCII letters and the keys our own integers, so they are written as literals.
"""

from __future__ import annotations

import random
import string
import time
from dataclasses import asdict

import MySQLdb

from suites.workloads.client_procs import Link
from suites.workloads.level_result import ClientTarget
from suites.workloads.rww.latency import Buckets
from suites.workloads.rww.spec import TABLE, RwwSpec

LOADER = "loader"
WRITER = "writer"
READER = "reader"
_STOP_WAIT_S = 600.0


def work(target: ClientTarget, spec: RwwSpec) -> dict:
    """The work description every client of a level gets (JSON)."""
    return {"target": asdict(target), "spec": asdict(spec)}


def connect(target: ClientTarget):
    """A connection in target.database, by the target's driver."""
    return target.driver.connect(target)


class _Values:
    """Values of `size` ASCII letters: slices of one random pool at random offsets, so making a
    4,000-byte value costs a slice, not 4,000 random draws."""

    def __init__(self, rnd: random.Random, size: int):
        self.rnd, self.size = rnd, size
        letters = string.ascii_letters.encode()
        self.pool = bytes(rnd.choice(letters) for _ in range(size + 8192))

    def next(self) -> bytes:
        off = self.rnd.randrange(8192)
        return self.pool[off : off + self.size]


def client_main(link: Link) -> None:
    target = ClientTarget(**link.work["target"])
    spec = RwwSpec(**link.work["spec"])
    conn = None
    try:
        conn = connect(target)
        link.ready()
        if not link.wait_go(spec.startup_timeout_s):
            return
        loop = {LOADER: _load, WRITER: _write, READER: _read}[link.role]
        figures = loop(link, spec, conn)
        link.done(figures)
        # Connected until the runner's final report: a disconnect is outside the measured load.
        link.wait_stop(_STOP_WAIT_S)
    finally:
        if conn is not None:
            try:
                conn.close()
            except MySQLdb.Error:
                pass


def _figures(link: Link, ops: int, cpu0: float, hist: Buckets, **more) -> dict:
    end, cpu = time.monotonic(), link.cpu_s() - cpu0  # before the histogram is encoded
    return {"ops": ops, "end": end, "cpu_s": cpu, "histogram": hist.encoded_histogram(), **more}


def _load(link: Link, spec: RwwSpec, conn) -> dict:
    """Batched sequential inserts of ids 1..records: one multi-row INSERT (one transaction) per
    batch; the latency is per batch, the op is a row."""
    values = _Values(random.Random(spec.seed), spec.value_bytes)
    hist, cpu0 = Buckets(), link.cpu_s()
    deadline = link.t0 + spec.load_max_seconds
    board, slots, me = link.board, link.board.slots, link.number
    head = f"INSERT INTO {TABLE} (id,v) VALUES ".encode()
    done = 0
    while done < spec.records and not board.stop and time.monotonic() < deadline:
        n = min(spec.batch_rows, spec.records - done)
        sql = head + b",".join(b"(%d,'%s')" % (done + 1 + i, values.next()) for i in range(n))
        start = time.perf_counter()
        conn.query(sql)
        hist.add(int((time.perf_counter() - start) * 1e6))
        done += n
        slots[me] = done
    return _figures(link, done, cpu0, hist, batches=sum(hist.counts.values()))


def _write(link: Link, spec: RwwSpec, conn) -> dict:
    """Random updates of existing rows, one autocommit UPDATE each, until `stop`."""
    rnd = random.Random(spec.seed * 1_000_003 + 17)
    values = _Values(rnd, spec.value_bytes)
    hist, cpu0 = Buckets(), link.cpu_s()
    head = f"UPDATE {TABLE} SET v='".encode()
    ops = 0
    board, slots, i = link.board, link.board.slots, link.number
    while not board.stop:
        sql = b"%s%s' WHERE id=%d" % (head, values.next(), rnd.randint(1, spec.records))
        start = time.perf_counter()
        conn.query(sql)
        hist.add(int((time.perf_counter() - start) * 1e6))
        ops += 1
        slots[i] = ops
    return _figures(link, ops, cpu0, hist)


def _read(link: Link, spec: RwwSpec, conn) -> dict:
    """Random point reads until this reader has read as many rows as the table holds (the
    stop rule), or `stop` (the time cap). A key that returns no row is counted as a miss."""
    rnd = random.Random(spec.seed * 7919 + link.number)
    hist, cpu0 = Buckets(), link.cpu_s()
    head = f"SELECT v FROM {TABLE} WHERE id=".encode()
    reads = misses = 0
    board, slots, i = link.board, link.board.slots, link.number
    while reads < spec.records and not board.stop:
        sql = head + b"%d" % rnd.randint(1, spec.records)
        start = time.perf_counter()
        conn.query(sql)
        rows = conn.store_result().fetch_row()
        hist.add(int((time.perf_counter() - start) * 1e6))
        if not rows:
            misses += 1
        reads += 1
        slots[i] = reads
    return _figures(link, reads, cpu0, hist, misses=misses)
