"""Verdicts within one run: every allocator against the baseline, per point, with a 95% interval.

A point is (server, workload, THP mode, thread level) for throughput, and (server, THP mode) for
memory (whole server lives). Each allocator's ratio to the baseline (glibc unless the run or
`--baseline` says otherwise) comes from its paired differences to the baseline, round by round
(analysis/sequential.py): drift common to a round cancels, and the interval's spread is that of
the differences themselves, so a baseline life that is off widens every interval. Throughput is compared on the log scale; RSS at
stop too; RSS growth (which can be zero or negative) on the additive scale, expressed as a ratio
1 + (mean difference) / (baseline's mean RSS at stop), as `compare` does.

The interval's level is the look's share of the 5% (analysis/sequential.py): a run with a budget
looked at its data after every round from the first planned look, and each look pays for itself.

One run, one 5%: the throughput points of a run are one family for each arm. Judged each at 95%,
a run's 4 (quick) to 14 (the percona-2012 sweep) points would call an arm that differs nowhere
different somewhere in 19-51% of runs (measured: the A/A arm of the quick suite was called different at one
of its 4 points in 1 of 3 quiet repetitions, docs/measurements/2026-11-28-control.md). So the
points share the 5% (Bonferroni: each at 5% / points, the look's share of it, `level` in
verdicts.csv), and the chance that an arm equal to the baseline is called anything anywhere in
the run stays at most 5%. Memory verdicts are one point per server and THP mode, each its own.

Not every point is tested with the same weight. Where the allocator's exposure settles a point
(analysis/exposure.py: a 5% change would need each allocation call to cost ten times more than
the largest difference measured between the allocators here and the run's arms; a point select
makes about one call per query), its interval left undecided says "cannot matter here" anyway,
so spending a full share of the 5% on it only widens the points where the allocator can matter.
Such a point weighs SETTLED_WEIGHT (a tenth) of a tested one in the family (weighted Bonferroni:
the shares still sum to 5%): the quick suite's two OLTP_RO points are judged at 97.7% each
instead of 98.75%, its two POINT_SELECT points at 99.8%, where only a difference strong enough
to overrule the exposure is still called. The weights come from the exposure (calls per query,
CPU per query, the per-call cost bound), never from the differences the points test.

With one round there is no between-life variation to measure: no verdict is given at all, and
`why_no_verdicts` says so. The A/A arm (the baseline again under another name, `<baseline>-aa`)
measures the noise floor; if it is ever called different, every verdict of the run is doubtful
and `aa_alarm` says so loudly.
"""

from __future__ import annotations

import csv
import io
import math
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from analysis import (
    exposure,
    growth_rate,
    memory,
    point_tables,
    run_design,
    soak_looks,
    steady_rate,
)
from analysis import growth as cycle_growth
from analysis.judge import Judged, judge, level_at
from analysis.lives import by_life
from analysis.metrics import (
    BETTER,
    DECIDED,
    METRICS,
    NONE,
    RSS_GROWTH,
    RSS_STOP,
    THROUGHPUT,
    UNDECIDED,
    WORSE,
)
from analysis.sequential import ALPHA, MIN_EFFECT_PCT, Design, rounds_for
from analysis.stats import median
from rundir.format import AA_SUFFIX  # the A/A arm: the baseline's settings under a second name
from rundir.read import BASELINE_ALLOCATOR, Run

CSV_COLUMNS = [
    "server",
    "workload",
    "allocator",
    "baseline",
    "thp",
    "threads",
    "metric",
    "ratio",
    "lo",
    "hi",
    "verdict",
    "meaning",
    "rounds",
    "level",
    "aa_arm",
    # The server the row's server is compared with: itself for an allocator against the baseline
    # allocator; another server's label for NEW/BASE and the interaction (analysis/upgrade.py)
    "baseline_server",
    # A metric compared as a difference in its own unit (growth in MB/h, analysis/growth_rate.py):
    # allocator - baseline with its interval, and the margin "no difference" means; ratio, lo and
    # hi are empty on such a row (a ratio of two slopes near zero has no meaning)
    "difference",
    "diff_lo",
    "diff_hi",
    "unit",
    "margin",
    # How the run compared its arms (analysis/run_design.py): "solo" or "alternate"
    "design",
]
# A point the exposure settles weighs this much of a tested point in the run's family: small, so
# the points where the allocator can matter keep nearly all of the 5%; not 0, so a difference
# strong enough to overrule the exposure is still called (module docstring).
SETTLED_WEIGHT = 0.1
NO_DIFFERENCE = "no difference beyond the minimum effect"
NOT_YET = "not decided: the interval still allows a difference beyond the minimum effect"


