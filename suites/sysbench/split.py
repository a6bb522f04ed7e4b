"""One sysbench level split over several client hosts, and its figures combined truly.

Each host runs its share of the threads (suites.remote.hosts.split_threads), all started by one
go once every host is ready (suites.remote.hosts), over its own ssh into its own log and records file (<phase>.<host>.log / .jsonl); the level's
log names them. The level's figures are combined from the hosts' records, never from their
rounded results:
- rates: each host's rate over the common window (the interval reports every host wrote: the
  hosts started together, so interval k spans the same seconds on each), summed;
- latency percentiles: from the hosts' histograms merged bucket by bucket (sysbench's buckets
  are the same on every host), never an average of percentiles; the average weighted by each
  host's events; the maximum the largest;
- events, errors and reconnects: summed;
- the timeline: interval k of every host summed, handed to the collectors once all hosts
  wrote it (their window marks need one clock: ours, as for one host).
Each host's own figures stay in the level's record (extra["client_hosts"]).
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from servers import interrupts
from suites.errors import SuiteError
from suites.remote.hosts import split_threads
from suites.sysbench.histogram import LatencyHistogram
from suites.sysbench.options import SysbenchOptions, level_argv, stock_script, whole_seconds
from suites.sysbench.records import (
    PERCENTILES,
    LevelRecords,
    level_result,
    parse_line,
    read_records,
)
from suites.sysbench.runner import (
    _ENV,
    POLL_S,
    THREAD_INIT_TIMEOUT_S,
    WRAPPER,
    _failure_reason,
    _masked,
    _RecordFollower,
    default_timeout,
    records_path,
)
from suites.workload import ClientTarget, LevelResult


def host_log(log_path: Path, host: str) -> Path:
    """Where one host's share of the level logs (its records file beside it)."""
    return log_path.with_name(f"{log_path.stem}.{host}{log_path.suffix}")


def _rate(intervals: list[dict], key) -> float:
    seconds = sum(float(r.get("time_interval") or 0) for r in intervals)
    return sum(key(r) for r in intervals) / seconds if seconds else 0.0


def _queries(r: dict) -> float:
    return sum(float(r.get(k, 0)) for k in ("reads", "writes", "other"))


def combined_interval(recs: list[dict]) -> dict:
    """Interval k of every host as one: counts summed, time the longest host's. sysbench's one
    per-interval percentile cannot be combined; it is left out (the level's come from the
    merged histogram)."""
    out = {
        "type": "interval",
        "time_total": max(float(r.get("time_total", 0)) for r in recs),
        "time_interval": max(float(r.get("time_interval") or 0) for r in recs),
    }
    for k in ("events", "reads", "writes", "other", "errors", "reconnects", "threads_running"):
        out[k] = sum(float(r.get(k, 0)) for r in recs)
    return out


def merge_histograms(hists: list[LatencyHistogram]) -> LatencyHistogram:
    first = hists[0]
    geometry = (first.array_size, first.range_min, first.range_max)
    counts: dict[int, int] = {}
    for h in hists:
        if (h.array_size, h.range_min, h.range_max) != geometry:
            raise SuiteError("client hosts' sysbench histograms differ in their buckets")
        for i, c in h.counts.items():
            counts[i] = counts.get(i, 0) + c
    return LatencyHistogram(counts, *geometry)


def combine(
    workload: str, threads: int, hosts: list[str], recs: list[LevelRecords],
    parts: list[LevelResult], log_path: Path,
) -> LevelResult:  # fmt: skip
    """The level's LevelResult from each host's records and its own result."""
    res = LevelResult(workload=workload, threads=threads, raw_log=log_path)
    failed = [(h, p) for h, p in zip(hosts, parts, strict=True) if p.status != "ok"]
    res.events = sum(p.events for p in parts)
    res.errors = sum(p.errors for p in parts)
    res.reconnects = sum(p.reconnects for p in parts)
    common = min(len(r.intervals) for r in recs)
    res.intervals = [
        _timeline(combined_interval([r.intervals[k] for r in recs])) for k in range(common)
    ]
    window = {"common_intervals": common}
    if common:
        tps = [_rate(r.intervals[:common], lambda x: float(x.get("events", 0))) for r in recs]
        qps = [_rate(r.intervals[:common], _queries) for r in recs]
        res.tps, res.qps = sum(tps), sum(qps)
        res.duration_s = round(
            min(
                sum(float(x.get("time_interval") or 0) for x in r.intervals[:common]) for r in recs
            ),
            3,
        )
        window["seconds"] = res.duration_s
    else:  # no interval every host wrote: each host's whole-level rate, summed
        res.tps = sum(p.tps for p in parts)
        res.qps = sum(p.qps for p in parts)
        res.duration_s = max(p.duration_s for p in parts)
        window["seconds"] = None
    if failed:
        res.status = "failed"
        res.error = "; ".join(f"client host {h}: {p.error}" for h, p in failed)
        return res
    hists = [r.histogram for r in recs]
    if all(h is not None and h.total > 0 for h in hists):
        merged = merge_histograms(hists)
        lat_max = max(p.lat_max_ms for p in parts if p.lat_max_ms is not None)
        mins = [p.extra.get("lat_min_ms") for p in parts if p.extra.get("lat_min_ms") is not None]
        for attr, pct in PERCENTILES.items():
            v = min(merged.percentile(pct), lat_max)
            setattr(res, attr, max(v, min(mins)) if mins else v)
        res.extra["latency_histogram"] = {
            "array_size": merged.array_size,
            "range_min_ms": merged.range_min,
            "range_max_ms": merged.range_max,
            "buckets": [[i, c] for i, c in sorted(merged.counts.items())],
        }
        res.lat_max_ms = lat_max
        res.extra["lat_min_ms"] = min(mins) if mins else None
    else:
        res.extra["problems"] = ["a client host recorded no latency histogram; percentiles empty"]
    timed = [p for p in parts if p.lat_avg_ms is not None and p.events]
    if timed:
        res.lat_avg_ms = sum(p.lat_avg_ms * p.events for p in timed) / sum(p.events for p in timed)
    res.extra["common_window"] = window
    return res


