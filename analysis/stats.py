"""The statistics behind every interval and verdict, chosen for the few samples a benchmark has.

Per point (one workload, allocator, THP mode and thread count, repeated N times):
  the median of the N repeats, with the exact distribution-free (order-statistic) confidence
  interval for the median: the interval between the k-th smallest and k-th largest repeat, with k
  as large as keeps the coverage at or above 95%. It needs no distribution assumption and no random
  seed. With fewer than 6 repeats no such pair reaches 95%: the interval is then [min, max] and its
  real coverage (75% for 3 repeats, 87.5% for 4, 93.75% for 5) is reported alongside, never
  passed off as 95%.
  A point is unstable when its spread (max - min) exceeds 10% of its median.

Comparing two runs (NEW against BASE):
  throughput is compared on a log scale: the ratio of geometric means NEW/BASE with Welch's t
  interval on the log values (throughput is positive and its noise multiplicative; Welch does not
  assume equal variances; the t quantile keeps small samples honest, unlike a bootstrap, whose
  intervals are too narrow with 2-5 values). The samples are independent server lives (repeats)
  when each side has at least two; otherwise the per-interval throughput of the single run,
  grouped into contiguous batch means to weaken their autocorrelation — evidence about noise
  within one server life only, so the verdict is flagged as weak.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

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
    median: float
    lo: float
    hi: float
    coverage: float  # the interval's exact coverage probability (0 for a single value)
    n: int
    spread_pct: float = 0.0  # (max - min) of all repeats, as % of the median

    @property
    def unstable(self) -> bool:
        return self.spread_pct > UNSTABLE_SPREAD_PCT


def _binom_cdf_half(k: int, n: int) -> float:
    """P(X <= k) for X ~ Binomial(n, 1/2)."""
    return sum(math.comb(n, i) for i in range(0, k + 1)) / 2.0**n


def median_ci(values: Sequence[float], level: float = CONFIDENCE) -> MedianCI:
    """Median and its exact order-statistic confidence interval (see the module docstring)."""
    xs = sorted(float(v) for v in values)
    n = len(xs)
    if n == 0:
        raise ValueError("median_ci of no values")
    med = median(xs)
    if n == 1:
        return MedianCI(med, xs[0], xs[0], 0.0, 1)
    best_k, best_cov = 1, 1.0 - 2.0 * _binom_cdf_half(0, n)
    for k in range(2, n // 2 + 1):
        cov = 1.0 - 2.0 * _binom_cdf_half(k - 1, n)
        if cov < level:
            break
        best_k, best_cov = k, cov
    return MedianCI(med, xs[best_k - 1], xs[n - best_k], best_cov, n, spread_pct(xs))


# -- Student's t --------------------------------------------------------------------------------
def _t_cdf_positive(x: float, df: float) -> float:
    """P(0 <= T <= x) for x >= 0, by Simpson integration of the density (smooth; 4001 nodes)."""
    if x <= 0:
        return 0.0
    log_c = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    t = np.linspace(0.0, x, 4001)
    pdf = np.exp(log_c - (df + 1) / 2 * np.log1p(t * t / df))
    h = x / 4000
    return float(h / 3 * (pdf[0] + pdf[-1] + 4 * pdf[1:-1:2].sum() + 2 * pdf[2:-1:2].sum()))


def t_quantile(p: float, df: float) -> float:
    """The p-quantile (p > 0.5) of Student's t with df degrees of freedom (df may be fractional)."""
    if not 0.5 < p < 1:
        raise ValueError("t_quantile needs 0.5 < p < 1")
    if math.isinf(df) or df > 1e6:
        df = 1e6
    target = p - 0.5
    lo, hi = 0.0, 1.0
    while _t_cdf_positive(hi, df) < target:
        hi *= 2
    for _ in range(60):
        mid = (lo + hi) / 2
        if _t_cdf_positive(mid, df) < target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


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
    """(difference of means NEW - BASE, half-width of its Welch t interval)."""
    b, n = np.asarray(base, dtype=float), np.asarray(new, dtype=float)
    if len(b) < 2 or len(n) < 2:
        raise ValueError("Welch's interval needs at least two values per side")
    vb, vn = b.var(ddof=1) / len(b), n.var(ddof=1) / len(n)
    se = math.sqrt(vb + vn)
    diff = float(n.mean() - b.mean())
    if se == 0:
        return diff, 0.0
    df = (vb + vn) ** 2 / (vb**2 / (len(b) - 1) + vn**2 / (len(n) - 1))
    return diff, t_quantile(0.5 + level / 2, df) * se


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
    """Contiguous batch means of a time series (consecutive intervals are correlated; batch means
    of enough intervals are nearly independent). A short series is returned as it is."""
    xs = [float(v) for v in series]
    if len(xs) < 2 * batches:
        return xs
    size = len(xs) // batches
    start = len(xs) - size * batches  # drop the oldest remainder: the start of a level is ramp-up
    return [float(np.mean(xs[start + i * size : start + (i + 1) * size])) for i in range(batches)]