@dataclass(frozen=True)
class Verdict:
    server: str
    workload: str  # "" for memory metrics (a whole server life)
    allocator: str
    baseline: str
    thp: str
    threads: int | None
    metric: str  # a name in analysis/metrics.py's table (THROUGHPUT, RSS_STOP, ...)
    # allocator / baseline and its interval; with a `unit`, the difference allocator - baseline in
    # that unit instead (growth in MB/h: never a ratio)
    ratio: float
    lo: float
    hi: float
    verdict: str  # metrics.BETTER / WORSE / NONE / UNDECIDED
    rounds: int
    level: float  # the look's two-sided confidence level (0.95 for a fixed design)
    aa_arm: bool
    # Another server's label when `server` is compared with it (analysis/upgrade.py); "" when the
    # row compares allocators within `server`.
    baseline_server: str = ""
    unit: str = ""  # "": ratio/lo/hi are a ratio; else a difference in this unit
    margin: float | None = None  # with a unit: "no difference" means within +- this

    @property
    def meaning(self) -> str:
        if self.verdict == NONE and self.unit:
            return f"no difference beyond {self.margin:g} {self.unit}"
        if self.verdict == NONE:
            return NO_DIFFERENCE
        if self.verdict == UNDECIDED and self.unit:
            return (
                "not decided: the interval still allows a difference beyond "
                f"{self.margin:g} {self.unit}"
            )
        if self.verdict == UNDECIDED:
            return NOT_YET
        if self.verdict == exposure.CANNOT_MATTER:
            return exposure.MEANING
        return self.word

    @property
    def word(self) -> str:
        """The verdict in the metric's words, short: "faster", "more memory", "grows less",
        "none", "undecided", "cannot matter here" (the `verdict` field is the outcome: better,
        worse, ..., or exposure's CANNOT_MATTER)."""
        if self.verdict == exposure.CANNOT_MATTER:
            return exposure.WORD
        return METRICS[self.metric].word(self.verdict)

    @property
    def significant(self) -> bool:
        return self.verdict in (BETTER, WORSE)


class Verdicts(list):
    """A run's verdicts, and the notices of the points the judge refused (analysis/judge.py: a
    non-positive value on a ratio's scale), which the report shows beside them."""

    def __init__(self, items=(), notices: list[str] | None = None):
        super().__init__(items)
        self.notices: list[str] = list(notices or [])


def aa_name(baseline: str) -> str:
    return baseline + AA_SUFFIX


def design_of(run: Run, min_effect_pct: float | None = None) -> Design:
    """The design the run recorded (manifest "design"); a run without one was a fixed design
    looked at once, at the rounds it has."""
    d = run.manifest.get("design") or {}
    rounds = max(run.repeats, 1)
    first = int(d.get("first_look") or rounds)
    most = max(int(d.get("max_rounds") or rounds), first)
    effect = min_effect_pct if min_effect_pct is not None else d.get("min_effect_pct")
    return Design(first, most, min_effect_pct=float(effect or MIN_EFFECT_PCT))


def baseline_of(run: Run, baseline: str | None = None) -> str:
    return baseline or (run.manifest.get("design") or {}).get("baseline") or BASELINE_ALLOCATOR


def rounds_of(run: Run) -> int:
    """Rounds with at least one ok level."""
    return len({r["repeat"] for r in run.ok_rows if r.get("repeat") is not None})


SOAK_ONE_LIFE = (
    "a soak has one server life per arm: its growth verdicts (MB/h) are judged within each "
    "arm's long life (a slope with its own autocorrelation-widened error per arm, the "
    "difference's error from both), so they say how these lives grew, not how much another "
    "life of the same arm would differ (measured: two lives of one arm a quarter of an hour "
    "long grew 78 and 133 MB/h, intervals apart; docs/soak.md); throughput and memory-at-stop "
    "verdicts compare lives and stay undecided (no second life to say how much lives differ): "
    "run the suite with --repeat 3 for those"
)


