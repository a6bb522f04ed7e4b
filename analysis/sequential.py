"""Paired intervals between allocators of one run, and a stopping rule that keeps them honest.

The design: every round runs every allocator once (order balanced, suites/runner/plan.py), so a round is
a block. For one point (workload, THP mode, thread level) let y[a, r] be the log-throughput of
allocator a in round r, and d[a, r] = y[a, r] - y[b, r] its paired difference to the baseline b in
the same round. Drift that hits a whole round alike (a noisy neighbour, the page cache, a load
that changed between rounds) cancels in d. The contrast is mean_r d[a, r]; its variance is
estimated from the spread of the paired differences themselves,

    s_d^2 = sum over arms a, rounds r of (d[a, r] - mean_r d[a, r])^2 / (m (R - 1))

pooled over the m allocators of the point that have every round, and the interval is
mean(d[a]) +- t * s_d / sqrt(R). With one allocator besides the baseline this is exactly the
paired t test.

Why the paired differences and not the residual of the two-way block model y = mu + allocator +
round + e (this module's first version: pooled over all cells, (A - 1)(R - 1) degrees of freedom): the baseline's one life per round
is in EVERY contrast, so a load change that hits the baseline's life and not the others (the
machine quietens or fills up during that one life, or the run's very first life is off) moves
every allocator's ratio, the A/A arm's included, by the same amount. The block model's residual
spreads that one life's deviation over all A x R cells and under-estimates the variance of what
the contrasts average: simulated with a load change inside rounds or the first life 30% off, its
A/A arm excluded 1 in ~6% of runs at a stated 5% (analysis/simulate.py's scenarios). The spread
of d sees the baseline's deviation in full, in every arm's differences, so such a life widens
the intervals instead of shifting them past 1.

Degrees of freedom. The m arms' differences share the baseline's noise (correlation 1/2 between
arms under a common variance), so s_d^2 is worth fewer than m (R - 1) independent squares. Its
exact law under the model is sigma^2 [(m + 1) chi2(R - 1) + chi2((m - 1)(R - 1))] / (m (R - 1)),
and Satterthwaite's matching of the first two moments gives

    df = 4 m (R - 1) / (m + 3)

(m = 1: R - 1, the paired t; the quick suite's m = 6 over 3 rounds: 5.3, against 2 for one arm
alone and 12 for the block model's pooled residual, which assumed the baseline was no noisier than
anyone else). The mean differences are independent of s_d^2 under the model, so the interval is a
Student t interval with that df; tests/unit/test_sequential.py checks its coverage by simulation,
with iid noise and with load changes between and inside rounds.

Sequential looks. A budget adds rounds while points are undecided, and looks at the data after
each round from the first planned look (the suite's `repeat`) to the planned maximum (from the
budget, fixed before the run starts). Testing each look at 5% would inflate false positives
(five looks: ~14% for an A/A pair). Instead the 5% is *spent* across the K planned looks with the
Lan-DeMets Pocock-type spending function

    spent(k) = alpha * ln(1 + (e - 1) * k / K)

and look k tests at its increment alpha_k = spent(k) - spent(k - 1). By the union bound the
chance that ANY look's interval misses the true ratio is at most sum(alpha_k) = alpha, whatever
the correlation between looks and whatever rule decides to stop: the intervals form a 95%
confidence sequence over the planned looks, so the interval at the look where the run stopped is
a valid 95% interval (conservative: an exact group-sequential boundary would be narrower, but
needs the joint distribution of the looks, which t statistics with few degrees of freedom do not
give in closed form). A fixed design is the special case K = 1 (alpha_1 = 5%).
tests/unit/test_sequential.py checks the false-positive rate by simulation, looks included.

Verdicts (m = the minimum effect, 5% by default; ratios are allocator / baseline). The rule says
on which side of 1 a ratio lies; analysis/judge.py turns that into better or worse by the metric's
direction (analysis/metrics.py), so a memory verdict is never called "faster":
  higher     the interval lies above 1 and the ratio is at least 1 + m
  lower      the interval lies below 1 and the ratio is at most 1 / (1 + m)
  none       the whole interval lies within [1 / (1 + m), 1 + m]: any difference is smaller than
             the minimum effect (also a significant but tiny one)
  undecided  anything else: the interval still admits a difference beyond m in some direction,
             or a significant difference whose size is not yet clear; more rounds would tell.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy import stats as scipy_stats

from analysis.metrics import NONE, UNDECIDED
from analysis.stats import t_quantile
from rundir.format import DEFAULT_MIN_EFFECT_PCT

ALPHA = 0.05
MIN_EFFECT_PCT = DEFAULT_MIN_EFFECT_PCT
# The rule's sides of 1 (NONE and UNDECIDED are analysis/metrics.py's outcomes, shared).
HIGHER, LOWER = "higher", "lower"
SPENDING = "Lan-DeMets Pocock-type alpha spending over the planned looks (union bound)"


def spent(k: int, looks: int, alpha: float = ALPHA) -> float:
    """Alpha spent by the end of look k of `looks` (Pocock-type spending function)."""
    if looks < 1 or k < 0:
        raise ValueError("spent() needs looks >= 1 and k >= 0")
    t = min(k, looks) / looks
    return alpha * math.log(1 + (math.e - 1) * t)


def look_alpha(k: int, looks: int, alpha: float = ALPHA) -> float:
    """The two-sided level at which look k (1-based) of `looks` is tested."""
    if not 1 <= k <= looks:
        raise ValueError(f"look {k} is outside the planned 1..{looks}")
    return spent(k, looks, alpha) - spent(k - 1, looks, alpha)


@dataclass(frozen=True)
class Design:
    """What was planned before the run started: the first look, the most rounds, the rule."""

    first_look: int  # rounds at the first look (the suite's repeat, >= 1)
    max_rounds: int  # rounds at the last planned look
    alpha: float = ALPHA
    min_effect_pct: float = MIN_EFFECT_PCT

    @property
    def looks(self) -> int:
        return self.max_rounds - self.first_look + 1

    def look_of(self, rounds: int) -> int:
        """The look a result with `rounds` rounds is (an interrupted run before its first look is
        judged as the first look: it can only be less certain, never more)."""
        return min(max(rounds - self.first_look + 1, 1), self.looks)

    def alpha_at(self, rounds: int) -> float:
        return look_alpha(self.look_of(rounds), self.looks, self.alpha)

    def shared_by(self, points: int) -> Design:
        """The design of one of `points` points that share this design's alpha (Bonferroni): the
        chance that any of them is called wrongly, at any look, stays at most `alpha`."""
        return self.share(1.0, float(max(points, 1)))

    def share(self, weight: float, total: float) -> Design:
        """The design of a point of `weight` among points whose weights sum to `total` (weighted
        Bonferroni: alpha x weight / total each, so the shares still sum to `alpha`). Valid when
        the weights are fixed without looking at the differences the points test."""
        if weight <= 0 or total < weight:
            raise ValueError(f"share({weight}, {total}): expected 0 < weight <= total")
        return replace(self, alpha=self.alpha * weight / total)

    def to_dict(self) -> dict:
        return {
            "first_look": self.first_look,
            "max_rounds": self.max_rounds,
            "alpha": self.alpha,
            "min_effect_pct": self.min_effect_pct,
            "method": SPENDING,
        }


def plan_max_rounds(first_look: int, budget_s: float, round_s: float, cap: int) -> int:
    """The most rounds a budget allows at the estimated round time (never fewer than the first
    look, never more than `cap`): fixed before the run, as the spending needs."""
    if budget_s <= 0 or round_s <= 0:
        return first_look
    return max(first_look, min(cap, int(budget_s // round_s)))


@dataclass(frozen=True)
class Contrast:
    """One allocator against the baseline at one point, on the log (or additive) scale."""

    diff: float  # mean difference allocator - baseline
    half: float  # half-width of its interval at the look's level (inf: no interval)
    rounds: int
    df: float  # degrees of freedom of its t interval (fractional: Satterthwaite's, see above)


def block_contrasts(
    values: Mapping[str, Mapping[int, float]],
    baseline: str,
    level: float,
    independent: bool = False,
) -> dict[str, Contrast]:
    """Contrasts of every allocator with `baseline` from paired differences (module docstring).

    `values[allocator][round]` are the (already log-transformed, or additive) values. The rounds
    are those the baseline has; allocators with every one of them share one pooled variance of
    their paired differences; an allocator that misses some (a failed cell) is paired with the
    baseline alone over the rounds both have. Fewer than 2 shared rounds: no interval
    (half = inf).

    `independent`: the arms' differences share no noise, because the baseline is an exact
    constant (analysis/upgrade.py passes each allocator's NEW - BASE differences, the baseline
    0): the pooled variance then has m (R - 1) degrees of freedom, not Satterthwaite's."""
    base = values.get(baseline) or {}
    rounds = sorted(base)
    full = [a for a in values if a != baseline and all(r in values[a] for r in rounds)]
    out: dict[str, Contrast] = {}
    if full and len(rounds) >= 2:
        arms = [baseline, *full]
        y = np.array([[values[a][r] for r in rounds] for a in arms], dtype=float)
        out.update(_paired(y, arms, level, independent))
    elif full:
        for a in full:
            out[a] = Contrast(values[a][rounds[0]] - base[rounds[0]], math.inf, len(rounds), 0)
    for a in values:
        if a == baseline or a in out:
            continue
        shared = sorted(set(values[a]) & set(rounds))
        if len(shared) >= 2:
            y = np.array([[base[r] for r in shared], [values[a][r] for r in shared]])
            out[a] = _paired(y, [baseline, a], level, independent)[a]
        elif shared:
            out[a] = Contrast(values[a][shared[0]] - base[shared[0]], math.inf, 1, 0)
    return out


