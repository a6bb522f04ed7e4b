"""The statistics behind every interval and verdict, chosen for the few samples a benchmark has.

One model throughout: throughput, latency and per-operation costs are positive and their noise is
multiplicative, so they are treated on a log scale (log-normal). Under that model the population
median equals the geometric mean exp(mu), and Student's t interval on the log values is a 95%
confidence interval for it — valid from two values on, widening honestly for few (t = 12.7 for 2
values, 4.3 for 3). The report and `compare` use this same interval, so a point's interval in the
report and the intervals behind a compare verdict agree in method and coverage.

Per point (one workload, allocator, THP mode and thread count, repeated N times):
  the median of the N repeats, shown with the 95% t interval above (log scale; on the linear scale
  when a value is zero or negative). Exact distribution-free intervals for a median cannot reach
  95% with fewer than 6 values ([min, max] of 3 repeats covers 75%), which is why they are not used.
  A point is unstable when its spread (max - min) exceeds 10% of its median: the report says so.

Comparing two runs (NEW against BASE):
  the ratio of geometric means NEW/BASE with Welch's t interval on the log values (Welch does not
  assume equal variances; a bootstrap's intervals are too narrow with 2-5 values). The samples are
  independent server lives (repeats) when each side has at least two; otherwise the per-interval
  throughput of the single run, grouped into contiguous batch means to weaken their
  autocorrelation — evidence about noise within one server life only, so analysis/compare.py
  marks such verdicts weak and does not fail on them by default.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy import stats as scipy_stats

CONFIDENCE = 0.95
UNSTABLE_SPREAD_PCT = 10.0
BATCHES = 5  # batch means for interval samples: enough for a t interval, few enough to decorrelate


def median(values: Sequence[float]) -> float:
    return float(np.median(np.asarray(values, dtype=float)))


def spread_pct(values: Sequence[float]) -> float:
    """(max - min) as a percentage of the median; 0 for a single value."""
    if len(values) < 2:
        return 0.0
    med = median(values)
    if med == 0:
        return 0.0 if max(values) == min(values) else math.inf
    return (max(values) - min(values)) / abs(med) * 100.0


@dataclass(frozen=True)
class MedianCI:
    """A point over its repeats: the median, and the 95% interval of the module docstring."""

    median: float
    lo: float
    hi: float
    coverage: float  # nominal coverage of [lo, hi] (0 for a single value: no interval)
    n: int
    spread_pct: float = 0.0  # (max - min) of all repeats, as % of the median
    method: str = ""  # how [lo, hi] was computed, for the report

    @property
    def unstable(self) -> bool:
        return self.spread_pct > UNSTABLE_SPREAD_PCT


def median_ci(values: Sequence[float], level: float = CONFIDENCE) -> MedianCI:
    """Median and the 95% t interval for the typical value (see the module docstring)."""
    xs = [float(v) for v in values]
    n = len(xs)
    if n == 0:
        raise ValueError("median_ci of no values")
    med = median(xs)
    if n == 1:
        return MedianCI(med, xs[0], xs[0], 0.0, 1)
    if min(xs) > 0:
        logs = np.log(xs)
        centre, half = float(logs.mean()), _t_half(logs, level)
        lo, hi = math.exp(centre - half), math.exp(centre + half)
        method = "Student t on log values"
    else:
        arr = np.asarray(xs)
        centre, half = float(arr.mean()), _t_half(arr, level)
        lo, hi = centre - half, centre + half
        method = "Student t"
    return MedianCI(med, lo, hi, level, n, spread_pct(xs), method)


def _t_half(xs: np.ndarray, level: float) -> float:
    """Half-width of the one-sample t interval of the mean of xs (n >= 2)."""
    return mean_interval(xs, level)[1]


def mean_interval(xs: Sequence[float], level: float = CONFIDENCE) -> tuple[float, float]:
    """(mean, half-width of its one-sample Student t interval) of xs (n >= 2): scipy's
    t.interval; 0 for values that do not vary (scipy's would be NaN)."""
    arr = np.asarray(xs, dtype=float)
    if len(arr) < 2:
        raise ValueError("a t interval needs at least two values")
    mean = float(arr.mean())
    sem = float(scipy_stats.sem(arr))
    if sem == 0:
        return mean, 0.0
    lo, hi = scipy_stats.t.interval(level, len(arr) - 1, loc=mean, scale=sem)
    return mean, float(hi - lo) / 2


# -- Student's t --------------------------------------------------------------------------------
@lru_cache(maxsize=256)  # the report asks for the same few (p, df) for every point
def t_quantile(p: float, df: float) -> float:
    """The p-quantile (p > 0.5) of Student's t with df degrees of freedom (df may be fractional:
    Welch's). scipy's; the Simpson integration this replaced agreed to 3e-10 relative."""
    if not 0.5 < p < 1:
        raise ValueError("t_quantile needs 0.5 < p < 1")
    return float(scipy_stats.t.ppf(p, df))


@dataclass(frozen=True)
class Estimate:
    """A NEW vs BASE effect with its confidence interval (a ratio, or a difference)."""

    value: float
    lo: float
    hi: float
    n_base: int
    n_new: int

    def excludes(self, null: float) -> bool:
        """Significant at the interval's level: the null value lies outside the interval."""
        return self.hi < null or self.lo > null


def _welch(base: Sequence[float], new: Sequence[float], level: float) -> tuple[float, float]:
    """(difference of means NEW - BASE, half-width of its Welch t interval): scipy's ttest_ind
    without equal variances; 0 when neither side varies (scipy's would be NaN)."""
    b, n = np.asarray(base, dtype=float), np.asarray(new, dtype=float)
    if len(b) < 2 or len(n) < 2:
        raise ValueError("Welch's interval needs at least two values per side")
    diff = float(n.mean() - b.mean())
    if b.var(ddof=1) == 0 and n.var(ddof=1) == 0:
        return diff, 0.0
    ci = scipy_stats.ttest_ind(n, b, equal_var=False).confidence_interval(level)
    return diff, float(ci.high - ci.low) / 2


def ratio_ci(base: Sequence[float], new: Sequence[float], level: float = CONFIDENCE) -> Estimate:
    """Ratio of geometric means NEW/BASE and Welch's t interval on the log scale (values > 0)."""
    if min(base) <= 0 or min(new) <= 0:
        raise ValueError("ratio_ci needs positive values")
    d, half = _welch(np.log(base), np.log(new), level)
    return Estimate(math.exp(d), math.exp(d - half), math.exp(d + half), len(base), len(new))


def diff_ci(base: Sequence[float], new: Sequence[float], level: float = CONFIDENCE) -> Estimate:
    """Difference of means NEW - BASE with Welch's t interval."""
    d, half = _welch(base, new, level)
    return Estimate(d, d - half, d + half, len(base), len(new))


def batch_means(series: Sequence[float], batches: int = BATCHES) -> list[float]:
    """Contiguous batch means of a time series (consecutive intervals are correlated; means of
    batches of several intervals are nearly independent). A series too short for `batches` batches
    of at least two intervals gives [] — its raw intervals would make an interval far too narrow."""
    xs = [float(v) for v in series]
    if len(xs) < 2 * batches:
        return []
    size = len(xs) // batches
    start = len(xs) - size * batches  # drop the oldest remainder: the start of a level is ramp-up
    return [float(np.mean(xs[start + i * size : start + (i + 1) * size])) for i in range(batches)]
