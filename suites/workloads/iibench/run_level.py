"""Running one iibench level: start the clients, keep time, report intervals, merge the results.

Clients are separate processes (`python -m suites.workloads.client_procs suites.workloads.iibench.client ...`, started
through the exec helper: a fresh interpreter, nothing inherited from the runner's threads or open
connections), so N clients use N cores' worth of Python instead of serialising on one GIL. Each
dies with the runner (parent-death signal) and sits in its own process group. The runner starts
every clock only once all clients have connected, so client start-up (interpreter, driver import)
is not counted as insert time.

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

import json
import time
from pathlib import Path

from rundir.records import IIBenchLevel, IIBenchQuery
from servers import interrupts
from suites.workloads.client_procs import ClientSet
from suites.workloads.iibench import client
from suites.workloads.iibench.client import INSERT, QUERY
from suites.workloads.iibench.latency import merge, summary_ms
from suites.workloads.iibench.spec import IIBenchSpec
from suites.workloads.level_result import ClientTarget, IntervalCallback, LevelResult

PROCESSES = "processes"
THREADS = "threads"

# After `stop`, a client finishes its batch in flight; a batch slower than this means a hung server.
_STOP_GRACE_S = 60.0


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

    def __init__(self, target: ClientTarget, spec: IIBenchSpec, mode: str, log: _Log, path: Path):
        self.spec = spec
        self.mode = mode
        self.log = log
        roles = [(INSERT, i) for i in range(spec.clients)]
        roles += [(QUERY, i) for i in range(spec.query_clients)]
        self.clients = ClientSet(
            module="suites.workloads.iibench.client",
            work=client.work(target, spec),
            roles=roles,
            slots=client.slots(spec),
            cwd=path.parent,
            stderr=path.with_name(path.name + ".clients.stderr"),
            threads=client.client_main if mode == THREADS else None,
        )
        self.done = self.clients.done
        self.failures = self.clients.failures
        self.intervals: list[dict] = []
        self.t0 = 0.0

    def _counts(self) -> tuple[int, int]:
        """(rows, batches) inserted so far, over every insert client."""
        n, slots = self.spec.clients, self.clients.counts()
        return sum(slots[:n]), sum(slots[n : 2 * n])

    # -- phases --------------------------------------------------------------------------------
    def start(self) -> float:
        """Start every client and wait until all are connected; seconds that took."""
        t = time.monotonic()
        self.clients.start()
        self.clients.wait_ready(
            self.spec.startup_timeout_s, f"startup_timeout_s={self.spec.startup_timeout_s:g}"
        )
        return time.monotonic() - t

    def run(self, on_interval: IntervalCallback | None) -> None:
        spec, clients = self.spec, self.clients
        self.t0 = time.monotonic()
        clients.go(self.t0)
        if on_interval is not None:
            on_interval(0.0, 0.0, 0.0)  # the window's start: all connected, clock running
        inserters = [(INSERT, i) for i in range(spec.clients)]
        last_t, last_rows, last_batches = self.t0, 0, 0
        last_progress = self.t0
        next_tick = self.t0 + spec.report_interval_s
        deadline = self.t0 + spec.max_seconds if spec.max_seconds else float("inf")
        while not clients.finished(inserters):
            clients.take(min(next_tick, deadline + _STOP_GRACE_S) - time.monotonic())
            interrupts.check()  # safe point (at least once per report interval)
            now = time.monotonic()
            if self.failures and not clients.stopping:
                clients.stop()  # one failed client fails the level: stop the others now
            if now >= deadline and not clients.stopping:
                clients.stop()
            if now >= deadline + _STOP_GRACE_S:
                self.failures.append(
                    f"clients did not stop within {_STOP_GRACE_S:g}s after max_seconds"
                )
                return
            if now >= next_tick:
                rows, batches = self._counts()
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
        rows, batches = self._counts()
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
        clients.stop()

    def _interval(self, now, rows, batches, dt, total, on_interval) -> None:
        t_s = now - self.t0
        rec = {
            "t_s": round(t_s, 3),
            # to the microsecond: the last interval can be a sliver (the clients' last commits
            # just after a report), and rows_per_s x interval_s must still give its rows back
            # (rounded to the millisecond, a 0.4 ms sliver of 500 rows read as 0 s).
            "interval_s": round(dt, 6),
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
        """Stop and reap every client, whatever happened; the figures stay readable."""
        try:
            self.clients.finish(_STOP_GRACE_S)
        finally:
            self._final_counts()

    def _final_counts(self) -> None:
        n, slots = self.spec.clients, self.clients.counts()
        self.per_client_rows, self.per_client_batches = slots[:n], slots[n : 2 * n]
        self.rows, self.batches = sum(self.per_client_rows), sum(self.per_client_batches)
        self.client_life_cpu_s = self.clients.life_cpu_s()


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
        target={"kind": target.protocol, "database": target.database},
        spec={k: getattr(spec, k) for k in spec.__dataclass_fields__},
    )
    level = _Level(target, spec, mode, log, Path(log_path))
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
            extra=result.records(),
        )
        log.close()
    return result


def _result(level: _Level, spec: IIBenchSpec, mode: str, startup_s: float, log: Path):
    rows, batches = level.rows, level.batches
    end = getattr(level, "end", None) or (time.monotonic() if level.t0 else 0.0)
    duration = max(0.0, end - level.t0) if level.t0 else 0.0
    inserts = [level.done.get((INSERT, i), {}) for i in range(spec.clients)]
    queries = [level.done.get((QUERY, i), {}) for i in range(spec.query_clients)]
    hist = merge([c.get("histogram", b"") for c in inserts])
    per_client = []
    for i, c in enumerate(inserts):
        n = c.get("rows", level.per_client_rows[i])
        per_client.append(
            {
                "client": i,
                "rows": n,
                "batches": c.get("batches", level.per_client_batches[i]),
                "rows_per_s": round(n / duration, 1) if duration else 0.0,
                "cpu_s": round(c.get("cpu_s", 0.0), 3),
            }
        )
    client_cpu = sum(c.get("cpu_s", 0.0) for c in inserts + queries)
    record = IIBenchLevel(
        rows=rows,
        duration_s=round(duration, 3),
        per_client=per_client,
        client_cpu_s=round(client_cpu, 3),
        # Whole lives of the client processes (wait4: start-up, connect, load, disconnect).
        client_life_cpu_s=level.client_life_cpu_s,
        client_mode=mode,
        startup_s=round(startup_s, 3),
        batch_rows=spec.batch_rows,
        secondary_indexes=spec.secondary_indexes,
        latency_unit="one insert batch",
    )
    if spec.query_clients:
        qhist = merge([c.get("histogram", b"") for c in queries])
        nq = sum(c.get("queries", 0) for c in queries)
        # Over the query clients' own time (from go to the last one's end), not the inserts'.
        q_ends = [c["end"] for c in queries if c.get("end")]
        q_duration = max(0.0, max(q_ends) - level.t0) if q_ends and level.t0 else 0.0
        record.query = IIBenchQuery(
            clients=spec.query_clients,
            queries=nq,
            duration_s=round(q_duration, 3),
            queries_per_s=round(nq / q_duration, 1) if q_duration else 0.0,
            **summary_ms(qhist),
        )
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
        iibench=record,
        **summary_ms(hist),
    )
