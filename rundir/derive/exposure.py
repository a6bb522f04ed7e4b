"""The allocator's exposure per level: calls into it per query and per transaction.

The readings (suites/runner/alloc_memory.py) carry the counting shim's sums since the server started
(alloc_calls, free_calls, alloc_bytes); a level's counts are its end reading minus the reading
just before the level (the warmup's end, or the previous level's end). What the columns mean is
rundir.format.EXPOSURE_COLUMNS. Pure: re-run on any run directory by `report --rederive`.
"""

from __future__ import annotations

from rundir.format import EXPOSURE_COLUMNS


def _reading(readings, phase: str, at: str) -> dict | None:
    return next((r for r in readings if r.get("phase") == phase and r.get("at") == at), None)


def level_counts(readings: list[dict] | None, phase: str, previous: str | None) -> dict | None:
    """{alloc_calls, free_calls, alloc_bytes} made during level `phase`, whose preceding level
    phase is `previous` (None: the first level, preceded by the warmup). None when either
    reading is missing or carries no counts (a failed reading must not merge two levels)."""
    readings = readings or []
    end = _reading(readings, phase, "level end")
    start = (
        _reading(readings, previous, "level end")
        if previous is not None
        else _reading(readings, "warmup", "warmup end")
    )
    keys = ("alloc_calls", "free_calls", "alloc_bytes")
    if end is None or start is None or any(r.get(k) is None for r in (start, end) for k in keys):
        return None
    out = {k: end[k] - start[k] for k in keys}
    if any(v < 0 for v in out.values()):
        return None  # counters never go back: these two readings are not of one server life
    return out


def _per(n, d):
    return None if n is None or not d else round(n / d, 3)


def level_columns(
    readings: list[dict] | None, phase: str, previous: str | None, report: dict
) -> dict:
    """EXPOSURE_COLUMNS of one level, from its readings and its workload report (qps, tps,
    duration_s); all empty where the counts or the report's figures are missing."""
    out = dict.fromkeys(EXPOSURE_COLUMNS)
    counts = level_counts(readings, phase, previous)
    duration = report.get("duration_s")
    if counts is None or not duration:
        return out
    queries = (report.get("qps") or 0) * duration
    txns = (report.get("tps") or 0) * duration
    out["malloc_calls_per_query"] = _per(counts["alloc_calls"], queries)
    out["malloc_bytes_per_query"] = _per(counts["alloc_bytes"], queries)
    out["free_calls_per_query"] = _per(counts["free_calls"], queries)
    out["malloc_calls_per_txn"] = _per(counts["alloc_calls"], txns)
    return out
