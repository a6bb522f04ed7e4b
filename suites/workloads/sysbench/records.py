"""Read what our Lua wrapper wrote (one JSON object per line) and turn it into a LevelResult.

The records are sysbench's own counters, unrounded: an interval's rates are its counts over its
own time_interval, and the level's tps/qps are the cumulative counts over the cumulative
time_interval — exactly what sysbench prints as "per sec." in the raw log. Latency percentiles come
from the full histogram (suites.workloads.sysbench.histogram); sysbench's single --percentile is kept as a
cross-check.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from rundir.records import LatencyHistogram as HistogramRecord
from rundir.records import SysbenchLevel, SysbenchPercentile
from suites.workloads.level_loop import parse_record
from suites.workloads.level_result import LevelResult
from suites.workloads.sysbench.histogram import LatencyHistogram

PERCENTILES = {"lat_p50_ms": 50, "lat_p95_ms": 95, "lat_p99_ms": 99, "lat_p999_ms": 99.9}


@dataclass
class LevelRecords:
    intervals: list[dict] = field(default_factory=list)
    cumulative: dict | None = None
    histogram: LatencyHistogram | None = None
    histogram_nevents: int | None = None  # sysbench's own count of what the histogram holds
    problems: list[str] = field(default_factory=list)  # malformed lines, layout errors
    # When the wrapper ended the level early because its ramp had ended (settle.py): sysbench's
    # elapsed seconds at that moment
    settled_stop_s: float | None = None


def records_path(log_path: Path) -> Path:
    """Where the wrapper's JSON records of the level logged at `log_path` are kept."""
    return Path(log_path).with_suffix(".jsonl")


def read_records(path: Path) -> LevelRecords:
    """Everything in a records file; a missing file reads as empty (the level never started)."""
    out = LevelRecords()
    try:
        text = Path(path).read_text(errors="replace")
    except FileNotFoundError:
        return out
    for n, line in enumerate(text.splitlines(), 1):
        rec = parse_record(line)
        if rec is None:
            if line.strip():
                out.problems.append(f"{path}:{n}: not a complete JSON record")
            continue
        add_record(out, rec)
    return out


def add_record(out: LevelRecords, rec: dict) -> None:
    kind = rec["type"]
    if kind == "interval":
        out.intervals.append(rec)
    elif kind == "cumulative":
        out.cumulative = rec
    elif kind == "histogram":
        # Two workers finishing together may both dump; they hold the same counts. Keep the fuller.
        hist = LatencyHistogram.from_pairs(
            rec.get("buckets", []),
            array_size=int(rec["array_size"]),
            range_min=float(rec["range_min"]),
            range_max=float(rec["range_max"]),
        )
        if out.histogram is None or hist.total >= out.histogram.total:
            out.histogram = hist
            out.histogram_nevents = int(rec.get("nevents", hist.total))
    elif kind == "histogram_error":
        out.problems.append(str(rec.get("reason")))
    elif kind == "stop":
        out.settled_stop_s = float(rec["t_s"])
    elif kind == "stop_refused":
        out.problems.append(f"could not end the level early: {rec.get('reason')}")


def _queries(rec: dict) -> float:
    return float(rec.get("reads", 0)) + float(rec.get("writes", 0)) + float(rec.get("other", 0))


def interval_figures(rec: dict) -> dict:
    """One interval as the timeline wants it: t_s relative to the level's start, rates per s."""
    dt = float(rec.get("time_interval") or 0) or 1.0
    pct = rec.get("percentile", 95)
    out = {
        "t_s": round(float(rec.get("time_total", 0)), 3),
        "tps": float(rec.get("events", 0)) / dt,
        "qps": _queries(rec) / dt,
        f"lat_p{_pct_name(pct)}_ms": _ms(rec.get("latency_pct")),
        "errors": int(rec.get("errors", 0)),
        "reconnects": int(rec.get("reconnects", 0)),
        "threads_running": int(rec.get("threads_running", 0)),
    }
    if rec.get("queue_length"):
        out["queue_length"] = int(rec["queue_length"])  # --rate: events waiting for a thread
    return out


def _pct_name(p) -> str:
    p = float(p)
    return str(int(p)) if p == int(p) else str(p).replace(".", "")


def _ms(seconds) -> float | None:
    return None if seconds is None else float(seconds) * 1000.0


def level_result(
    workload: str, threads: int, recs: LevelRecords, raw_log: Path | None
) -> LevelResult:
    """The level's figures; status "failed" with a reason when sysbench reported no events."""
    res = LevelResult(workload=workload, threads=threads, raw_log=raw_log, sysbench=SysbenchLevel())
    res.intervals = [interval_figures(r) for r in recs.intervals]
    cum = recs.cumulative
    if cum is None:
        res.status, res.error = "failed", "sysbench wrote no cumulative report"
        _partial_from_intervals(res, recs)
        return res
    dt = float(cum.get("time_interval") or 0)
    res.duration_s = float(cum.get("time_total", 0))
    res.events = int(cum.get("events", 0))
    res.errors = int(cum.get("errors", 0))
    res.reconnects = int(cum.get("reconnects", 0))
    if dt > 0:
        res.tps = res.events / dt
        res.qps = _queries(cum) / dt
    if res.events == 0:
        res.status, res.error = "failed", "the level completed zero events"
        return res
    res.lat_avg_ms = _ms(cum.get("latency_avg"))
    res.lat_max_ms = _ms(cum.get("latency_max"))
    lat_min = _ms(cum.get("latency_min"))
    hist = recs.histogram
    rec = res.sysbench
    rec.sysbench_percentile = SysbenchPercentile(
        p=cum.get("percentile"), ms=_ms(cum.get("latency_pct"))
    )
    if hist is not None and hist.total > 0:
        for attr, p in PERCENTILES.items():
            v = hist.percentile(p)
            # A bucket stands for a value within ~0.9 % of the true one; the true percentile
            # cannot lie outside the exact min/max sysbench timed, so clamp to them.
            if res.lat_max_ms is not None:
                v = min(v, res.lat_max_ms)
            if lat_min is not None:
                v = max(v, lat_min)
            setattr(res, attr, v)
        rec.latency_histogram = histogram_record(hist)
        if hist.total != res.events:
            recs.problems.append(
                f"histogram holds {hist.total} events, sysbench counted {res.events}"
            )
    else:
        recs.problems.append("no latency histogram was recorded; percentiles left empty")
    rec.lat_min_ms = lat_min
    rec.problems = list(recs.problems)
    rec.settled_stop_s = recs.settled_stop_s
    return res


def histogram_record(hist: LatencyHistogram) -> HistogramRecord:
    """A histogram as the raw record keeps it."""
    return HistogramRecord(
        array_size=hist.array_size,
        range_min_ms=hist.range_min,
        range_max_ms=hist.range_max,
        buckets=sorted(hist.counts.items()),
    )


def _partial_from_intervals(res: LevelResult, recs: LevelRecords) -> None:
    """What the intervals saw before the level failed: useful to tell 'never ran' from 'died'."""
    if recs.intervals:
        res.events = int(sum(float(r.get("events", 0)) for r in recs.intervals))
        res.duration_s = float(recs.intervals[-1].get("time_total", 0))
        res.sysbench.partial = "figures are from interval reports before the failure"
    res.sysbench.problems = list(recs.problems)
