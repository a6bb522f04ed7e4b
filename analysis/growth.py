"""Growth per cycle and release after a burst: the fragmentation scenarios' memory, one value per
server life and scenario (suites/workloads/fragmentation; results rows with scenario_cycle).

Per life and scenario (a recorded workload: dump, session_churn_tc4, ...), over its cycles in
order:
- growth per cycle: the least-squares slope of RSS at each cycle's end over the LAST HALF of the
  cycles (the first half is warm-up: caches, the buffer pool, per-thread state filling), kB per
  cycle, with its 95% interval within the life (Student t, n - 2 degrees of freedom; none with
  fewer than 3 cycles in the half);
- held per cycle: the same slope of alloc_held_resident_kb (the heap's resident part minus the
  allocator's in use): memory the allocator keeps and the server does not use; and of the
  server's own account (server_memory_used_kb): what the server itself says it grew by;
- levelled off / still growing: analysis/growth_rate.py decides it, in MB per hour, by a test
  with its own interval;
- a spike's release: the median over the life's bursts of burst_returned and burst_return_s
  (rundir.derive.scenario; a burst that never came back within 10% counts as infinitely long).

Growth's verdicts are in MB per hour, from every cycle of a life, as differences from the
baseline (analysis/growth_rate.py); the last-half slopes here are per-life figures only. The
one verdict registered here (analysis/verdicts.py; paired by round against the
baseline, as every other metric): burst_returned, 1 + the difference in the share of the burst
returned (1.30 = 30 points more of the burst came back; higher is better).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

from analysis.memory import complete_cells
from analysis.metrics import BURST_RETURNED
from analysis.stats import median, t_quantile
from rundir.read import Run

METRICS = (BURST_RETURNED,)
# A scenario with fewer cycles than this has no growth figure (the spike: its release instead)
MIN_CYCLES = 4


@dataclass(frozen=True)
class Slope:
    kb: float  # per cycle
    lo: float | None  # 95% interval within the life (None: fewer than 3 points)
    hi: float | None
    points: int


def slope(ys: list[float]) -> Slope | None:
    """Least-squares slope of ys against 0..n-1, with its 95% interval (n >= 3)."""
    n = len(ys)
    if n < 2:
        return None
    xs = list(range(n))
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    if n < 3:
        return Slope(b, None, None, n)
    resid = sum((y - (my + b * (x - mx))) ** 2 for x, y in zip(xs, ys, strict=True))
    se = math.sqrt(resid / (n - 2) / sxx)
    half = t_quantile(0.975, n - 2) * se
    return Slope(b, b - half, b + half, n)


@dataclass(frozen=True)
class LifeGrowth:
    """One server life's figures for one scenario (a recorded workload)."""

    cell: str
    server: str
    allocator: str
    thp: str
    repeat: int
    workload: str
    cycles: int
    half: int  # cycles in the fit (the last half)
    rss: list[float | None]  # RSS at each cycle's end, kB
    growth: Slope | None  # RSS, kB per cycle, over the last half
    held: Slope | None  # alloc_held_resident_kb
    server_growth: Slope | None  # server_memory_used_kb
    rss_end_kb: float | None
    tps: float | None  # median over the cycles
    held_kb: list[float | None]  # alloc_held_resident_kb at each cycle's end
    account_kb: list[float | None]  # server_memory_used_kb at each cycle's end
    returned: float | None  # a spike's: median burst_returned
    return_s: float | None  # median burst_return_s; inf: most bursts never came back within 10%

    def over_scenario(self, values: list[float | None]) -> float | None:
        """Last cycle's value minus the first's (kB): what the whole scenario added."""
        if not values or values[0] is None or values[-1] is None:
            return None
        return values[-1] - values[0]


def _series(rows: list[dict], col: str) -> list[float] | None:
    vals = [r.get(col) for r in rows]
    return None if any(v is None for v in vals) else [float(v) for v in vals]


def _fit(rows: list[dict], col: str) -> Slope | None:
    ys = _series(rows, col)
    return slope(ys) if ys is not None else None


def scenario_rows(run: Run) -> dict[tuple[str, str], list[dict]]:
    """(cell, workload) -> its cycles' rows in cycle order, for complete cells only."""
    out: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for cid, rows in complete_cells(run).items():
        for r in rows:
            if r.get("scenario_cycle") is not None:
                out[(cid, r["workload"])].append(r)
    for v in out.values():
        v.sort(key=lambda r: r["scenario_cycle"])
    return dict(out)


def life_growth(run: Run) -> list[LifeGrowth]:
    out = []
    for (cid, wl), rows in scenario_rows(run).items():
        if run.is_standin(cid):
            continue
        n = len(rows)
        half = rows[n // 2 :] if n >= MIN_CYCLES else []
        returned = [r["burst_returned"] for r in rows if r.get("burst_returned") is not None]
        # a burst whose RSS never came within 10% of the level before it counts as never
        # (inf), not as missing: the median of the others would say it came back
        back = [
            math.inf if r.get("burst_return_s") is None else r["burst_return_s"]
            for r in rows
            if r.get("burst_returned") is not None or r.get("burst_return_s") is not None
        ]
        tps = [r["tps"] for r in rows if r.get("tps")]
        first = rows[0]
        out.append(
            LifeGrowth(
                cell=cid,
                server=first["server"],
                allocator=first["allocator"],
                thp=first["thp"],
                repeat=first.get("repeat") or 1,
                workload=wl,
                cycles=n,
                half=len(half),
                rss=[r.get("rss_end_kb") for r in rows],
                growth=_fit(half, "rss_end_kb") if half else None,
                held=_fit(half, "alloc_held_resident_kb") if half else None,
                server_growth=_fit(half, "server_memory_used_kb") if half else None,
                rss_end_kb=rows[-1].get("rss_end_kb"),
                tps=median(tps) if tps else None,
                held_kb=[r.get("alloc_held_resident_kb") for r in rows],
                account_kb=[r.get("server_memory_used_kb") for r in rows],
                returned=median(returned) if returned else None,
                return_s=median(back) if back else None,
            )
        )
    return out


@dataclass(frozen=True)
class VerdictPoint:
    """What analysis/verdicts.py judges for one metric at one point: allocator -> round -> the
    life's value; `norm` as analysis/judge.py takes it (the metric's scale and direction are its
    entry in analysis/metrics.py)."""

    metric: str
    server: str
    workload: str
    thp: str
    values: dict[str, dict[int, float]]
    norm: float | None


def verdict_points(run: Run, base: str) -> list[VerdictPoint]:
    lives = life_growth(run)
    by: dict[tuple, list[LifeGrowth]] = defaultdict(list)
    for g in lives:
        by[(g.server, g.workload, g.thp)].append(g)
    out = []
    for (server, wl, thp), gs in sorted(by.items()):
        values: dict[str, dict[int, float]] = defaultdict(dict)
        for g in gs:
            if g.returned is not None:
                values[g.allocator][g.repeat] = g.returned
        if values.get(base):
            out.append(VerdictPoint(BURST_RETURNED, server, wl, thp, dict(values), 1.0))
    return out
