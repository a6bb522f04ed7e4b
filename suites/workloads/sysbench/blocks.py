"""A sysbench level run as blocks (the alternate design) put back together as one level.

The level's row keeps the meaning of a whole level's where it can: events, errors and seconds of
load are the blocks' sums, tps and qps the events and queries over those seconds, latency
percentiles come from the blocks' histograms merged (sysbench's own buckets and maths, as a level
split over client hosts merges its hosts'), lat_max the largest, lat_avg the events' mean. The
seconds are the load's only: between its blocks the server idled while the other arms ran. What a
verdict judges is the level's steady rate, which rundir.derive.blocks takes from the blocks
themselves (recorded with the level), not from this sum.
"""

from __future__ import annotations

from rundir.records import SysbenchLevel
from suites.workloads.level_result import LevelResult
from suites.workloads.sysbench.histogram import LatencyHistogram
from suites.workloads.sysbench.records import PERCENTILES, histogram_record
from suites.workloads.sysbench.split import merge_histograms


def compose(results: list[LevelResult]) -> LevelResult:
    """One LevelResult from a level's blocks, in order (module docstring)."""
    first = results[0]
    res = LevelResult(workload=first.workload, threads=first.threads, sysbench=SysbenchLevel())
    failed = [(i, r) for i, r in enumerate(results) if r.status != "ok"]
    if failed:
        res.status = "failed"
        res.error = "; ".join(f"block {i + 1}: {r.error}" for i, r in failed)
    seconds = sum(r.duration_s for r in results)
    res.duration_s = round(seconds, 3)
    res.events = sum(r.events for r in results)
    res.errors = sum(r.errors for r in results)
    res.reconnects = sum(r.reconnects for r in results)
    if seconds > 0:
        res.tps = sum(r.tps * r.duration_s for r in results) / seconds
        res.qps = sum(r.qps * r.duration_s for r in results) / seconds
    timed = [r for r in results if r.lat_avg_ms is not None and r.events]
    if timed:
        res.lat_avg_ms = sum(r.lat_avg_ms * r.events for r in timed) / sum(r.events for r in timed)
    maxes = [r.lat_max_ms for r in results if r.lat_max_ms is not None]
    res.lat_max_ms = max(maxes) if maxes else None
    hists = [_histogram(r) for r in results]
    if hists and all(h is not None and h.total > 0 for h in hists):
        merged = merge_histograms(hists)
        mins = [r.sysbench.lat_min_ms for r in results if r.sysbench.lat_min_ms is not None]
        for attr, pct in PERCENTILES.items():
            v = merged.percentile(pct)
            if res.lat_max_ms is not None:
                v = min(v, res.lat_max_ms)
            setattr(res, attr, max(v, min(mins)) if mins else v)
        res.sysbench.latency_histogram = histogram_record(merged)
        res.sysbench.lat_min_ms = min(mins) if mins else None
    elif not failed:
        res.sysbench.problems = ["a block recorded no latency histogram; percentiles empty"]
    res.sysbench.problems += [p for r in results if r.sysbench for p in r.sysbench.problems]
    res.sysbench.wall_s = sum(r.sysbench.wall_s or 0 for r in results if r.sysbench) or None
    return res


def _histogram(r: LevelResult) -> LatencyHistogram | None:
    rec = r.sysbench.latency_histogram if r.sysbench is not None else None
    if rec is None:
        return None
    return LatencyHistogram.from_pairs(
        rec.buckets, array_size=rec.array_size, range_min=rec.range_min_ms,
        range_max=rec.range_max_ms,
    )  # fmt: skip
