"""Running one iibench level: start the clients, keep time, report intervals, merge the results.

Clients are separate processes (multiprocessing "spawn": a fresh interpreter, nothing inherited
from the runner's threads or open connections), so N clients use N cores' worth of Python instead
of serialising on one GIL. Each binds its life to the runner (PR_SET_PDEATHSIG) and sits in its
own process group. The runner starts every clock only once all clients have connected, so client
start-up (interpreter, driver import) is not counted as insert time.

The same loop can run the clients as threads of this process: that is the single-process baseline
the bench compares against, not a mode for measurements.

What the level's figures mean (LevelResult, and so results.csv for workload=iibench):
- events = rows (documents) inserted; threads = insert clients;
- qps = rows inserted per second: the insert rate, iibench's headline figure;
- tps = insert batches per second: one batch is one multi-row INSERT in autocommit (one
  transaction) or one ordered insert_many, so this is transactions per second;
- latencies are per batch. Per-row costs are the runner's per-op figures, where an op is a row:
  CPU seconds per 1M rows (cpu_s_per_1m_ops, numerically cpu_us_per_op) and context switches per
  1M rows (ctxsw_per_1m_ops). They are not divided by `events`: the runner takes the server's CPU
  and context switches over the collectors' measured window between two interval reports, and
  the rows inserted in that same window from the interval rates (rundir.derive.window.window_rates).
Query clients (optional) run only while the inserts do; their rate is over their own run time.

The interval reports (on_interval) bracket exactly the insert load, so that the runner's measured
window between two reports can cover all of it: the first report is at t=0, when the clock starts
(every client connected, nothing inserted yet, rates 0); the last one, the final partial interval,
comes when the last insert has returned and before any client disconnects (clients wait for
`stop`, which is set only after that report). Start-up and teardown stay outside.
"""

from __future__ import annotations

import importlib.util
import json
import multiprocessing
import os
import queue
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from servers import interrupts
from suites.iibench.client import INSERT, QUERY, ClientArgs, Shared, client_main
from suites.iibench.latency import merge, summary_ms
from suites.iibench.spec import IIBenchSpec
from suites.workload import ClientTarget, IntervalCallback, LevelResult

PROCESSES = "processes"
THREADS = "threads"

# After `stop`, a client finishes its batch in flight; a batch slower than this means a hung server.
_STOP_GRACE_S = 60.0
# A client process that exited is given this long for its last message to arrive through the queue.
_MESSAGE_GRACE_S = 5.0


@contextmanager
def _children_skip_parent_main() -> Iterator[None]:
    """Keep "spawn" from re-running the runner's main script in every client.

    multiprocessing's spawn children first re-execute the parent's __main__ (by path when it is a
    script), which only works if that script guards its top level with `if __name__ ==
    "__main__"`: an unguarded caller would start a whole run again in each client. The clients need
    nothing from __main__, so while they are started, __main__ names this package's client module
    instead: an empty module (suites.iibench.child_main). Only Process.start() reads it.
    """
    main = sys.modules["__main__"]
    had = hasattr(main, "__spec__")
    saved = getattr(main, "__spec__", None)
    main.__spec__ = importlib.util.find_spec("suites.iibench.child_main")
    try:
        yield
    finally:
        if had:
            main.__spec__ = saved
        else:
            del main.__spec__


class _Log:
    """The level's raw output: one JSON object per line (start, intervals, clients, summary)."""

    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self._f = open(path, "a", encoding="utf-8")

    def write(self, event: str, **fields) -> None:
        self._f.write(json.dumps({"event": event, **fields}) + "\n")
        self._f.flush()

    def close(self) -> None:
        self._f.close()