def why_no_verdicts(run: Run, baseline: str | None = None) -> str | None:
    """Why the run cannot give verdicts, or None when it can."""
    base = baseline_of(run, baseline)
    # A soak has one life per arm, by design: its growth verdicts are judged within each arm's
    # long life (analysis/growth_rate.py); what needs rounds says so in its notice.
    if rounds_of(run) < 2 and not growth_rate.is_soak(run):
        return (
            "one round only: a single server life per allocator says nothing about how much a "
            "second life would differ, so no difference is called (run at least 3 rounds: "
            "--repeat 3, or --budget)"
        )
    if base not in run.allocators:
        return f"the baseline {base!r} was not measured in this run (--baseline NAME)"
    return None


def throughput_points(
    run: Run, column: str | None = None
) -> list[tuple[tuple, dict[str, dict[int, float]]]]:
    """((server, workload, thp, threads), allocator -> round -> throughput) for every point: one
    value per server life at each level (a churn life's cycles are one, see analysis/lives.py);
    the round is the life's repeat. `column`: another results column per level instead of the
    workload's throughput (analysis/upgrade.py: lat_p95_ms)."""
    out = []
    for wl in run.workloads:
        metric = column or point_tables.metric_of(run, wl)
        by_point: dict[tuple, dict[str, dict[int, float]]] = defaultdict(lambda: defaultdict(dict))
        # The workload's throughput is its steady rate where the run has one (analysis/steady_rate.py)
        get = (
            steady_rate.throughput_value(run, wl, metric)
            if column is None
            else (lambda r, metric=metric: r.get(metric))
        )
        lives = by_life(
            (r for r in run.ok_rows if r["workload"] == wl and not run.is_standin(r["cell"])),
            lambda r: (r["server"], r["thp"], r["threads"], r["allocator"], r["repeat"] or 1),
            get,
        )
        for (server, thp, th, alloc, rnd), per_cell in lives.items():
            by_point[(server, thp, th)][alloc][rnd] = median(list(per_cell.values()))
        for (server, thp, th), values in sorted(by_point.items(), key=lambda kv: kv[0]):
            out.append(((server, wl, thp, th), values))
    return out


@dataclass(frozen=True)
class PairedNoise:
    """The noise the verdicts of a run saw: the sd of one server life's log-throughput, from the
    spread of the paired differences to the baseline (sd of a difference / sqrt 2), pooled over
    every throughput point; what `make bench` simulates with when a real run is at hand."""

    sigma: float
    points: int
    arms: int  # allocators of a point besides the baseline (most seen)
    rounds: int  # rounds of a point (most seen)


def paired_noise(run: Run, baseline: str | None = None) -> PairedNoise | None:
    """None when the run has no point with the baseline and another allocator over >= 2 rounds."""
    return _pooled_noise(throughput_points(run), baseline_of(run, baseline))


def _pooled_noise(points_values: list, base: str) -> PairedNoise | None:
    """paired_noise over the given (point, allocator -> round -> value) entries."""
    squares, dfs, points, arms, rounds = 0.0, 0, 0, 0, 0
    for _point, values in points_values:
        b = values.get(base) or {}
        for a, vs in values.items():
            shared = sorted(set(vs) & set(b))
            if a == base or len(shared) < 2 or min(vs[r] for r in shared) <= 0:
                continue
            d = [math.log(vs[r]) - math.log(b[r]) for r in shared]
            m = sum(d) / len(d)
            squares += sum((x - m) ** 2 for x in d)
            dfs += len(d) - 1
        n_arms = sum(1 for a in values if a != base and len(set(values[a]) & set(b)) >= 2)
        if n_arms:
            points += 1
            arms, rounds = max(arms, n_arms), max(rounds, len(b))
    if not dfs:
        return None
    return PairedNoise(math.sqrt(squares / dfs / 2), points, arms, rounds)


# The precision the noise table forecasts rounds for: half the minimum effect, at which a
# difference of twice the minimum effect is called and an equal arm is "none" in most runs
FORECAST_PCT = 2.5


@dataclass(frozen=True)
class Forecast:
    """What deciding would take at the noise a run saw: per tested throughput point (a point the
    exposure settles needs no rounds), the rounds for a +-FORECAST_PCT% interval at its share of
    the 5% (None: more than 10,000); the rounds the run has, and its own minutes per round (None
    when its cells' times are not recorded)."""

    rounds: dict[tuple, int | None]
    rounds_now: int
    alpha: float
    minutes_per_round: float | None


