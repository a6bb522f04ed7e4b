"""One iibench client: the loop that runs in each client process (or thread, for the baseline).

Run in a client process by the level (suites.workloads.client_procs starts it through the
exec helper and says how it shares state). Clients coordinate through the board, never through the
runner's loop:
- the board's counter, claimed under a lock: a client claims the next `batch_rows` primary keys,
  which both keeps inserts in key order across clients and makes the `max_rows` budget exact;
- two slots per insert client (rows, then batches), written only by their owner, read by the
  runner for the per-interval rates (no message per batch);
- go starts every clock at once after all clients have connected, stop ends the level.
A client's only messages are "ready", and at the end "done" (its figures and its encoded latency
histogram) or "failed" (one line saying why).
"""

from __future__ import annotations

import time
from dataclasses import asdict
from datetime import UTC, datetime

from suites.workloads.client_procs import Link
from suites.workloads.iibench.connect import open_backend
from suites.workloads.iibench.latency import new_histogram, record_us
from suites.workloads.iibench.rows import RowSource
from suites.workloads.iibench.spec import IIBenchSpec
from suites.workloads.level_result import ClientTarget

INSERT = "insert"
QUERY = "query"
_STOP_WAIT_S = 600.0


def work(target: ClientTarget, spec: IIBenchSpec) -> dict:
    """The work description every client of a level gets (JSON)."""
    return {"target": asdict(target), "spec": asdict(spec)}


def slots(spec: IIBenchSpec) -> int:
    return 2 * spec.clients  # rows of insert client i at i, its batches at clients + i


def client_main(link: Link) -> None:
    """Entry point of one client (process or thread)."""
    target = ClientTarget(**link.work["target"])
    spec = IIBenchSpec(**link.work["spec"])
    backend = None
    try:
        backend = open_backend(target)
        link.ready()
        if not link.wait_go(spec.startup_timeout_s):
            return  # the runner gave up starting the level; it reports why
        if link.role == INSERT:
            figures = _insert_loop(link, spec, backend)
        else:
            figures = _query_loop(link, spec, backend)
        link.done(figures)
        # Stay connected until the runner has taken its final report: a disconnect (the server
        # tearing down a connection thread) belongs outside the measured load. The runner always
        # says stop in the end; the timeout only guards against a runner that vanished.
        link.wait_stop(_STOP_WAIT_S)
    finally:
        if backend is not None:
            backend.close()


def _deadline(spec: IIBenchSpec, t0: float) -> float:
    return t0 + spec.max_seconds if spec.max_seconds else float("inf")


def _insert_loop(link: Link, spec: IIBenchSpec, backend) -> dict:
    i = link.number
    source = RowSource(spec.seed, i, spec.data_length)
    hist = new_histogram()
    deadline = _deadline(spec, link.t0)
    cpu0 = link.cpu_s()
    board = link.board
    slots, batch_slot = board.slots, spec.clients + i
    rows_done = batches_done = 0
    while not board.stop and time.monotonic() < deadline:
        # max_rows >= 1 always (IIBenchSpec): the budget makes the last batch short.
        first, n = board.claim(spec.batch_rows, spec.max_rows)
        if n <= 0:
            break
        batch = source.next_batch(
            first + 1, n, datetime.now(UTC).replace(microsecond=0, tzinfo=None)
        )
        start = time.perf_counter()
        backend.insert(batch)
        record_us(hist, (time.perf_counter() - start) * 1e6)
        rows_done += n
        batches_done += 1
        slots[i] = rows_done
        slots[batch_slot] = batches_done
    end = time.monotonic()
    return {
        "rows": rows_done,
        "batches": batches_done,
        "end": end,
        "cpu_s": link.cpu_s() - cpu0,
        "histogram": hist.encode(),
    }


def _query_loop(link: Link, spec: IIBenchSpec, backend) -> dict:
    source = RowSource(spec.seed + 7919, link.number, 0)  # its own stream, apart from inserters
    hist = new_histogram()
    deadline = _deadline(spec, link.t0)
    cpu0 = link.cpu_s()
    board = link.board
    queries = rows_read = 0
    while not board.stop and time.monotonic() < deadline:
        start = time.perf_counter()
        rows_read += backend.query(source.query_price())
        record_us(hist, (time.perf_counter() - start) * 1e6)
        queries += 1
    return {
        "queries": queries,
        "rows_read": rows_read,
        "end": time.monotonic(),
        "cpu_s": link.cpu_s() - cpu0,
        "histogram": hist.encode(),
    }