class _Level:
    """State of one running level, driven by run_level()."""

    def __init__(self, target: ClientTarget, spec: IIBenchSpec, mode: str, log: _Log):
        self.spec = spec
        self.mode = mode
        self.log = log
        ctx = multiprocessing.get_context("spawn")
        self.shared = Shared.create(ctx, spec.clients)
        roles = [(INSERT, i) for i in range(spec.clients)]
        roles += [(QUERY, i) for i in range(spec.query_clients)]
        self.workers: dict[tuple[str, int], object] = {}
        for role, n in roles:
            args = ClientArgs(role, n, target, spec, os.getpid(), own_process=mode == PROCESSES)
            if mode == PROCESSES:
                w = ctx.Process(
                    target=client_main, args=(args, self.shared), name=f"iibench-{role}-{n}"
                )
            else:
                w = threading.Thread(
                    target=client_main,
                    args=(args, self.shared),
                    name=f"iibench-{role}-{n}",
                    daemon=True,
                )
            self.workers[(role, n)] = w
        self.ready: set[tuple[str, int]] = set()
        self.done: dict[tuple[str, int], dict] = {}
        self.failures: list[str] = []
        self.intervals: list[dict] = []
        self.t0 = 0.0

    # -- messages ----------------------------------------------------------------------------
    def _take(self, timeout: float) -> bool:
        """Handle one client message if one arrives within `timeout`; False when none did."""
        try:
            kind, role, n, payload = self.shared.results.get(timeout=max(0.0, timeout))
        except queue.Empty:
            return False
        if kind == "ready":
            self.ready.add((role, n))
        elif kind == "done":
            self.done[(role, n)] = payload
        else:
            self.failures.append(f"{role} client {n}: {payload}")
            self.done[(role, n)] = {}
        return True

    def _check_exits(self) -> None:
        """A client process that ended without its final message crashed: say how."""
        if self.mode != PROCESSES:
            return
        for key, w in self.workers.items():
            if key in self.done or w.exitcode is None:
                continue
            deadline = time.monotonic() + _MESSAGE_GRACE_S
            while key not in self.done and time.monotonic() < deadline:
                self._take(deadline - time.monotonic())
            if key not in self.done:
                self.failures.append(f"{key[0]} client {key[1]} exited with code {w.exitcode}")
                self.done[key] = {}

    # -- phases --------------------------------------------------------------------------------
    def start(self) -> float:
        """Start every client and wait until all are connected; seconds that took."""
        t = time.monotonic()
        with _children_skip_parent_main():
            for w in self.workers.values():
                w.start()
        deadline = t + self.spec.startup_timeout_s
        while len(self.ready) < len(self.workers) and not self.failures:
            if time.monotonic() >= deadline:
                self.failures.append(
                    f"only {len(self.ready)} of {len(self.workers)} clients connected within "
                    f"startup_timeout_s={self.spec.startup_timeout_s:g}"
                )
                break
            self._take(min(0.5, deadline - time.monotonic()))
            self._check_exits()
            interrupts.check()  # safe point: finish() stops and reaps the clients
        return time.monotonic() - t

    def run(self, on_interval: IntervalCallback | None) -> None:
        spec, shared = self.spec, self.shared
        self.t0 = time.monotonic()
        shared.t0.value = self.t0
        shared.go.set()
        if on_interval is not None:
            on_interval(0.0, 0.0, 0.0)  # the window's start: all connected, clock running
        inserters = [(INSERT, i) for i in range(spec.clients)]
        last_t, last_rows, last_batches = self.t0, 0, 0
        last_progress = self.t0
        next_tick = self.t0 + spec.report_interval_s
        deadline = self.t0 + spec.max_seconds if spec.max_seconds else float("inf")
        while not all(k in self.done for k in inserters):
            self._take(min(next_tick, deadline + _STOP_GRACE_S) - time.monotonic())
            self._check_exits()
            interrupts.check()  # safe point (at least once per report interval)
            now = time.monotonic()
            if self.failures and not shared.stop.is_set():
                shared.stop.set()  # one failed client fails the level: stop the others now
            if now >= deadline and not shared.stop.is_set():
                shared.stop.set()
            if now >= deadline + _STOP_GRACE_S:
                self.failures.append(
                    f"clients did not stop within {_STOP_GRACE_S:g}s after max_seconds"
                )
                return
            if now >= next_tick:
                rows, batches = sum(shared.rows), sum(shared.batches)
                if rows != last_rows:
                    last_progress = now
                elif now - last_progress > spec.stall_timeout_s:
                    self.failures.append(
                        f"no row inserted for {spec.stall_timeout_s:g}s (stall_timeout_s): "
                        "the server stopped accepting inserts"
                    )
                    return
                self._interval(
                    now, rows - last_rows, batches - last_batches, now - last_t, rows, on_interval
                )
                last_t, last_rows, last_batches = now, rows, batches
                next_tick += spec.report_interval_s * max(
                    1, int((now - next_tick) / spec.report_interval_s) + 1
                )
        # The last, partial interval: every row is in exactly one interval.
        ends = [self.done[k].get("end", 0.0) for k in inserters]
        end = max([e for e in ends if e] or [time.monotonic()])
        rows, batches = sum(shared.rows), sum(shared.batches)
        if rows != last_rows or batches != last_batches or not self.intervals:
            self._interval(
                max(end, last_t),
                rows - last_rows,
                batches - last_batches,
                max(end, last_t) - last_t,
                rows,
                on_interval,
            )
        self.end = end
        # Only now: clients disconnect, and query clients stop (queries run against a table that
        # is still growing, as the load intends, not after it).
        shared.stop.set()

    def _interval(self, now, rows, batches, dt, total, on_interval) -> None:
        t_s = now - self.t0
        rec = {
            "t_s": round(t_s, 3),
            "interval_s": round(dt, 3),
            "rows": rows,
            "batches": batches,
            "rows_per_s": round(rows / dt, 1) if dt > 0 else 0.0,
            "batches_per_s": round(batches / dt, 2) if dt > 0 else 0.0,
            "cum_rows_per_s": round(total / t_s, 1) if t_s > 0 else 0.0,
        }
        self.intervals.append(rec)
        self.log.write("interval", **rec)
        if on_interval is not None:
            on_interval(rec["t_s"], rec["batches_per_s"], rec["rows_per_s"])

    def finish(self) -> None:
        """Stop and reap every client, whatever happened."""
        self.shared.stop.set()
        self.shared.go.set()  # a client still waiting to start returns at once (stop is set)
        if not all(k in self.done for k in self.workers):
            deadline = time.monotonic() + _STOP_GRACE_S
            while not all(k in self.done for k in self.workers) and time.monotonic() < deadline:
                if not self._take(min(0.5, deadline - time.monotonic())):
                    self._check_exits()
        for w in self.workers.values():
            w.join(timeout=10)
            if self.mode == PROCESSES and w.is_alive():
                w.kill()  # our own child, by pid: a client stuck in a driver call
                w.join(timeout=10)
        if self.mode == PROCESSES:
            self.shared.results.close()
            self.shared.results.join_thread()