def paired_df(arms: int, rounds: int) -> float:
    """Satterthwaite degrees of freedom of the pooled variance of `arms` allocators' paired
    differences to one baseline over `rounds` rounds (module docstring)."""
    return 4 * arms * (rounds - 1) / (arms + 3)


def half_width(sigma: float, arms: int, rounds: int, alpha: float) -> float:
    """The half-width (log scale) of a paired interval over `rounds` rounds at noise `sigma` per
    server life (a difference's sd is sigma x sqrt 2), pooled over `arms` arms, one look at
    two-sided `alpha` (module docstring)."""
    if rounds < 2:
        return math.inf
    t = t_quantile(1 - alpha / 2, paired_df(max(arms, 1), rounds))
    return t * sigma * math.sqrt(2) / math.sqrt(rounds)


def rounds_for(
    target_pct: float, sigma: float, arms: int, alpha: float, most: int = 10_000
) -> int | None:
    """The fewest rounds whose interval (half_width) is at most +-`target_pct`% at this noise;
    None beyond `most`. A forecast from a measured noise, not a promise: the next rounds' noise
    is the machine's."""
    goal = math.log(1 + target_pct / 100)
    if sigma <= 0:
        return 2
    if half_width(sigma, arms, most, alpha) > goal:
        return None
    lo, hi = 2, most  # half_width falls with the rounds: the first that meets the goal
    while lo < hi:
        mid = (lo + hi) // 2
        if half_width(sigma, arms, mid, alpha) <= goal:
            hi = mid
        else:
            lo = mid + 1
    return lo