def forecast(run: Run, baseline: str | None = None) -> Forecast | None:
    """None when the run measured no paired noise at a tested point (paired_noise)."""
    base = baseline_of(run, baseline)
    points = throughput_points(run)
    weights = family_weights(run, [p for p, _ in points])
    total = sum(weights.values())
    alpha = ALPHA / max(total, 1.0)
    need: dict[tuple, int | None] = {}
    now = 0
    for p, values in points:
        noise = _pooled_noise([(p, values)], base)
        if noise is None or weights[p] < 1.0:
            continue  # no pairs, or settled by the exposure
        need[p] = rounds_for(FORECAST_PCT, noise.sigma, noise.arms, alpha)
        now = max(now, noise.rounds)
    if not need:
        return None
    return Forecast(need, now, alpha, minutes_per_round(run))


def minutes_per_round(run: Run) -> float | None:
    """The median wall time of the run's rounds: from the first start to the last finish of a
    round's cells (solo lives follow each other; alternate ones overlap)."""
    spans: dict[int, list[float]] = defaultdict(list)
    for c in run.manifest.get("cells") or []:
        try:
            t0 = datetime.fromisoformat(c["started_at"]).timestamp()
            t1 = datetime.fromisoformat(c["finished_at"]).timestamp()
        except (KeyError, TypeError, ValueError):
            continue
        spans[c.get("round", c.get("repeat", 0))] += [t0, t1]
    rounds = [max(v) - min(v) for v in spans.values() if v]
    return float(np.median(rounds)) / 60 if rounds else None


def run_verdicts(
    run: Run, baseline: str | None = None, min_effect_pct: float | None = None
) -> Verdicts:
    """Every allocator against the baseline at every point (empty when why_no_verdicts says), and
    the notices of the points the judge refused."""
    base = baseline_of(run, baseline)
    if why_no_verdicts(run, base):
        return Verdicts()
    design = design_of(run, min_effect_pct)
    aa = aa_name(base)
    out = Verdicts()

    def add(server, wl, thp, th, metric, values, norm=None, settle=None, design=design):
        where = " ".join(str(x) for x in (server, wl, thp, th) if x not in ("", None))
        judged: Judged = judge(METRICS[metric], values, base, design, norm, where)
        if settle is not None:
            judged = settle(judged)
        if judged.notice:
            out.notices.append(judged.notice)
        for a in run.allocators:
            if a in judged.arms:
                j = judged.arms[a]
                out.append(
                    Verdict(
                        server, wl, a, base, thp, th, metric, j.ratio, j.lo, j.hi, j.verdict,
                        j.rounds, j.level, a == aa,
                    )
                )  # fmt: skip

    if growth_rate.is_soak(run) and rounds_of(run) < 2:
        out.notices.append(SOAK_ONE_LIFE)
    # An alternate run's level without a steady rate leaves its life out: said, by cell
    for wl in run.workloads:
        out.notices += steady_rate.unmeasured(run, wl, point_tables.metric_of(run, wl))
    points = throughput_points(run)
    # One family: an arm's throughput points share the 5%, a point the exposure settles with a
    # smaller weight (module docstring, "One run, one 5%")
    weights = family_weights(run, [point for point, _ in points])
    total = sum(weights.values())
    for point, values in points:
        # undecided where no installed allocator can move this point: decided from its exposure
        add(*point, THROUGHPUT, values, design=design.share(weights[point], total),
            settle=lambda judged, point=point: exposure.settle(run, point, judged))  # fmt: skip

    # Memory: one value per complete server life.
    stop, growth = memory.lives_by_point(run)
    for (server, thp), values in sorted(stop.items()):
        add(server, "", thp, None, RSS_STOP, values)
        base_end = values.get(base) or {}
        norm = sum(base_end.values()) / len(base_end) if base_end else None
        add(server, "", thp, None, RSS_GROWTH, growth[(server, thp)], norm)
    # The fragmentation scenarios: growth in MB per hour, as differences (growth_rate.py)...
    margin = growth_rate.margin_of(run)
    # a soak's growth is judged at its own look's level (analysis/soak_looks.py)
    level_of = (
        (lambda _rounds, wl=None: soak_looks.report_level(run.manifest, wl))
        if growth_rate.is_soak(run)
        else (lambda rounds: level_at(design, rounds))
    )
    for (server, wl, thp, a), metric, d in growth_rate.verdict_differences(run, base, level_of):
        out.append(
            Verdict(
                server, wl, a, base, thp, None, metric, d.diff, d.lo, d.hi, d.verdict,
                d.rounds, d.level, a == aa, unit=growth_rate.UNIT, margin=margin,
            )
        )  # fmt: skip
    # ... and a burst's release.
    for p in cycle_growth.verdict_points(run, base):
        add(p.server, p.workload, p.thp, None, p.metric, p.values, p.norm)
    return out


