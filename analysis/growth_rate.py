"""Growth in a reader's unit: MB per hour (and per 100 cycles) of each arm of a fragmentation
scenario, from every cycle of each server life, and its difference from the baseline's in MB per
hour with an interval (issue 34). No ratio anywhere: a ratio of two slopes near zero has a
denominator whose interval crosses zero, and means nothing to a reader.

Per life (one scenario in one server life, its cycles in order):
- rate: the least-squares slope of RSS at each cycle's end against the wall time the cycle ended
  (scenario_end_s, rundir/derive/scenario.py), over ALL the life's cycles, in MB per hour, with
  its standard error. The cycles of one life are a time series, not independent draws (a cycle
  that left the heap higher leaves the next one higher too), so the error is widened by the
  residuals' lag-1 autocorrelation rho: x sqrt((1 + rho) / (1 - rho)) for rho > 0 (capped at
  MAX_RHO), with n - 2 degrees of freedom.
- per 100 cycles: the same slope against the cycle's number, x 100: a rate that does not depend
  on how long one cycle took on this machine.
- held: the same two of alloc_held_resident_kb (what the allocator keeps resident beyond what the
  server uses); account: of the server's own account (server_memory_used_kb).
- tail: the slope over the last half of the cycles (at least MIN_TAIL of them), for the state.

Combined over lives (weighted pairs, not a mixed model): the lives of an arm, or the paired
differences d_r = rate(arm, round r) - rate(baseline, round r), each with its variance v_r (the
fits' squared errors, summed for a pair), are combined with inverse-variance weights plus a
between-life variance tau^2 (DerSimonian-Laird: lives differ by more than their own fit says, a
round's load or the buffer pool's history), and the interval is Hartung-Knapp's (Student t with
R - 1 degrees of freedom on the weighted spread of the values, never narrower than the fixed
weights' own), because with few rounds the plain random-effects interval is too narrow. One life
(a soak: one life per arm) gives the fits' own interval (v_1, the fewer of the lives' degrees of
freedom): it knows the noise within a life, not between lives.

A soak (one life per arm, hours of cycles; suites/runner/soak.py) has no rounds to pair: each
arm's rate is its one life's slope with its own AR(1)-widened error, and the difference's error
comes from both arms' (se^2 = se_a^2 + se_b^2, Welch-Satterthwaite degrees of freedom). A soak
broken by a kill or Ctrl-C and resumed has several segments per arm, each a server life of its
own: a fit never spans a break (memory starts again from a fresh server), each segment is fitted
alone, and an arm's segments are pooled with inverse-variance weights (one arm's segments are the
same arm on the same machine: no between-life variance is estimated from two or three pieces;
Satterthwaite's degrees of freedom). The level is the look's (analysis/sequential.py's spending
over the soak's planned looks, recorded in the manifest's `soak`).

Decisions, with a margin M in MB per hour (MARGIN_MB_PER_HOUR, or the manifest's design
`growth_margin_mb_per_hour`):
- an arm against the baseline: grows more when the interval of the difference lies above 0 and
  the difference is at least M; grows less when it lies below 0 and the difference is at most
  -M; no difference beyond M when the whole interval is within [-M, M]; else undecided.
  Outside a soak a decision needs at least MIN_PAIRS rounds where both arms have a rate: one
  pair's interval is only its two fits' own;
- a part of RSS clamped at 0 (held) that read 0 at every cycle of a life was never observed in
  that life (the allocator's in-use covered the whole resident heap): that life has no rate for
  it. Every fit's residual variance is at least the page quantisation's, so a life that lies on
  a straight line is one life among the others when they are combined, not all of them;
- a life's or an arm's state, from the tail's slope: still growing (interval above 0 and the
  slope at least M), levelled off (the whole interval within [-M, M]), else unclear.
"""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, replace

from analysis.growth import scenario_rows
from analysis.metrics import (
    BETTER,
    HELD_GROWTH_MB_PER_HOUR,
    NONE,
    RSS_GROWTH_MB_PER_HOUR,
    UNDECIDED,
    WORSE,
)
from analysis.stats import median, t_quantile
from rundir.derive.scenario import cycle_end_s
from rundir.format import RAW_DIR
from rundir.read import Run

