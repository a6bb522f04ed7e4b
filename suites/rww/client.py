"""One read-while-writing client process: the loader, the writer or a reader.

Clients coordinate through `Shared` only: one operation counter per client, written by its owner
and read by the level runner for the interval rates; `go` starts every clock at once after all
have connected; `stop` ends the writer (and any reader still reading, at the time cap). A client's
messages are "ready", then "done" (its figures and encoded latency histogram) or "failed".

Statements go through the C client's low-level calls (query, store_result, fetch_row of
mysqlclient's _mysql connection): no cursor, no parameter conversion — the values are our own
ASCII letters and the keys our own integers, so they are written as literals.
"""

from __future__ import annotations

import random
import string
import time
from dataclasses import dataclass

import MySQLdb

from suites.iibench.client import _bind_to_parent, _cpu_s
from suites.rww.latency import Buckets
from suites.rww.spec import TABLE, RwwSpec
from suites.workload import ClientTarget

LOADER = "loader"
WRITER = "writer"
READER = "reader"
_STOP_WAIT_S = 600.0


@dataclass
class Shared:
    ops: object  # RawArray('q'): operations done, one slot per client (rows for the loader)
    t0: object  # RawValue('d'): time.monotonic() at go
    go: object  # Event
    stop: object  # Event
    results: object  # Queue of ("ready"|"done"|"failed", role, number, payload)

    @classmethod
    def create(cls, ctx, clients: int) -> Shared:
        return cls(
            ops=ctx.RawArray("q", clients),
            t0=ctx.RawValue("d", 0.0),
            go=ctx.Event(),
            stop=ctx.Event(),
            results=ctx.Queue(),
        )


@dataclass(frozen=True)
class ClientArgs:
    role: str
    number: int  # its slot in Shared.ops
    target: ClientTarget
    spec: RwwSpec
    parent_pid: int


def connect(target: ClientTarget):
    args = {"user": target.user, "password": target.password, "autocommit": True}
    if target.socket:
        args["unix_socket"] = target.socket
    else:
        args.update(host=target.host, port=target.port)
    args["database"] = target.database
    return MySQLdb.connect(**args)


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


def client_main(args: ClientArgs, shared: Shared) -> None:
    _bind_to_parent(args.parent_pid)
    conn = None
    try:
        conn = connect(args.target)
        shared.results.put(("ready", args.role, args.number, None))
        if not shared.go.wait(args.spec.startup_timeout_s):
            return
        loop = {LOADER: _load, WRITER: _write, READER: _read}[args.role]
        figures = loop(args, shared, conn)
        shared.results.put(("done", args.role, args.number, figures))
        # Connected until the runner's final report: a disconnect is outside the measured load.
        shared.stop.wait(_STOP_WAIT_S)
    except Exception as e:  # noqa: BLE001 - any failure ends this client; the runner reports it
        text = str(e).splitlines()[0] if str(e) else ""
        shared.results.put(("failed", args.role, args.number, f"{type(e).__name__}: {text}"))
    finally:
        if conn is not None:
            try:
                conn.close()
            except MySQLdb.Error:
                pass


def _figures(args, ops: int, cpu0: float, hist: Buckets, **more) -> dict:
    end, cpu = time.monotonic(), _cpu_s(True) - cpu0  # before the histogram is encoded
    return {"ops": ops, "end": end, "cpu_s": cpu, "histogram": hist.encoded_histogram(), **more}


def _load(args: ClientArgs, shared: Shared, conn) -> dict:
    """Batched sequential inserts of ids 1..records: one multi-row INSERT (one transaction) per
    batch; the latency is per batch, the op is a row."""
    spec = args.spec
    values = _Values(random.Random(spec.seed), spec.value_bytes)
    hist, cpu0 = Buckets(), _cpu_s(True)
    deadline = shared.t0.value + spec.load_max_seconds
    head = f"INSERT INTO {TABLE} (id,v) VALUES ".encode()
    done = 0
    while done < spec.records and not shared.stop.is_set() and time.monotonic() < deadline:
        n = min(spec.batch_rows, spec.records - done)
        sql = head + b",".join(b"(%d,'%s')" % (done + 1 + i, values.next()) for i in range(n))
        start = time.perf_counter()
        conn.query(sql)
        hist.add(int((time.perf_counter() - start) * 1e6))
        done += n
        shared.ops[args.number] = done
    return _figures(args, done, cpu0, hist, batches=sum(hist.counts.values()))


def _write(args: ClientArgs, shared: Shared, conn) -> dict:
    """Random updates of existing rows, one autocommit UPDATE each, until `stop`."""
    spec = args.spec
    rnd = random.Random(spec.seed * 1_000_003 + 17)
    values = _Values(rnd, spec.value_bytes)
    hist, cpu0 = Buckets(), _cpu_s(True)
    head = f"UPDATE {TABLE} SET v='".encode()
    ops = 0
    stop = shared.stop
    while not stop.is_set():
        sql = b"%s%s' WHERE id=%d" % (head, values.next(), rnd.randint(1, spec.records))
        start = time.perf_counter()
        conn.query(sql)
        hist.add(int((time.perf_counter() - start) * 1e6))
        ops += 1
        shared.ops[args.number] = ops
    return _figures(args, ops, cpu0, hist)


def _read(args: ClientArgs, shared: Shared, conn) -> dict:
    """Random point reads until this reader has read as many rows as the table holds (the
    stop rule), or `stop` (the time cap). A key that returns no row is counted as a miss."""
    spec = args.spec
    rnd = random.Random(spec.seed * 7919 + args.number)
    hist, cpu0 = Buckets(), _cpu_s(True)
    head = f"SELECT v FROM {TABLE} WHERE id=".encode()
    reads = misses = 0
    stop = shared.stop
    while reads < spec.records and not stop.is_set():
        sql = head + b"%d" % rnd.randint(1, spec.records)
        start = time.perf_counter()
        conn.query(sql)
        rows = conn.store_result().fetch_row()
        hist.add(int((time.perf_counter() - start) * 1e6))
        if not rows:
            misses += 1
        reads += 1
        shared.ops[args.number] = reads
    return _figures(args, reads, cpu0, hist, misses=misses)
