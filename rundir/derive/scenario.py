"""A fragmentation scenario's figures per cycle (suites/workloads/fragmentation), from its level's
raw record alone: which cycle it was, and for a spike-and-idle cycle what of the burst's RSS
came back.

A spike-and-idle cycle records RSS right before the burst (`pre_burst_kb`), when the burst ended
(`burst_end_kb`) and then through the idle time (`idle`: [seconds since the burst ended, RSS]).
- burst_returned = (RSS at the burst's end - RSS at the end of the idle time) / (RSS at the
  burst's end - RSS before it): 1.0 gave everything back, 0 kept it all, above 1 gave back more
  than the burst took (what earlier cycles had kept), below 0 grew further while idle. Empty when
  the burst grew RSS by less than MIN_BURST_KB (nothing to give back) or a reading is missing.
- burst_return_s: seconds from the burst's end to the first idle reading within WITHIN (10%) of
  the pre-burst level (RSS <= 1.1 x RSS before the burst); 0 when the burst's end already was,
  empty when no reading of the idle time was. Its resolution is the idle readings' period.
- scenario_end_s: when the cycle ended, seconds since the server's life began (the cycle's end
  boundary): growth per hour is fitted against it (analysis/growth_rate.py), so the idle time
  between cycles counts as the wall time it was, not as nothing.
"""

from __future__ import annotations

from rundir.format import SCENARIO_COLUMNS

MIN_BURST_KB = 1024
WITHIN = 0.10


def release(
    pre_kb: float | None, end_kb: float | None, idle: list[tuple[float, float | None]]
) -> tuple[float | None, float | None]:
    """(burst_returned, burst_return_s) of one burst (module doc)."""
    readings = [(t, r) for t, r in idle if r is not None]
    if pre_kb is None or end_kb is None:
        return None, None
    limit = pre_kb * (1 + WITHIN)
    if end_kb <= limit:
        back_s = 0.0
    else:
        back_s = next((round(t, 3) for t, r in readings if r <= limit), None)
    burst = end_kb - pre_kb
    if burst < MIN_BURST_KB or not readings:
        return None, back_s
    return round((end_kb - readings[-1][1]) / burst, 4), back_s


def cycle_end_s(raw: dict, level: dict) -> float | None:
    """The level's end boundary, seconds since the server's life began; None outside the
    scenarios or where the boundary was not read."""
    if not level.get("scenario"):
        return None
    end = ((raw.get("phases") or {}).get(level.get("phase")) or {}).get("end") or {}
    t = (end.get("snap") or {}).get("t_s")
    return None if t is None else round(float(t), 3)


def scenario_columns(level: dict) -> dict:
    """The SCENARIO_COLUMNS of a raw level (all empty outside the scenarios)."""
    rec = level.get("scenario")
    if not rec:
        return dict.fromkeys(SCENARIO_COLUMNS)
    returned, back_s = (None, None)
    if rec.get("burst_end_kb") is not None:
        returned, back_s = release(
            rec.get("pre_burst_kb"), rec.get("burst_end_kb"), rec.get("idle") or []
        )
    return {"scenario_cycle": rec["cycle"], "burst_returned": returned, "burst_return_s": back_s}