METRICS = (RSS_GROWTH_MB_PER_HOUR, HELD_GROWTH_MB_PER_HOUR)
UNIT = "MB/h"
# "no difference beyond M": a server that grows 10 MB an hour more than another adds 240 MB a day,
# what a reader of a day-long report starts to notice on a server of a few GB
MARGIN_MB_PER_HOUR = 10.0
# A life needs this many cycles for a rate (3 points leave one degree of freedom)
MIN_CYCLES = 3
# The tail (last half) needs this many cycles for a state
MIN_TAIL = 3
# The widening for autocorrelated residuals is capped: rho near 1 would make it unbounded on a
# handful of cycles, where rho itself is barely estimated
MAX_RHO = 0.8
# Lives an arm and its baseline both need, outside a soak, before their difference is decided
MIN_PAIRS = 2
# What a memory reading can resolve: RSS and the parts are counted in whole 4 kB pages. A fit's
# residual variance is never taken below this quantisation's (q^2 / 12): a series that happens to
# lie on a straight line (RSS unchanged over 8 cycles) knows its slope only to the page, and an
# error of 0 would take every weight when lives are combined.
RESOLUTION_MB = 4 / 1024
LEVELLED, GROWING, UNCLEAR = "levelled off", "still growing", "unclear"
# A soak's scenarios of one life judged as one series (one_series): the workload its rows carry
SOAK_SERIES = "all scenarios"
_BLOCK = re.compile(r"_tc(\d+|sized)$")  # a session_churn block's suffix (scenario_of)
KB_PER_MB = 1024.0
S_PER_H = 3600.0


@dataclass(frozen=True)
class Rate:
    """A slope with its standard error and degrees of freedom, in the caller's unit."""

    value: float
    se: float
    df: float
    points: int

    def interval(self, level: float = 0.95) -> tuple[float, float]:
        if not math.isfinite(self.se) or self.df < 1:
            return (-math.inf, math.inf)
        half = t_quantile(1 - (1 - level) / 2, self.df) * self.se
        return (self.value - half, self.value + half)


def fit(xs: list[float], ys: list[float]) -> Rate | None:
    """Least-squares slope of ys on xs, its error widened for lag-1 autocorrelation (module doc);
    None with fewer than MIN_CYCLES points or no spread in xs."""
    n = len(xs)
    if n < MIN_CYCLES or n != len(ys):
        return None
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx <= 0:
        return None
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    resid = [y - (my + b * (x - mx)) for x, y in zip(xs, ys, strict=True)]
    ss = sum(e * e for e in resid)
    se = math.sqrt(max(ss / (n - 2), RESOLUTION_MB**2 / 12) / sxx)
    if ss > 0 and n >= 4:
        rho = sum(a * c for a, c in zip(resid, resid[1:], strict=False)) / ss
        rho = min(max(rho, 0.0), MAX_RHO)
        se *= math.sqrt((1 + rho) / (1 - rho))
    return Rate(b, se, n - 2, n)


def margin_of(run: Run) -> float:
    d = run.manifest.get("design") or {}
    m = d.get("growth_margin_mb_per_hour")
    return float(m) if m else MARGIN_MB_PER_HOUR


def state(rate: Rate | None, margin: float, level: float = 0.95) -> str:
    """still growing / levelled off / unclear for a tail's slope (module doc)."""
    if rate is None:
        return UNCLEAR
    lo, hi = rate.interval(level)
    if lo > 0 and rate.value >= margin:
        return GROWING
    if lo >= -margin and hi <= margin:
        return LEVELLED
    return UNCLEAR