def run_level(
    target: ClientTarget,
    spec: IIBenchSpec,
    log_path: Path,
    on_interval: IntervalCallback | None = None,
    *,
    mode: str = PROCESSES,
) -> LevelResult:
    """Run one insert level and return its figures.

    LevelResult: events = rows inserted, qps = rows inserted/s, tps = insert batches
    (transactions)/s, latencies are per batch (merged over all insert clients); see the module
    docstring. on_interval(t_s, batches/s, rows/s) is called at t=0, once per report interval and
    for the final partial one (the interval row counts in `intervals` add up to `events`).
    A failed client stops the level and marks it "failed" with the reason; figures so far remain.
    """
    if mode not in (PROCESSES, THREADS):
        raise ValueError(f"mode must be {PROCESSES!r} or {THREADS!r}")
    log = _Log(Path(log_path))
    log.write(
        "start",
        mode=mode,
        target={"kind": target.kind, "database": target.database},
        spec={k: getattr(spec, k) for k in spec.__dataclass_fields__},
    )
    level = _Level(target, spec, mode, log)
    startup_s = 0.0
    try:
        startup_s = level.start()
        if not level.failures:
            level.run(on_interval)
    finally:
        with interrupts.held(), interrupts.doing("the iibench clients to stop"):
            level.finish()
        result = _result(level, spec, mode, startup_s, Path(log_path))
        log.write(
            "summary",
            **{k: v for k, v in result.row().items()},
            status=result.status,
            error=result.error,
            extra={k: v for k, v in result.extra.items()},
        )
        log.close()
    return result


def _result(level: _Level, spec: IIBenchSpec, mode: str, startup_s: float, log: Path):
    shared = level.shared
    rows, batches = sum(shared.rows), sum(shared.batches)
    end = getattr(level, "end", None) or (time.monotonic() if level.t0 else 0.0)
    duration = max(0.0, end - level.t0) if level.t0 else 0.0
    inserts = [level.done.get((INSERT, i), {}) for i in range(spec.clients)]
    queries = [level.done.get((QUERY, i), {}) for i in range(spec.query_clients)]
    hist = merge([c.get("histogram", b"") for c in inserts])
    per_client = []
    for i, c in enumerate(inserts):
        n = c.get("rows", shared.rows[i])
        per_client.append(
            {
                "client": i,
                "rows": n,
                "batches": c.get("batches", shared.batches[i]),
                "rows_per_s": round(n / duration, 1) if duration else 0.0,
                "cpu_s": round(c.get("cpu_s", 0.0), 3),
            }
        )
    client_cpu = sum(c.get("cpu_s", 0.0) for c in inserts + queries)
    extra = {
        "rows": rows,
        "duration_s": round(duration, 3),
        "per_client": per_client,
        "client_cpu_s": round(client_cpu, 3),
        "client_mode": mode,
        "startup_s": round(startup_s, 3),
        "batch_rows": spec.batch_rows,
        "secondary_indexes": spec.secondary_indexes,
        "latency_unit": "one insert batch",
    }
    if spec.query_clients:
        qhist = merge([c.get("histogram", b"") for c in queries])
        nq = sum(c.get("queries", 0) for c in queries)
        # Over the query clients' own time (from go to the last one's end), not the inserts'.
        q_ends = [c["end"] for c in queries if c.get("end")]
        q_duration = max(0.0, max(q_ends) - level.t0) if q_ends and level.t0 else 0.0
        extra["query"] = {
            "clients": spec.query_clients,
            "queries": nq,
            "duration_s": round(q_duration, 3),
            "queries_per_s": round(nq / q_duration, 1) if q_duration else 0.0,
            **summary_ms(qhist),
        }
    return LevelResult(
        workload="iibench",
        threads=spec.clients,
        status="failed" if level.failures else "ok",
        error="; ".join(level.failures[:3]) or None,
        duration_s=round(duration, 3),
        events=rows,
        tps=round(batches / duration, 2) if duration else 0.0,
        qps=round(rows / duration, 1) if duration else 0.0,
        errors=len(level.failures),
        intervals=level.intervals,
        raw_log=log,
        extra=extra,
        **summary_ms(hist),
    )
