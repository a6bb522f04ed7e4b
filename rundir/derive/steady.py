"""Where a level's ramp ends: the steady-state rule over its per-second interval reports.

A level's first seconds are not its steady rate: at 256 threads on 2 cores the first ~4 s of an
OLTP_RO level ran 18% below the steady rate, with twice the spread between lives. The measured
window (rundir.derive.window) therefore starts where this rule says the ramp ended.

The rule is MSER (the Marginal Standard Error Rule; White 1997, "An effective truncation
heuristic for bias reduction in simulation output"; Hoad, Robinson & Davies 2010 rank it first
among 40+ warm-up methods). For each candidate truncation d it scores the rest of the series by
its squared standard error,

    MSER(d) = sum_{i>=d} (y_i - mean_{i>=d})^2 / (n - d)^2,

and truncates where that is smallest: dropping a ramp lowers the spread faster than it loses
observations; dropping steady data only loses observations. Why MSER and not a slope test:

- it has no threshold to tune (a slope test needs a significance level and a window length, and
  on 1-second reports that differ 5-10% from second to second its answer moves with both);
- it says where the ramp ends, not only whether there is one;
- its own failure sign is the flag we need: a minimum at the end of the candidates (half the
  series) means the series is still moving (a drift, a ramp longer than the level): "not settled".

Batch size: MSER-5 (batches of five reports) is the usual form for long simulation runs, where
single observations are noisy. Our levels are seconds long and each 1-second report already
averages thousands of queries, so batches of five would leave three or four points in a level:
the batch size here is one report (MSER proper). `MIN_REPORTS` below that, the rule does not judge.

Pure: no I/O; rundir.derive.levels calls it on every level's recorded reports, so `report
--rederive` applies it to runs recorded before it existed.
"""

from __future__ import annotations

from dataclasses import dataclass

# Fewer reports than this inside the load: MSER cannot tell a ramp from noise (its score at the
# last candidates rests on one or two values); the level is measured whole and not judged.
MIN_REPORTS = 4


@dataclass(frozen=True)
class Steady:
    """The rule's answer for one series of interval rates."""

    drop: int  # leading reports that are ramp (0: the series is steady from its start)
    settled: bool  # False: MSER's minimum fell in the second half (still moving)


def mser_truncation(rates: list[float]) -> Steady | None:
    """MSER over `rates` (one value per interval report, in order); None below MIN_REPORTS.

    The candidates are d = 0 .. n//2 (the usual restriction: truncating more than half leaves
    too little to measure, and MSER's last candidates rest on two or three values whose spread is
    small by chance); ties go to the smallest d (drop no more than the rule needs). Settled when
    the minimum is inside that range, not at its end: a score still falling at d = n//2 means the
    series kept moving through its first half (a drift, a ramp as long as the level). Then the
    window keeps the later half, and the flag says it is not known to be steady.
    """
    n = len(rates)
    if n < MIN_REPORTS:
        return None
    last = n // 2
    best_d, best = 0, float("inf")
    # Suffix sums make each candidate O(1): sum and sum of squares of rates[d:].
    s = s2 = 0.0
    scores = [0.0] * n
    for d in range(n - 1, -1, -1):
        s += rates[d]
        s2 += rates[d] * rates[d]
        m = n - d
        scores[d] = max(s2 - s * s / m, 0.0) / (m * m)
    for d in range(last + 1):
        # Relative tolerance: equal scores up to rounding are a tie (keep the smaller d).
        if scores[d] < best * (1 - 1e-9):
            best_d, best = d, scores[d]
    return Steady(best_d, best_d < last)


def steady_columns(steady: Steady | None, times: list[float]) -> dict:
    """The level's STEADY_COLUMNS (rundir.format) from the rule's answer over reports ending at
    `times` (workload clock): ramp_s, the seconds from the first report to the window's start
    (0 for a level steady from its first report on); settled 1/0. Empty when not judged."""
    if steady is None or not times:
        return {"ramp_s": None, "settled": None}
    return {
        "ramp_s": round(times[steady.drop] - times[0], 3),
        "settled": 1 if steady.settled else 0,
    }