def decide(diff: float, lo: float, hi: float, margin: float) -> str:
    """The outcome of a difference in growth (arm - baseline): WORSE grows more, BETTER grows
    less, NONE within the margin (analysis/metrics.py's outcomes)."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return UNDECIDED
    if lo > 0 and diff >= margin:
        return WORSE
    if hi < 0 and diff <= -margin:
        return BETTER
    if lo >= -margin and hi <= margin:
        return NONE
    return UNDECIDED


def combine(values: list[tuple[float, float, float]]) -> Rate | None:
    """(value, se, df) per life or pair -> one estimate over them (module doc: inverse-variance
    weights with DerSimonian-Laird's tau^2, Hartung-Knapp's interval); None when empty."""
    vals = [(v, se, df) for v, se, df in values if math.isfinite(v) and math.isfinite(se)]
    if not vals:
        return None
    if len(vals) == 1:
        v, se, df = vals[0]
        return Rate(v, se, df, 1)
    # a perfect fit (se 0) would take every weight: floor the variance at a tiny share of the
    # values' own spread so the weights stay finite
    spread = max(abs(v) for v, _, _ in vals) or 1.0
    var = [max(se * se, (1e-9 * spread) ** 2) for _, se, _ in vals]
    w = [1 / x for x in var]
    sw = sum(w)
    mean_f = sum(wi * v for wi, (v, _, _) in zip(w, vals, strict=True)) / sw
    q = sum(wi * (v - mean_f) ** 2 for wi, (v, _, _) in zip(w, vals, strict=True))
    k = len(vals)
    # sw - sum(w^2)/sw written as the sum over pairs: the subtraction loses every digit when one
    # weight dwarfs the others, and tau^2 then came out 0 (one life took all the weight)
    c = 2 * sum(w[i] * w[j] for i in range(k) for j in range(i + 1, k)) / sw
    tau2 = max(0.0, (q - (k - 1)) / c) if c > 0 else 0.0
    wr = [1 / (x + tau2) for x in var]
    swr = sum(wr)
    mean = sum(wi * v for wi, (v, _, _) in zip(wr, vals, strict=True)) / swr
    hk = sum(wi * (v - mean) ** 2 for wi, (v, _, _) in zip(wr, vals, strict=True)) / ((k - 1) * swr)
    se = math.sqrt(max(hk, 1 / swr))
    return Rate(mean, se, k - 1, k)


@dataclass(frozen=True)
class LifeRate:
    """One server life's rates for one scenario (a recorded workload)."""

    cell: str
    server: str
    allocator: str
    thp: str
    repeat: int
    workload: str
    cycles: int
    hours: float | None  # from the first cycle's end to the last's
    rss: Rate | None  # MB per hour, all cycles
    rss_per_100: Rate | None  # MB per 100 cycles, all cycles
    held: Rate | None  # MB per hour
    held_per_100: Rate | None
    account: Rate | None  # the server's own account, MB per hour
    tail: Rate | None  # RSS, MB per hour, last half
    rss_end_mb: float | None
    tps: float | None
    segment: int = 1  # a soak's piece of one arm's series (1 unless it was broken and resumed)

    def state(self, margin: float) -> str:
        return state(self.tail, margin)


def _raw_times(run: Run, cell: str) -> dict[tuple[str, int], float]:
    """(workload, cycle) -> its end, from the cell's raw record: a run written before
    scenario_end_s (format 5 and older) is re-derived here from what it recorded."""
    try:
        raw = json.loads((run.path / RAW_DIR / f"{cell}.json").read_text())
    except (OSError, ValueError):
        return {}
    out = {}
    for level in raw.get("levels") or ():
        t = cycle_end_s(raw, level)
        if t is not None:
            out[(level.get("workload"), int(level["scenario"]["cycle"]))] = t
    return out


def _times(run: Run, cell: str, rows: list[dict], cache: dict) -> list[float] | None:
    ts = [r.get("scenario_end_s") for r in rows]
    if all(t is not None for t in ts):
        return [float(t) for t in ts]
    if cell not in cache:
        cache[cell] = _raw_times(run, cell)
    got = [cache[cell].get((r["workload"], int(r["scenario_cycle"]))) for r in rows]
    return None if any(t is None for t in got) else got


def _pairs(rows: list[dict], col: str, xs: list[float] | None) -> tuple[list, list] | None:
    if xs is None:
        return None
    pts = [(x, r.get(col)) for x, r in zip(xs, rows, strict=True) if r.get(col) is not None]
    if len(pts) < len(rows):  # a hole in the series: no rate rather than one over a gap
        return None
    return [p[0] for p in pts], [float(p[1]) / KB_PER_MB for p in pts]


def _fit_col(rows, col, xs) -> Rate | None:
    got = _pairs(rows, col, xs)
    return fit(*got) if got else None


def _fit_part(rows, col, xs) -> Rate | None:
    """A part of RSS that is a difference clamped at 0 (held = resident - in use, never below 0;
    rundir/derive/levels.py): a life where it read 0 at every cycle had its allocator's in-use
    cover all the resident heap at every cycle, so what it held was never seen (it hid behind
    memory in use but untouched), not seen to be 0. Such a life has no rate for the part; a
    slope of exactly 0 from it would be taken as the surest measurement of all."""
    got = _pairs(rows, col, xs)
    if not got or not any(got[1]):
        return None
    return fit(*got)