def arms_df(arms: int, rounds: int, independent: bool = False) -> float:
    """Degrees of freedom of the pooled variance of `arms` arms' differences over `rounds`:
    Satterthwaite's when they share the baseline's noise (paired_df), m (R - 1) when not."""
    return arms * (rounds - 1) if independent else paired_df(arms, rounds)


def _paired(
    y: np.ndarray, arms: Sequence[str], level: float, independent: bool = False
) -> dict[str, Contrast]:
    """y[arm, round], arms[0] the baseline: each arm's mean paired difference, with the spread of
    the paired differences pooled over the arms, except for an arm far noisier than the others
    (its_own_spread), which is judged on its own differences alone (the paired t test)."""
    n_rounds = y.shape[1]
    d = y[1:] - y[0]
    m = d.shape[0]
    squares = ((d - d.mean(axis=1, keepdims=True)) ** 2).sum(axis=1)
    s2 = float(squares.sum()) / (m * (n_rounds - 1))
    out = {}
    for i, a in enumerate(arms[1:]):
        own = its_own_spread(squares, i, n_rounds, independent)
        var, df = (
            (own, n_rounds - 1) if own is not None else (s2, arms_df(m, n_rounds, independent))
        )
        se = math.sqrt(var / n_rounds)
        q = t_quantile(1 - level / 2, df) if se > 0 else 0.0
        out[a] = Contrast(float(d[i].mean()), q * se, n_rounds, df)
    return out


HETEROGENEITY_P = 0.99  # the F quantile past which an arm is noisier than the others


def its_own_spread(
    squares: np.ndarray, i: int, rounds: int, independent: bool = False
) -> float | None:
    """Arm i's own variance of paired differences when it is far larger than the others' pooled
    one (beyond the 99% point of F(R - 1, their Satterthwaite df)), else None.

    Pooling assumes every arm's differences are equally noisy. An arm with a stalled life of its
    own (measured here: one life at a third of the others' throughput) breaks that: pooled with
    five quiet arms, its own spread counts for a sixth, and its mean, dragged by that one life,
    looks significant. Judged on its own differences, with R - 1 degrees of freedom, it is as
    uncertain as it is. The switch only ever widens an interval (its variance is then far above
    the pooled one, and its t quantile above the pooled one's), so the pooled design's
    false-positive rate remains an upper bound."""
    m = len(squares)
    if m < 2 or rounds < 2:
        return None
    own = float(squares[i]) / (rounds - 1)
    others = (float(squares.sum()) - float(squares[i])) / ((m - 1) * (rounds - 1))
    if own <= 0:
        return None
    if others <= 0:
        return own
    crit = float(
        scipy_stats.f.ppf(HETEROGENEITY_P, rounds - 1, arms_df(m - 1, rounds, independent))
    )
    return own if own / others > crit else None


def verdict(ratio: float, lo: float, hi: float, min_effect_pct: float) -> str:
    """higher / lower / none / undecided for a ratio and its interval (module docstring)."""
    up = 1 + min_effect_pct / 100
    down = 1 / up
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return UNDECIDED
    if lo > 1 and ratio >= up:
        return HIGHER
    if hi < 1 and ratio <= down:
        return LOWER
    if lo >= down and hi <= up:
        return NONE
    return UNDECIDED
