"""A trial's figures, from its run directory, by the run's own paired verdicts (analysis/verdicts):
the setting's arm against the allocator's defaults, round by round in the same run.

- memory: RSS at stop, the ratio setting/defaults with its interval (lower is better);
- growth: the growth of RSS over the server's life, 1 + (mean difference) / (the defaults' RSS
  at stop), so a ratio below 1 grows less (a fragmentation scenario's growth is judged in MB per
  hour, a difference in a unit, and is shown in the trial's own report, not in the front);
- throughput: every (workload, threads) point's ratio; the constraint is that none is resolved
  as slower (the verdict's interval lies beyond the minimum effect on the slow side). What the
  run cannot resolve does not count against the setting, and the interval says how much that is.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from analysis.metrics import BETTER, WORSE
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
    ratio: float
    lo: float
    hi: float
    verdict: str  # the verdict's own word for the metric ("less memory", "none", "undecided")

    def to_json(self) -> dict:
        return {"ratio": self.ratio, "lo": self.lo, "hi": self.hi, "verdict": self.verdict}

    @staticmethod
    def of(v: Verdict) -> Figure:
        return Figure(v.ratio, v.lo, v.hi, v.word)


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


def figures(run_dir: Path, defaults: str, arm: str) -> TrialFigures:
    """The setting `arm` against `defaults` in one run; SuiteError when the run cannot say
    (fewer than two rounds with both arms, no RSS at stop)."""
    run = load_run(run_dir)
    why = why_no_verdicts(run, defaults)
    if why:
        raise SuiteError(f"{run_dir}: no paired verdict: {why}")
    mine = [v for v in run_verdicts(run, defaults) if v.allocator == arm]
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
    grows = [v for v in mine if v.metric == RSS_GROWTH]
    worst_growth = max(grows, key=lambda v: v.ratio) if grows else None
    worst = min(speed, key=lambda v: v.ratio)
    return TrialFigures(
        memory=Figure.of(stop[0]),
        growth=Figure.of(worst_growth) if worst_growth else None,
        throughput=Figure.of(worst),
        slower_points=[f"{v.workload}@{v.threads}" for v in speed if v.verdict == WORSE],
        less_memory=stop[0].verdict == BETTER,  # a memory metric's better is less memory
        rounds=stop[0].rounds,
    )