def life_rate(
    cell: str,
    rows: list[dict],
    times_s: list[float] | None,
    repeat: int | None = None,
    segment: int = 1,
) -> LifeRate:
    """A life's rates from its cycles' rows in cycle order and when each ended (seconds)."""
    hours = [t / S_PER_H for t in times_s] if times_s else None
    cycles = [float(r["scenario_cycle"]) / 100 for r in rows]  # x 100: per 100 cycles
    tail_n = len(rows) - len(rows) // 2
    tail = (
        _fit_col(rows[-tail_n:], "rss_end_kb", hours[-tail_n:])
        if hours and tail_n >= MIN_TAIL
        else None
    )
    tps = [r["tps"] for r in rows if r.get("tps")]
    first, last = rows[0], rows[-1]
    return LifeRate(
        cell=cell,
        server=first["server"],
        allocator=first["allocator"],
        thp=first["thp"],
        repeat=repeat or first.get("repeat") or 1,
        workload=first["workload"],
        cycles=len(rows),
        hours=(hours[-1] - hours[0]) if hours else None,
        rss=_fit_col(rows, "rss_end_kb", hours),
        rss_per_100=_fit_col(rows, "rss_end_kb", cycles),
        held=_fit_part(rows, "alloc_held_resident_kb", hours),
        held_per_100=_fit_part(rows, "alloc_held_resident_kb", cycles),
        account=_fit_col(rows, "server_memory_used_kb", hours),
        tail=tail,
        rss_end_mb=None if last.get("rss_end_kb") is None else last["rss_end_kb"] / KB_PER_MB,
        tps=median(tps) if tps else None,
        segment=segment,
    )


def life_rates(run: Run) -> list[LifeRate]:
    """Every complete life's rates, for every scenario with enough cycles (a spike's few bursts
    have their release instead); a soak of several scenarios has one per cell (one_series)."""
    out, cache = [], {}
    series: dict[str, list[tuple[list[dict], list[float] | None]]] = defaultdict(list)
    for (cid, _wl), rows in scenario_rows(run).items():
        if not run.is_standin(cid):
            series[cid].append((rows, _times(run, cid, rows, cache)))
    for cid, parts in series.items():
        seg = int((run.cell(cid).get("soak") or {}).get("segment") or 1)
        out += _lives(cid, one_series(parts) if is_soak(run) else parts, seg)
    return out


def lives_of_rows(cell: str, rows: list[dict], segment: int = 1) -> list[LifeRate]:
    """A soak cell's life from its rows as derived, each cycle timed by its scenario_end_s: what
    a soak's look judges before the cell is recorded (one series, one_series)."""
    by: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        if r.get("scenario_cycle") is not None and (r.get("status") or "ok") == "ok":
            by[r["workload"]].append(r)
    parts = []
    for got in by.values():
        got.sort(key=lambda r: r["scenario_cycle"])
        ts = [r.get("scenario_end_s") for r in got]
        parts.append((got, None if any(t is None for t in ts) else [float(t) for t in ts]))
    return _lives(cell, one_series(parts), segment)


def _lives(cell: str, parts: list[tuple[list[dict], list[float] | None]], segment: int) -> list:
    """A life's rates for every part (rows, their cycles' end times) with enough cycles."""
    return [
        life_rate(cell, rows, times, segment=segment)
        for rows, times in parts
        if len(rows) >= MIN_CYCLES
    ]


