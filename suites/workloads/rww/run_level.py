"""Running one read-while-writing level (the load, or the mixed run) and merging its figures.

Clients are separate processes (`python -m suites.workloads.client_procs suites.workloads.rww.client ...`, started through
the exec helper, dying with the runner), as for iibench. The runner
starts the clock once every client has connected; the interval reports bracket exactly the
operations: t=0 at `go`, then one per report interval, then a final partial one when the
finishing clients (the loader; every reader) are done, before anyone disconnects.

What a level's figures mean (LevelResult and the rww columns of results.csv):
- load (workload rww_load, threads 1): events = rows inserted, qps = rows/s (the study's "Fill
  ops/sec"), tps = batches/s, latencies per batch (one multi-row INSERT); write_ops_s = rows/s.
- run (workload rww_run, threads = readers + 1 writer): events = reads + writes, qps = their
  rate, tps = writes/s; write_ops_s and read_ops_s apart (the study's "Write" and "Read"), each
  over the level's duration; write_lat_* and read_lat_* per statement, apart; table_rows and
  reads_min (the fewest rows one reader read: the stop rule is reads_min >= table_rows). A level
  cut by max_seconds before the stop rule is met is failed, with the reason.
The runner's per-op figures (CPU, context switches) count an op as a row (load) or a statement
(run), over the measured window between interval reports.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from rundir.records import RwwFigures, RwwLevel
from servers import interrupts
from suites.workloads.client_procs import ClientSet
from suites.workloads.iibench.latency import merge, summary_ms
from suites.workloads.level_result import ClientTarget, IntervalCallback, LevelResult
from suites.workloads.rww import client
from suites.workloads.rww.client import LOADER, READER, WRITER
from suites.workloads.rww.spec import RwwSpec

LOAD = "load"
RUN = "run"
WORKLOAD = {LOAD: "rww_load", RUN: "rww_run"}
_STOP_GRACE_S = 60.0


class _Level:
    def __init__(self, target: ClientTarget, spec: RwwSpec, phase: str, log, path: Path):
        self.spec, self.phase, self.log = spec, phase, log
        if phase == LOAD:
            self.roles = [(LOADER, 0)]
        else:
            self.roles = [(WRITER, 0)] + [(READER, i) for i in range(1, spec.readers + 1)]
        # The clients whose end ends the level: the loader; every reader (the writer runs on).
        self.finishing = [k for k in self.roles if k[0] != WRITER]
        # One slot per client: its number (rows for the loader, statements in the run).
        self.clients = ClientSet(
            module="suites.workloads.rww.client",
            work=client.work(target, spec),
            roles=self.roles,
            slots=len(self.roles),
            cwd=path.parent,
            stderr=path.with_name(path.name + ".clients.stderr"),
            label=lambda role, n: f"{role} {n}",
        )
        self.done = self.clients.done
        self.failures = self.clients.failures
        self.intervals: list[dict] = []
        self.t0 = 0.0
        self.end = 0.0
        self.capped = False

    def start(self) -> None:
        self.clients.start()
        self.clients.wait_ready(
            self.spec.startup_timeout_s, f"startup_timeout_s={self.spec.startup_timeout_s:g}"
        )

    def _counts(self) -> tuple[int, int]:
        """(writes, reads) so far: rows for the loader, statements in the run."""
        ops = self.clients.counts()
        if self.phase == LOAD:
            return ops[0], 0
        return ops[0], sum(ops[1:])

    def run(self, on_interval: IntervalCallback | None) -> None:
        spec, clients = self.spec, self.clients
        cap = spec.load_max_seconds if self.phase == LOAD else spec.max_seconds
        self.t0 = time.monotonic()
        clients.go(self.t0)
        if on_interval is not None:
            on_interval(0.0, 0.0, 0.0)
        last_t, last = self.t0, (0, 0)
        next_tick = self.t0 + spec.report_interval_s
        deadline = self.t0 + cap
        while not clients.finished(self.finishing):
            clients.take(min(next_tick, deadline + _STOP_GRACE_S) - time.monotonic())
            interrupts.check()  # safe point (at least once per report interval)
            now = time.monotonic()
            if self.failures and not clients.stopping:
                clients.stop()
            if now >= deadline and not clients.stopping:
                self.capped = True
                clients.stop()
            if now >= deadline + _STOP_GRACE_S:
                self.failures.append(f"clients did not stop within {_STOP_GRACE_S:g}s of the cap")
                return
            if now >= next_tick:
                counts = self._counts()
                self._interval(now, now - last_t, counts, last, on_interval)
                last_t, last = now, counts
                while next_tick <= now:
                    next_tick += spec.report_interval_s
        ends = [self.done[k].get("end", 0.0) for k in self.finishing]
        end = max([e for e in ends if e] or [time.monotonic()])
        counts = self._counts()
        if counts != last or not self.intervals:
            t = max(end, last_t)
            self._interval(t, t - last_t, counts, last, on_interval)
        self.end = end
        clients.stop()  # only now: the writer stops and everyone disconnects

    def _interval(self, now, dt, counts, last, on_interval) -> None:
        w, r = counts[0] - last[0], counts[1] - last[1]
        rec = {
            "t_s": round(now - self.t0, 3),
            "interval_s": round(dt, 6),  # a last sliver's ops x rate hold (as iibench's)
            "writes": w,
            "reads": r,
            "write_ops_s": round(w / dt, 1) if dt > 0 else 0.0,
            "read_ops_s": round(r / dt, 1) if dt > 0 else 0.0,
        }
        self.intervals.append(rec)
        self.log.write(json.dumps({"event": "interval", **rec}) + "\n")
        if on_interval is not None:
            # tps = writes/s, qps = every operation/s (the per-op unit of the measured window)
            on_interval(rec["t_s"], rec["write_ops_s"], rec["write_ops_s"] + rec["read_ops_s"])

    def finish(self) -> None:
        with interrupts.held(), interrupts.doing("the read-while-writing clients to stop"):
            self._finish()

    def _finish(self) -> None:
        self.clients.finish(_STOP_GRACE_S)


def run_level(
    target: ClientTarget,
    spec: RwwSpec,
    phase: str,
    log_path: Path,
    on_interval: IntervalCallback | None = None,
) -> LevelResult:
    """Run the load (phase LOAD) or the read-while-writing level (RUN); see the module docstring."""
    Path(log_path).parent.mkdir(parents=True, exist_ok=True)
    # Line-buffered: each event reaches the file as it happens (a runner killed mid-level leaves
    # the level's raw log up to that moment, and the progress can be followed from outside).
    with open(log_path, "a", encoding="utf-8", buffering=1) as log:
        log.write(json.dumps({"event": "start", "phase": phase, "spec": spec.__dict__}) + "\n")
        level = _Level(target, spec, phase, log, Path(log_path))
        try:
            level.start()
            if not level.failures:
                level.run(on_interval)
        finally:
            level.finish()
        result = _result(level, Path(log_path))
        log.write(
            json.dumps(
                {
                    "event": "summary",
                    **result.row(),
                    "status": result.status,
                    "error": result.error,
                    "extra": result.records(),
                },
                default=str,
            )
            + "\n"
        )
    return result


def _lat(prefix: str, hist) -> dict:
    s = summary_ms(hist)
    return {f"{prefix}_lat_{q}_ms": s[f"lat_{q}_ms"] for q in ("p50", "p95", "p99", "max")}


def _result(level: _Level, path: Path) -> LevelResult:
    spec = level.spec
    duration = max(0.0, level.end - level.t0) if level.t0 and level.end else 0.0
    writes, reads = level._counts()
    wfig = level.done.get(level.roles[0], {})
    whist = merge([wfig.get("histogram", b"")])
    rfigs = [level.done.get(k, {}) for k in level.roles if k[0] == READER]
    rhist = merge([f.get("histogram", b"") for f in rfigs])
    failures = list(level.failures)
    ops = level.clients.counts()
    per_reader = [ops[n] for role, n in level.roles if role == READER]
    reads_min = min(per_reader) if per_reader else None
    if level.phase == LOAD and writes < spec.records and not failures:
        failures.append(
            f"the load inserted {writes} of {spec.records} rows within load_max_seconds "
            f"({spec.load_max_seconds:g} s)"
        )
    if level.phase == RUN and reads_min is not None and reads_min < spec.records and not failures:
        failures.append(
            f"stop rule not met: a reader read {reads_min} of {spec.records} rows within "
            f"max_seconds ({spec.max_seconds:g} s)"
        )
    total = writes + reads
    both = merge([wfig.get("histogram", b"")] + [f.get("histogram", b"") for f in rfigs])
    figures = RwwFigures(
        write_ops_s=round(writes / duration, 1) if duration else 0.0,
        read_ops_s=round(reads / duration, 1) if duration and level.phase == RUN else None,
        table_rows=spec.records,
        reads_min=reads_min,
        **_lat("write", whist),
        **(_lat("read", rhist) if level.phase == RUN else {}),
    )
    record = RwwLevel(
        figures=figures,
        engine=spec.engine,
        client_cpu_s=round(sum(f.get("cpu_s", 0.0) for f in [wfig, *rfigs]), 3),
        # Whole lives of the client processes (wait4: start-up, connect, load, disconnect).
        client_life_cpu_s=level.clients.life_cpu_s(),
        per_reader_reads=per_reader,
        misses=sum(f.get("misses", 0) for f in rfigs),
        capped=level.capped,
        latency_unit="one INSERT batch" if level.phase == LOAD else "one statement",
    )
    return LevelResult(
        workload=WORKLOAD[level.phase],
        threads=len(level.roles),
        status="failed" if failures else "ok",
        error="; ".join(failures[:3]) or None,
        duration_s=round(duration, 3),
        events=total,
        tps=round((wfig.get("batches", writes) if level.phase == LOAD else writes) / duration, 2)
        if duration
        else 0.0,
        qps=round(total / duration, 1) if duration else 0.0,
        errors=len(failures),
        intervals=level.intervals,
        raw_log=path,
        rww=record,
        **summary_ms(both),
    )
