"""One iibench client: the loop that runs in each client process (or thread, for the baseline).

Clients coordinate through a few shared objects (`Shared`), never through the runner's loop:
- a primary-key counter under a lock: a client claims the next `batch_rows` keys, which both keeps
  inserts in key order across clients and makes the `max_rows` budget exact;
- one rows/batches slot per insert client, written only by its owner, read by the runner for the
  per-interval rates (no message per batch);
- `go` starts every clock at once after all clients have connected, `stop` ends the level.
A client's only messages are "ready", and at the end "done" (its figures and its encoded latency
histogram) or "failed" (one line saying why).
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import time
from dataclasses import dataclass
from datetime import UTC, datetime

from suites.iibench.backend import open_backend
from suites.iibench.latency import new_histogram, record_us
from suites.iibench.rows import RowSource
from suites.iibench.spec import IIBenchSpec
from suites.workload import ClientTarget

PR_SET_PDEATHSIG = 1

INSERT = "insert"
QUERY = "query"
_STOP_WAIT_S = 600.0


@dataclass
class Shared:
    """The objects every client shares (created from one multiprocessing context)."""

    claim: object  # Value('q'): primary keys handed out so far
    rows: object  # RawArray('q'), one slot per insert client
    batches: object  # RawArray('q'), one slot per insert client
    t0: object  # RawValue('d'): time.monotonic() at go (CLOCK_MONOTONIC is system-wide)
    go: object  # Event
    stop: object  # Event
    results: object  # Queue of ("ready"|"done"|"failed", role, number, payload)

    @classmethod
    def create(cls, ctx, insert_clients: int) -> Shared:
        return cls(
            claim=ctx.Value("q", 0),
            rows=ctx.RawArray("q", insert_clients),
            batches=ctx.RawArray("q", insert_clients),
            t0=ctx.RawValue("d", 0.0),
            go=ctx.Event(),
            stop=ctx.Event(),
            results=ctx.Queue(),
        )


@dataclass(frozen=True)
class ClientArgs:
    role: str  # INSERT or QUERY
    number: int  # 0-based within its role
    target: ClientTarget
    spec: IIBenchSpec
    parent_pid: int
    own_process: bool  # True in a client process: tie its life to the runner's


def _bind_to_parent(parent_pid: int) -> None:
    """Die with the runner (even on SIGKILL), and stay out of the terminal's process group so a
    Ctrl-C reaches only the runner, which then stops the clients itself."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, ctypes.c_ulong(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent_pid:  # the runner died before the prctl took effect
        os._exit(1)
    os.setpgid(0, 0)


def _cpu_s(own_process: bool) -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF if own_process else resource.RUSAGE_THREAD)
    return ru.ru_utime + ru.ru_stime


def client_main(args: ClientArgs, shared: Shared) -> None:
    """Entry point of one client (process target or thread target)."""
    if args.own_process:
        _bind_to_parent(args.parent_pid)
    backend = None
    try:
        backend = open_backend(args.target)
        shared.results.put(("ready", args.role, args.number, None))
        if not shared.go.wait(args.spec.startup_timeout_s):
            return  # the runner gave up starting the level; it reports why
        if args.role == INSERT:
            figures = _insert_loop(args, shared, backend)
        else:
            figures = _query_loop(args, shared, backend)
        shared.results.put(("done", args.role, args.number, figures))
        # Stay connected until the runner has taken its final report: a disconnect (the server
        # tearing down a connection thread) belongs outside the measured load. The runner always
        # sets `stop` in the end; the timeout only guards against a runner that vanished.
        shared.stop.wait(_STOP_WAIT_S)
    except Exception as e:  # noqa: BLE001 - any failure ends this client; the runner reports it
        text = str(e).splitlines()[0] if str(e) else ""
        shared.results.put(("failed", args.role, args.number, f"{type(e).__name__}: {text}"))
    finally:
        if backend is not None:
            backend.close()


def _deadline(spec: IIBenchSpec, t0: float) -> float:
    return t0 + spec.max_seconds if spec.max_seconds else float("inf")


def _insert_loop(args: ClientArgs, shared: Shared, backend) -> dict:
    spec, i = args.spec, args.number
    source = RowSource(spec.seed, i, spec.data_length)
    hist = new_histogram()
    deadline = _deadline(spec, shared.t0.value)
    cpu0 = _cpu_s(args.own_process)
    claim, stop = shared.claim, shared.stop
    rows_done = batches_done = 0
    while not stop.is_set() and time.monotonic() < deadline:
        with claim.get_lock():
            first = claim.value
            # max_rows >= 1 always (IIBenchSpec): the budget makes the last batch short.
            n = min(spec.batch_rows, spec.max_rows - first)
            if n <= 0:
                break
            claim.value = first + n
        batch = source.next_batch(
            first + 1, n, datetime.now(UTC).replace(microsecond=0, tzinfo=None)
        )
        start = time.perf_counter()
        backend.insert(batch)
        record_us(hist, (time.perf_counter() - start) * 1e6)
        rows_done += n
        batches_done += 1
        shared.rows[i] = rows_done
        shared.batches[i] = batches_done
    end = time.monotonic()
    return {
        "rows": rows_done,
        "batches": batches_done,
        "end": end,
        "cpu_s": _cpu_s(args.own_process) - cpu0,
        "histogram": hist.encode(),
    }


def _query_loop(args: ClientArgs, shared: Shared, backend) -> dict:
    spec = args.spec
    source = RowSource(spec.seed + 7919, args.number, 0)  # its own stream, apart from inserters
    hist = new_histogram()
    deadline = _deadline(spec, shared.t0.value)
    cpu0 = _cpu_s(args.own_process)
    queries = rows_read = 0
    while not shared.stop.is_set() and time.monotonic() < deadline:
        start = time.perf_counter()
        rows_read += backend.query(source.query_price())
        record_us(hist, (time.perf_counter() - start) * 1e6)
        queries += 1
    return {
        "queries": queries,
        "rows_read": rows_read,
        "end": time.monotonic(),
        "cpu_s": _cpu_s(args.own_process) - cpu0,
        "histogram": hist.encode(),
    }