def one_series(
    parts: list[tuple[list[dict], list[float] | None]],
) -> list[tuple[list[dict], list[float] | None]]:
    """A soak's scenarios of one life as ONE series (workload SOAK_SERIES): the scenarios take
    turns in every pass of one server life (suites/runner/soak.py), so each scenario's RSS is the
    same life's heap read at another moment of the pass, and a rate per scenario would judge that
    one trend once per scenario (measured: a one-hour soak of the 7-scenario suite gave the same
    -195..-221 MB/h jemalloc-vs-glibc difference in every scenario's row, 32 "decided" verdicts
    out of one life's trend). Every cycle in the order it ended, numbered again 1..n (per 100
    cycles then counts every scenario's cycle). One scenario: unchanged. A part without its
    cycles' times cannot be put in order: nothing (no rate rather than a wrong one)."""
    if len(parts) <= 1:
        return parts
    if any(times is None for _rows, times in parts):
        return []
    # one scenario's blocks (session_churn's, one per thread cache size) keep its name: a soak
    # of that scenario alone, or its stage of a soak of scenarios apart
    names = {scenario_of(str(rows[0].get("workload"))) for rows, _t in parts if rows}
    name = names.pop() if len(names) == 1 else SOAK_SERIES
    timed = sorted(
        ((t, r) for rows, times in parts for t, r in zip(times, rows, strict=True)),
        key=lambda tr: tr[0],
    )
    rows = [
        {**r, "workload": name, "scenario_cycle": i} for i, (_t, r) in enumerate(timed, start=1)
    ]
    return [(rows, [t for t, _r in timed])]


def scenario_of(workload: str) -> str:
    """The scenario of a scenario's workload: session_churn's blocks are named
    session_churn_tc<size> / session_churn_tcsized (suites/workloads/fragmentation)."""
    return _BLOCK.sub("", workload)


def _triple(r: Rate | None) -> tuple[float, float, float] | None:
    return None if r is None else (r.value, r.se, r.df)


def arm_rate(lives: list[LifeRate], get: Callable[[LifeRate], Rate | None]) -> Rate | None:
    """An arm's rate combined over its lives (module doc); lives that share one repeat are a
    soak's segments of one life, pooled as soak_differences pools them (no between-life
    variance from the pieces of one life)."""
    if len(lives) > 1 and len({x.repeat for x in lives}) == 1:
        return pooled([get(x) for x in lives])
    return combine([t for t in (_triple(get(x)) for x in lives) if t is not None])


def arm_state(lives: list[LifeRate], margin: float, level: float = 0.95) -> str:
    """The arm's state from its lives' tails combined: a test with its own interval."""
    return state(arm_rate(lives, lambda x: x.tail), margin, level)


@dataclass(frozen=True)
class Difference:
    """An arm's growth minus the baseline's, MB per hour, paired by round."""

    diff: float
    lo: float
    hi: float
    verdict: str
    rounds: int
    level: float


def paired_difference(
    arm: dict[int, Rate], base: dict[int, Rate], level: float, margin: float
) -> Difference | None:
    """round -> rate for the arm and the baseline: the combined difference over the rounds both
    have, its interval at `level` and the decision (module doc)."""
    rounds = sorted(set(arm) & set(base))
    pairs = []
    for r in rounds:
        a, b = arm[r], base[r]
        pairs.append((a.value - b.value, math.sqrt(a.se**2 + b.se**2), min(a.df, b.df)))
    c = combine(pairs)
    if c is None:
        return None
    lo, hi = c.interval(level)
    return Difference(c.value, lo, hi, decide(c.value, lo, hi, margin), len(rounds), level)


GETTERS: dict[str, Callable[[LifeRate], Rate | None]] = {
    RSS_GROWTH_MB_PER_HOUR: lambda x: x.rss,
    HELD_GROWTH_MB_PER_HOUR: lambda x: x.held,
}


# -- a soak: one life per arm, perhaps in segments -----------------------------------------------
def pooled(rates: list[Rate | None]) -> Rate | None:
    """One arm's segments pooled (module doc): the inverse-variance mean, its error
    1 / sqrt(sum of weights), Welch-Satterthwaite degrees of freedom; None when none has a rate."""
    rs = [r for r in rates if r is not None and math.isfinite(r.value) and math.isfinite(r.se)]
    if not rs:
        return None
    if len(rs) == 1:
        return rs[0]
    spread = max(abs(r.value) for r in rs) or 1.0
    var = [max(r.se * r.se, (1e-9 * spread) ** 2) for r in rs]
    w = [1 / v for v in var]
    sw = sum(w)
    value = sum(wi * r.value for wi, r in zip(w, rs, strict=True)) / sw
    # var(mean) = sum (w_i / W)^2 v_i = 1 / W; each term w_i / W^2 carries r.df degrees of freedom
    terms = [(wi / sw**2, r.df) for wi, r in zip(w, rs, strict=True)]
    df = (
        (1 / sw) ** 2 / sum(t * t / d for t, d in terms if d > 0)
        if all(d > 0 for _, d in terms)
        else 0.0
    )
    return Rate(value, math.sqrt(1 / sw), df, sum(r.points for r in rs))