def _timeline(rec: dict) -> dict:
    dt = float(rec.get("time_interval") or 0) or 1.0
    return {
        "t_s": round(float(rec["time_total"]), 3),
        "tps": rec["events"] / dt,
        "qps": _queries(rec) / dt,
        "errors": int(rec["errors"]),
        "reconnects": int(rec["reconnects"]),
        "threads_running": int(rec["threads_running"]),
    }


def _host_record(host: str, share: int, part: LevelResult, start: dict | None, log: Path,
                 exit_info, offset: float) -> dict:  # fmt: skip
    return {
        "host": host,
        "threads": share,
        "status": part.status,
        "error": part.error,
        "events": part.events,
        "duration_s": part.duration_s,
        "tps": part.tps,
        "qps": part.qps,
        "errors": part.errors,
        "reconnects": part.reconnects,
        **{k: getattr(part, k) for k in ("lat_avg_ms", *PERCENTILES, "lat_max_ms")},
        "log": str(log),
        "records": str(records_path(log)),
        # its clock when sysbench started, put on ours (minus the offset measured at open)
        "started_at": None if start is None else round(start["t_ns"] / 1e9 - offset, 6),
        "exit": exit_info.to_manifest() if exit_info else None,
    }


def _start_record(path: Path) -> dict | None:
    """The "start" record a host's shell wrote (suites.remote.clients), or None."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return None
    found = (r for r in (parse_line(ln) for ln in lines) if r and r["type"] == "start")
    return next((r for r in found if isinstance(r.get("t_ns"), int)), None)


def _spawn_gated(ssh_argv: list[str], log: Path, rec: Path, cwd: Path, go_fd: int):
    """ssh for one host, its stdin the read end of that host's go pipe (spawn's own stdin is its
    launch gate, so a shell puts the pipe there and becomes ssh)."""
    from servers.launch import spawn

    with open(log, "ab") as f:
        f.write(("# mallocsweep: " + " ".join(_masked(ssh_argv)) + "\n").encode())
    env = {k: v for k, v in os.environ.items() if k in ("HOME", "USER", "LOGNAME", "SSH_AUTH_SOCK")}
    return spawn(
        ["/bin/sh", "-c", f'exec "$@" <&{go_fd} {go_fd}<&-', "sh", *ssh_argv],
        env=_ENV | env,
        cwd=cwd,
        stdout=rec,
        stderr=log,
        death_signal=signal.SIGKILL,
        pass_fds=(go_fd,),
    )


def run_split_level(
    target: ClientTarget,
    workload: str,
    threads: int,
    duration_s: float,
    opts: SysbenchOptions,
    log_path: Path,
    hosts,
    on_interval: Callable[[float, float, float], None] | None = None,
) -> LevelResult:
    """One level over `hosts` (suites.remote.hosts.ClientHosts); never raises for a failing
    level (its result says why), like suites.sysbench.runner.run_level."""
    script = stock_script(workload)
    seconds = whole_seconds(duration_s, "duration_s")
    shares = split_threads(threads, len(hosts.hosts))
    log_path = Path(log_path).absolute()
    log_path.parent.mkdir(parents=True, exist_ok=True)
    names = [h.target for h in hosts.hosts]
    logs = [host_log(log_path, n) for n in names]
    limit = default_timeout(max(shares), seconds)
    scratch = Path(tempfile.mkdtemp(prefix="ms-sbs-", dir="/tmp"))
    with open(log_path, "a") as f:
        f.write(
            f"# mallocsweep: {threads} threads split over {len(names)} client hosts, started "
            "together (each waits for one go):\n"
            + "".join(
                f"#   {n}: {s} threads, log {lg.name}\n"
                for n, s, lg in zip(names, shares, logs, strict=True)
            )  # fmt: skip
        )
    children, tags, followers, argvs, gos = [], [], [], [], []
    started = time.monotonic()
    timed_out = False
    ready_at: list[float | None] = [None] * len(names)
    go_at = None
    try:
        for host, share, log in zip(hosts.hosts, shares, logs, strict=True):
            argv = level_argv(WRAPPER, target, opts, share, seconds)
            argvs.append(argv)
            env = _ENV | {"MALLOCSWEEP_WORKLOAD": script, "MALLOCSWEEP_THREADS": str(share)}
            rec = records_path(log)
            rec.unlink(missing_ok=True)
            rec.touch()
            followers.append(_RecordFollower(rec))
            ssh_argv, tag = host.level_command(argv, env, limit, barrier=True)
            tags.append(tag)
            r, w = os.pipe()
            gos.append(w)
            try:
                children.append(_spawn_gated(ssh_argv, log, rec, scratch, r))
            except OSError as e:
                raise SuiteError(f"cannot run ssh for client host {host.target}: {e}") from None
            finally:
                os.close(r)
        # Every host logged in and waiting: go to all of them at once.
        ready_by = time.monotonic() + hosts.section.connect_timeout_s + THREAD_INIT_TIMEOUT_S
        seen: list[list[dict]] = [[] for _ in children]
        while go_at is None:
            for i, fol in enumerate(followers):
                for r in fol.new_records():
                    if r["type"] == "ready":
                        ready_at[i] = time.monotonic()
                    elif r["type"] == "interval":
                        seen[i].append(r)
            if all(t is not None for t in ready_at):
                for w in gos:
                    os.write(w, b"go\n")
                go_at = time.monotonic()
                break
            if any(c.poll() is not None for c in children) or time.monotonic() > ready_by:
                break  # a host that cannot start: the level ends below, failed
            interrupts.check()
            children[0].wait(POLL_S)
        for w in gos:
            os.close(w)
        gos = []
        deadline = time.monotonic() + limit if go_at is not None else time.monotonic()
        told = 0  # combined intervals handed to the collectors
        while go_at is not None:
            ended = [c.poll() is not None for c in children]
            for i, fol in enumerate(followers):
                seen[i] += [r for r in fol.new_records() if r["type"] == "interval"]
            # Interval k is complete once every host still running has written it.
            live = [s for s, e in zip(seen, ended, strict=True) if not e] or seen
            ready = min(len(s) for s in live)
            while told < ready and on_interval is not None:
                rec = combined_interval([s[told] for s in seen if len(s) > told])
                dt = rec["time_interval"] or 1.0
                on_interval(rec["time_total"], rec["events"] / dt, _queries(rec) / dt)
                told += 1
            if all(ended):
                break
            interrupts.check()
            if time.monotonic() >= deadline:
                timed_out = True
                break
            children[ended.index(False)].wait(POLL_S)
    finally:
        with interrupts.held(), interrupts.doing("sysbench on the client hosts to be ended"):
            for w in gos:
                os.close(w)
            for host, child, tag in zip(hosts.hosts, children, tags, strict=False):
                bad = child.poll() is None or timed_out or child.exit.returncode != 0
                if child.poll() is None:
                    child.signal_group(signal.SIGKILL)
                    child.wait(10)
                if bad:
                    host.abort(tag)
            shutil.rmtree(scratch, ignore_errors=True)
    recs = [read_records(records_path(lg)) for lg in logs]
    parts = []
    for child, rec, log, share in zip(children, recs, logs, shares, strict=True):
        part = level_result(workload, share, rec, log)
        exit_info = child.exit
        if go_at is None and part.status == "ok":
            part.status, part.error = "failed", "not every client host got ready to start"
        elif timed_out and part.status == "ok":
            part.status, part.error = "failed", f"did not finish within {limit:.0f}s"
        elif part.status == "ok" and (exit_info is None or exit_info.returncode != 0):
            how = exit_info.describe if exit_info else "ended in an unknown way"
            part.status, part.error = "failed", _failure_reason(log, f"sysbench {how}")
        elif part.status != "ok":
            part.error = _failure_reason(log, part.error or "failed")
        parts.append(part)
    res = combine(workload, threads, names, recs, parts, log_path)
    offsets = [h.facts["clock_at_start"]["offset_s"] for h in hosts.hosts]
    each = [
        _host_record(n, s, p, _start_record(records_path(lg)), lg, c.exit, o)
        for n, s, p, lg, c, o in zip(names, shares, parts, logs, children, offsets, strict=True)
    ]  # fmt: skip
    starts = [e["started_at"] for e in each if e["started_at"] is not None]
    res.extra.update(
        argv=_masked(argvs[0]),
        client_hosts=each,
        split={
            "start": "go-barrier: every host ready, then one go line to each host's ssh stdin",
            # how long the slowest host took to log in and be ready, from the first ssh started
            "ready_s": None if None in ready_at else round(max(ready_at) - started, 3),
            "start_skew_s": round(max(starts) - min(starts), 6)
            if len(starts) == len(each)
            else None,
        },
        wall_s=round(time.monotonic() - started, 3),
    )
    return res