def family_weights(run: Run, points: list[tuple]) -> dict[tuple, float]:
    """Each throughput point's weight in the run's family (module docstring): 1, or
    SETTLED_WEIGHT where the exposure settles it. All settled: equal weights, as before."""
    settled = {p: exposure.cannot_matter(run, p) for p in points}
    if all(settled.values()):
        return dict.fromkeys(points, 1.0)
    return {p: SETTLED_WEIGHT if settled[p] else 1.0 for p in points}


def undecided(verdicts: list[Verdict]) -> list[Verdict]:
    return [v for v in verdicts if v.verdict not in (*DECIDED, exposure.CANNOT_MATTER)]


def aa_alarm(verdicts: list[Verdict]) -> list[Verdict]:
    """A/A points called different: the machine was too noisy for any verdict of this run."""
    return [v for v in verdicts if v.aa_arm and v.significant]


# -- the noise floor --------------------------------------------------------------------------
@dataclass(frozen=True)
class NoiseFloor:
    aa_points: int
    aa_half_width_pct_median: float | None  # A/A interval half-width, as % of the ratio
    aa_half_width_pct_max: float | None
    aa_ratio_min: float | None
    aa_ratio_max: float | None
    life_spread_pct_median: float | None  # sd of log throughput over rounds, same allocator
    life_spread_pct_max: float | None
    lives: int  # (allocator, point) series with >= 2 lives behind the spread


def _half_pct(v: Verdict) -> float:
    return (math.sqrt(v.hi / v.lo) - 1) * 100 if v.lo > 0 else math.inf


def noise_floor(run: Run, verdicts: list[Verdict]) -> NoiseFloor:
    aa = [v for v in verdicts if v.aa_arm and v.metric == THROUGHPUT and math.isfinite(v.lo)]
    halves = sorted(_half_pct(v) for v in aa)
    series: dict[tuple, list[float]] = {}
    for wl in run.workloads:
        metric = point_tables.metric_of(run, wl)
        lives = by_life(  # one value per server life (churn cycles of one life are one)
            (r for r in run.ok_rows if r["workload"] == wl and not run.is_standin(r["cell"])),
            lambda r, wl=wl: (r["server"], wl, r["thp"], r["threads"], r["allocator"]),
            lambda r, metric=metric: r.get(metric) if (r.get(metric) or 0) > 0 else None,
        )
        series.update({k: list(v.values()) for k, v in lives.items()})
    spreads = sorted(
        (math.exp(float(np.std(np.log(xs), ddof=1))) - 1) * 100
        for xs in series.values()
        if len(xs) >= 2
    )
    return NoiseFloor(
        len(aa),
        median(halves) if halves else None,
        halves[-1] if halves else None,
        min((v.ratio for v in aa), default=None),
        max((v.ratio for v in aa), default=None),
        median(spreads) if spreads else None,
        spreads[-1] if spreads else None,
        len(spreads),
    )


# -- verdicts.csv -----------------------------------------------------------------------------
def _num(x: float | None) -> str:
    return "" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.6g}"


def verdicts_csv(verdicts: list[Verdict], design: str = run_design.SOLO) -> str:
    """verdicts.csv's text; `design`: the run's (analysis/run_design.py), on every row."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for v in verdicts:
        w.writerow(
            [
                v.server,
                v.workload,
                v.allocator,
                v.baseline,
                v.thp,
                "" if v.threads is None else v.threads,
                v.metric,
                "" if v.unit else _num(v.ratio),
                "" if v.unit else _num(v.lo),
                "" if v.unit else _num(v.hi),
                v.word,
                v.meaning,
                v.rounds,
                f"{v.level:.4f}",
                "yes" if v.aa_arm else "no",
                v.baseline_server or v.server,
                _num(v.ratio) if v.unit else "",
                _num(v.lo) if v.unit else "",
                _num(v.hi) if v.unit else "",
                v.unit,
                _num(v.margin) if v.unit else "",
                design,
            ]
        )
    return buf.getvalue()
