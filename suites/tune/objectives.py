"""A trial's figures, from its run directories, by the runs' own paired verdicts
(analysis/verdicts): the setting's arm against the allocator's defaults, round by round in the
same run.

- memory: RSS at stop, the ratio setting/defaults with its interval (lower is better);
- growth: with a growth run (the suite names fragmentation scenarios, arms.named_scenarios), the
  difference setting - defaults in RSS growth per hour over the scenario's cycles, MB/h with its
  interval (analysis/growth_rate.py: a difference in a unit, never a ratio of two slopes; the
  worst named scenario when there are several). Without one (a tune recorded before growth runs
  existed, or a suite that names none), the growth of RSS over the throughput run's server life,
  1 + (mean difference) / (the defaults' RSS at stop): a life of minutes whose start includes
  what the setting maps up front (jemalloc's thp:always backs its arenas with huge pages at
  once), so "grows less" there can be "started higher";
- throughput: every (workload, threads) point's ratio; the constraint is that none is resolved
  as slower: its interval lies wholly below 1. What the run cannot resolve does not count against
  the setting, and the interval says how much that is.

"Resolved" here is the interval's side of the defaults (below 1, or below 0 MB/h), at any size:
the verdict words ("less memory", "slower") also ask for the minimum effect (5%), which a tune's
question does not. A DBA asks for the largest gain that is real at no cost that is real: RSS at
stop 0.953 [0.925-0.981] is at least 1.9% less (its verdict word says "undecided", 0.001 short of
5%), and a throughput point at 0.97 [0.95-0.99] is a real 1-5% cost that the word "slower" would
let through. The same rule on both sides, gain and cost.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from analysis.metrics import BETTER, RSS_GROWTH_MB_PER_HOUR
from analysis.verdicts import (
    RSS_GROWTH,
    RSS_STOP,
    THROUGHPUT,
    Verdict,
    run_verdicts,
    why_no_verdicts,
)
from rundir.read import load_run
from suites.errors import SuiteError


@dataclass(frozen=True)
class Figure:
    ratio: float  # with a unit: the difference setting - defaults in it
    lo: float
    hi: float
    verdict: str  # the verdict's own word for the metric ("less memory", "none", "undecided")
    unit: str = ""  # "": a ratio to the defaults; "MB/h": a difference

    def to_json(self) -> dict:
        out = {"ratio": self.ratio, "lo": self.lo, "hi": self.hi, "verdict": self.verdict}
        return {**out, "unit": self.unit} if self.unit else out

    @staticmethod
    def of(v: Verdict) -> Figure:
        return Figure(v.ratio, v.lo, v.hi, v.word, v.unit)

    @property
    def at_defaults(self) -> float:
        """The defaults' own value on this figure's scale: 1 for a ratio, 0 for a difference."""
        return 0.0 if self.unit else 1.0

    @property
    def resolved_less(self) -> bool:
        """The whole interval below the defaults (less memory, grows less, slower), at any size."""
        return self.hi < self.at_defaults

    @property
    def resolved_more(self) -> bool:
        return self.lo > self.at_defaults

    def text(self) -> str:
        if self.unit:
            return f"{self.ratio:+.1f} {self.unit} [{self.lo:+.1f} - {self.hi:+.1f}] {self.verdict}"
        return f"{self.ratio:.3f} [{self.lo:.3f}-{self.hi:.3f}] {self.verdict}"


@dataclass(frozen=True)
class TrialFigures:
    memory: Figure
    growth: Figure | None
    throughput: Figure  # the worst point (the lowest ratio)
    slower_points: list[str]  # "oltp_ro@16": points resolved as slower than the defaults
    less_memory: bool  # the memory verdict: the setting resolved as using less
    rounds: int

    @property
    def feasible(self) -> bool:
        return not self.slower_points

    def to_json(self) -> dict:
        return {
            "memory": self.memory.to_json(),
            "growth": self.growth.to_json() if self.growth else None,
            "throughput": self.throughput.to_json(),
            "slower_points": self.slower_points,
            "less_memory": self.less_memory,
            "rounds": self.rounds,
        }

    @staticmethod
    def from_json(d: dict) -> TrialFigures:
        return TrialFigures(
            Figure(**d["memory"]),
            Figure(**d["growth"]) if d.get("growth") else None,
            Figure(**d["throughput"]),
            list(d["slower_points"]),
            bool(d["less_memory"]),
            int(d["rounds"]),
        )


def _verdicts(run_dir: Path, defaults: str, arm: str) -> list[Verdict]:
    run = load_run(run_dir)
    why = why_no_verdicts(run, defaults)
    if why:
        raise SuiteError(f"{run_dir}: no paired verdict: {why}")
    return [v for v in run_verdicts(run, defaults) if v.allocator == arm]


def _worst_rate(verdicts: list[Verdict]) -> Figure | None:
    rates = [v for v in verdicts if v.metric == RSS_GROWTH_MB_PER_HOUR]
    return Figure.of(max(rates, key=lambda v: v.ratio)) if rates else None


def growth_figure(growth_dir: Path, defaults: str, arm: str) -> Figure:
    """The setting's RSS growth per hour against the defaults' in the growth run: the worst
    (highest) difference over its scenarios; SuiteError when no scenario has one."""
    worst = _worst_rate(_verdicts(growth_dir, defaults, arm))
    if worst is None:
        raise SuiteError(
            f"{growth_dir}: {arm} has no paired growth per hour against {defaults} (its "
            "scenarios' cycles failed, or fewer than 3 cycles a life?)"
        )
    return worst


def figures(run_dir: Path, defaults: str, arm: str, growth_dir: Path | None = None) -> TrialFigures:
    """The setting `arm` against `defaults` in one run (and its growth run, when there is one);
    SuiteError when a run cannot say (fewer than two rounds with both arms, no RSS at stop)."""
    mine = _verdicts(run_dir, defaults, arm)
    stop = [v for v in mine if v.metric == RSS_STOP]
    speed = [v for v in mine if v.metric == THROUGHPUT]
    if not stop or not speed:
        raise SuiteError(
            f"{run_dir}: {arm} has no paired {'RSS at stop' if not stop else 'throughput'} "
            f"against {defaults} (its cells failed?)"
        )
    # Growth as the objective's ratio: the life's RSS growth, 1 + (difference) / the defaults' RSS
    # at stop. A fragmentation scenario's growth is judged in MB per hour (a difference, not a
    # ratio: analysis/growth_rate.py); pareto.csv would mix units, so the tuner keeps the life's.
    if growth_dir is not None:
        growth = growth_figure(growth_dir, defaults, arm)
    else:
        # a fragmentation suite tuned as it is: its own run has the growth per hour
        grows = [v for v in mine if v.metric == RSS_GROWTH]
        growth = _worst_rate(mine) or (
            Figure.of(max(grows, key=lambda v: v.ratio)) if grows else None
        )
    worst = min(speed, key=lambda v: v.ratio)
    return TrialFigures(
        memory=Figure.of(stop[0]),
        growth=growth,
        throughput=Figure.of(worst),
        # resolved as slower at any size: the interval wholly below 1 (module docstring)
        slower_points=[f"{v.workload}@{v.threads}" for v in speed if Figure.of(v).resolved_less],
        less_memory=stop[0].verdict == BETTER,  # a memory metric's better is less memory
        rounds=stop[0].rounds,
    )
