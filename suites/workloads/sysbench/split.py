"""A sysbench level split over several client hosts: its figures combined truly.

Each host runs its share of the threads (suites.remote.hosts.split_threads), all started by one
go once every host is ready (suites.workloads.level_loop, driven by suites.workloads.sysbench.runner), over its own
ssh into its own log and records file (<phase>.<host>.log / .jsonl); the level's log names them.
The level's figures are combined from the hosts' records, never from their rounded results:
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

from pathlib import Path

from rundir.records import SysbenchLevel
from suites.errors import SuiteError
from suites.workloads.level_loop import LevelRun, Stream, parse_record
from suites.workloads.level_result import LevelResult
from suites.workloads.sysbench.histogram import LatencyHistogram
from suites.workloads.sysbench.records import (
    PERCENTILES,
    LevelRecords,
    histogram_record,
    records_path,
)


class SysbenchIntervals:
    """How sysbench's interval records read (suites.workloads.level_loop.Intervals)."""

    def rates(self, rec: dict) -> tuple[float, float, float]:
        dt = float(rec.get("time_interval") or 1.0) or 1.0
        return float(rec.get("time_total", 0)), float(rec.get("events", 0)) / dt, _queries(rec) / dt

    def combine(self, recs: list[dict]) -> dict:
        return combined_interval(recs)


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
    res = LevelResult(
        workload=workload, threads=threads, raw_log=log_path, sysbench=SysbenchLevel()
    )
    rec = res.sysbench
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
        mins = [p.sysbench.lat_min_ms for p in parts if p.sysbench.lat_min_ms is not None]
        for attr, pct in PERCENTILES.items():
            v = min(merged.percentile(pct), lat_max)
            setattr(res, attr, max(v, min(mins)) if mins else v)
        rec.latency_histogram = histogram_record(merged)
        res.lat_max_ms = lat_max
        rec.lat_min_ms = min(mins) if mins else None
    else:
        rec.problems = ["a client host recorded no latency histogram; percentiles empty"]
    timed = [p for p in parts if p.lat_avg_ms is not None and p.events]
    if timed:
        res.lat_avg_ms = sum(p.lat_avg_ms * p.events for p in timed) / sum(p.events for p in timed)
    rec.common_window = window
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
    found = (r for r in (parse_record(ln) for ln in lines) if r and r["type"] == "start")
    return next((r for r in found if isinstance(r.get("t_ns"), int)), None)


def split_result(
    workload: str, threads: int, hosts: list, shares: list[int], streams: list[Stream],
    recs: list[LevelRecords], parts: list[LevelResult], logs: list[Path], log_path: Path,
    run: LevelRun,
) -> LevelResult:  # fmt: skip
    """The level's result from each host's records and own result, with each host's record and
    how they started together (the hosts' loads are the runner's to add)."""
    names = [h.target for h in hosts]
    res = combine(workload, threads, names, recs, parts, log_path)
    offsets = [h.facts["clock_at_start"]["offset_s"] for h in hosts]
    each = [
        _host_record(n, s, p, _start_record(records_path(lg)), lg, st.child.exit, o)
        for n, s, p, lg, st, o in zip(names, shares, parts, logs, streams, offsets, strict=True)
    ]  # fmt: skip
    starts = [e["started_at"] for e in each if e["started_at"] is not None]
    ready = [s.ready_at for s in streams]
    rec = res.sysbench
    rec.client_hosts = each
    rec.split = {
        "start": "go-barrier: every host ready, then one go line to each host's ssh stdin",
        # how long the slowest host took to log in and be ready, from the first ssh started
        "ready_s": None if None in ready else round(max(ready) - run.started, 3),
        "start_skew_s": round(max(starts) - min(starts), 6) if len(starts) == len(each) else None,
    }
    rec.wall_s = run.wall_s
    return res
