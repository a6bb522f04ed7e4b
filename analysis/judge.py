"""The one judge: paired per-round values of one point -> each arm's estimate, interval and verdict.

Every paired verdict of mallocsweep goes through `judge` (the allocator verdicts, the hugepage
settings, the read-while-writing RSS comparison, the fragmentation scenarios) or `judge_scaled`
(the upgrade check, which pairs NEW with BASE itself). The statistics are analysis/sequential.py's
(paired differences to the baseline, Student t at the look's share of the 5%); the metric's scale
and direction come from the metric table (analysis/metrics.py).

The rule for values a scale cannot take, the same everywhere: on a LOG metric a value that is
zero or negative (a level that served nothing, a missing reading recorded as 0) makes the WHOLE
point refused: no arm of it gets a verdict, and `Judged.notice` names the point, the arm, the
round and the value, for the report to show. Dropping the value (or its round) silently would
judge the point on fewer lives than it ran, and a ratio to 0 does not exist. A DIFF metric
without a positive norm is refused the same way.

The result of an arm is a ratio (allocator / baseline on the LOG scale; 1 + difference / norm on
DIFF), its interval at the look's level (NaN without one: fewer than two shared rounds), the
outcome (metrics.BETTER / WORSE / NONE / UNDECIDED, by the metric's direction), the rounds behind
it and that level.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from analysis.metrics import BETTER, LOG, WORSE, Metric
from analysis.sequential import HIGHER, LOWER, Design, block_contrasts, verdict


@dataclass(frozen=True)
class Judgement:
    ratio: float
    lo: float
    hi: float
    verdict: str  # metrics.BETTER / WORSE / NONE / UNDECIDED
    rounds: int
    level: float  # the two-sided confidence level of [lo, hi]


@dataclass(frozen=True)
class Judged:
    """One point judged: arm -> Judgement, or no arm and the notice that says why."""

    arms: dict[str, Judgement] = field(default_factory=dict)
    notice: str | None = None


Values = Mapping[str, Mapping[int, float]]  # arm -> round -> value


def level_at(design: Design, rounds: int) -> float:
    """The two-sided level of a look at `rounds` rounds (its share of the 5%)."""
    return 1 - design.alpha_at(rounds)


def on_scale(metric: Metric, values: Values, where: str) -> tuple[dict | None, str | None]:
    """The values on the metric's scale (logs for LOG), or (None, notice) when one cannot be."""
    if metric.scale != LOG:
        return {a: dict(vs) for a, vs in values.items()}, None
    for a, vs in values.items():
        for r, v in sorted(vs.items()):
            if not v > 0:
                return None, (
                    f"{where}: {metric.text} not judged: {a} measured {v:g} in round {r}, and a "
                    "ratio needs positive values"
                )
    return {a: {r: math.log(v) for r, v in vs.items()} for a, vs in values.items()}, None


def judge(
    metric: Metric,
    values: Values,
    baseline: str,
    design: Design,
    norm: float | None = None,
    where: str = "",
) -> Judged:
    """Every arm of `values` against `baseline` at one point (module docstring). `norm`: a DIFF
    metric's divisor; `where` names the point in a notice."""
    if len(values.get(baseline) or {}) < 2:
        return Judged()
    scaled, notice = on_scale(metric, values, where or "a point")
    if scaled is None:
        return Judged(notice=notice)
    return judge_scaled(metric, scaled, baseline, design, norm, where=where)


def judge_scaled(
    metric: Metric,
    scaled: Values,
    baseline: str,
    design: Design,
    norm: float | Mapping[str, float] | None = None,
    independent: bool = False,
    where: str = "",
) -> Judged:
    """`judge` on values already on the metric's scale (analysis/upgrade.py's NEW - BASE
    differences against an exact 0). `norm` may be one per arm; `independent` as
    sequential.block_contrasts takes it."""
    rounds = len(scaled.get(baseline) or {})
    if rounds < 2:
        return Judged()
    if metric.scale != LOG:
        norms = norm if isinstance(norm, Mapping) else {a: norm for a in scaled}
        bad = sorted(a for a in scaled if a != baseline and not (norms.get(a) or 0) > 0)
        if bad:
            return Judged(
                notice=f"{where or 'a point'}: {metric.text} not judged: no positive baseline "
                f"figure to express the difference of {', '.join(bad)} as a share of"
            )
    level = level_at(design, rounds)
    out: dict[str, Judgement] = {}
    for a, c in block_contrasts(scaled, baseline, 1 - level, independent).items():
        if metric.scale == LOG:
            conv = math.exp
        else:
            n = norms[a]

            def conv(x: float, n=n) -> float:
                return 1 + x / n

        ratio = conv(c.diff)
        if math.isfinite(c.half):
            lo, hi = conv(c.diff - c.half), conv(c.diff + c.half)
        else:
            lo = hi = math.nan
        side = verdict(ratio, lo, hi, design.min_effect_pct)
        out[a] = Judgement(ratio, lo, hi, outcome(metric, side), c.rounds, level)
    return Judged(out)


def outcome(metric: Metric, side: str) -> str:
    """The sequential rule's side of 1 (HIGHER / LOWER / NONE / UNDECIDED) as BETTER or WORSE by
    the metric's direction."""
    if side == HIGHER:
        return BETTER if metric.higher_is_better else WORSE
    if side == LOWER:
        return WORSE if metric.higher_is_better else BETTER
    return side