def unpaired_difference(a: Rate, b: Rate, level: float, margin: float) -> Difference:
    """arm - baseline from one (pooled) rate each, the error from both (Welch-Satterthwaite)."""
    d = a.value - b.value
    var = a.se**2 + b.se**2
    parts = [(a.se**2, a.df), (b.se**2, b.df)]
    df = (
        var**2 / sum(v * v / k for v, k in parts)
        if var > 0 and all(k > 0 for _, k in parts)
        else 0.0
    )
    lo, hi = Rate(d, math.sqrt(var), df, a.points + b.points).interval(level)
    return Difference(d, lo, hi, decide(d, lo, hi, margin), 1, level)


def soak_differences(
    lives: list[LifeRate], base: str, level: float | Callable[[str], float], margin: float
) -> list[tuple[tuple[str, str, str, str], str, Difference]]:
    """A soak's growth verdicts: every arm's pooled segments against the baseline's (module
    doc), at the look's `level` (a function of the workload where each scenario soaked apart,
    with looks of its own)."""
    by: dict[tuple, dict[str, list[LifeRate]]] = defaultdict(lambda: defaultdict(list))
    for x in lives:
        by[(x.server, x.workload, x.thp)][x.allocator].append(x)
    out = []
    for (server, wl, thp), arms in sorted(by.items()):
        if base not in arms:
            continue
        at = level(wl) if callable(level) else level
        for metric, get in GETTERS.items():
            b = pooled([get(x) for x in arms[base]])
            if b is None:
                continue
            for alloc, segs in arms.items():
                a = pooled([get(x) for x in segs]) if alloc != base else None
                if a is not None:
                    out.append(
                        ((server, wl, thp, alloc), metric, unpaired_difference(a, b, at, margin))
                    )
    return out


def series_rate(rows: list[dict]) -> Rate | None:
    """One life's RSS growth in MB per hour over ALL its cycles, every scenario's in the order
    they ended (a soak's progress line: one figure per arm); None without enough timed cycles."""
    pts = sorted(
        (float(r["scenario_end_s"]) / S_PER_H, float(r["rss_end_kb"]) / KB_PER_MB)
        for r in rows
        if r.get("scenario_end_s") is not None and r.get("rss_end_kb") is not None
    )
    return fit([p[0] for p in pts], [p[1] for p in pts]) if pts else None


def is_soak(run: Run) -> bool:
    return bool((run.manifest.get("soak") or {}).get("seconds"))


def verdict_differences(
    run: Run, base: str, level_of: Callable[[int], float]
) -> list[tuple[tuple[str, str, str, str], str, Difference]]:
    """((server, workload, thp, allocator), metric, difference against `base`) for every arm
    and growth metric; `level_of(rounds)` is the confidence level of the look (the design's).
    A soak's are soak_differences (one life per arm) at `level_of(1, workload)`, its look's
    level (analysis/soak_looks.report_level, which the caller passes)."""
    margin = margin_of(run)
    if is_soak(run):
        return soak_differences(life_rates(run), base, lambda wl: level_of(1, wl), margin)
    by: dict[tuple, dict[str, list[LifeRate]]] = defaultdict(lambda: defaultdict(list))
    for x in life_rates(run):
        by[(x.server, x.workload, x.thp)][x.allocator].append(x)
    out = []
    for (server, wl, thp), arms in sorted(by.items()):
        if base not in arms:
            continue
        for metric, get in GETTERS.items():
            b = {x.repeat: get(x) for x in arms[base] if get(x) is not None}
            if not b:
                continue
            for alloc, lives in arms.items():
                if alloc == base:
                    continue
                a = {x.repeat: get(x) for x in lives if get(x) is not None}
                shared = len(set(a) & set(b))
                if not shared:
                    continue
                d = paired_difference(a, b, level_of(shared), margin)
                if d is not None and shared < MIN_PAIRS:
                    # one pair's interval is its two fits' own: how sure each life's trend is,
                    # not how much lives differ (which rounds measure); a soak's one life per
                    # arm is judged as such above
                    d = replace(d, verdict=UNDECIDED)
                if d is not None:
                    out.append(((server, wl, thp, alloc), metric, d))
    return out
