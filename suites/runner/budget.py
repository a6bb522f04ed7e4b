"""`--budget`: after each round from the first look, add one more round or stop, and say why.

The rule itself (which looks, at what level) is analysis/sequential.py's; this module only plans
the most rounds a budget allows before the run starts (the spending needs it fixed in advance),
and after each round reads the run directory's verdicts to decide whether another round is worth
its time: it stops as soon as every point is decided, at the planned maximum, or when the
budget left is shorter than the last round took.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from analysis.sequential import Design, plan_max_rounds
from analysis.upgrade import several, upgrade_verdicts
from analysis.verdicts import run_verdicts, undecided
from rundir.read import load_run
from suites.errors import SuiteError

SHOWN = 6  # undecided points named on the console; the rest are counted


def _duration(seconds: float) -> str:
    """A duration as --budget takes it, rounded up: 45s, 12m, 2h."""
    if seconds < 120:
        return f"{math.ceil(seconds)}s"
    if seconds < 2 * 3600:
        return f"{math.ceil(seconds / 60)}m"
    return f"{math.ceil(seconds / 360) / 10:g}h"


def plan_design(suite, round_s: float, cap: int) -> Design:
    """The run's design: first look at `repeat` rounds; with a budget, as many more as the
    estimated round time allows. A budget shorter than one round (its ETA) could never add one:
    refused, saying the least that makes sense."""
    first = suite.run.repeat
    if suite.run.budget_s and suite.run.budget_s < round_s:
        raise SuiteError(
            f"--budget / run.budget_s {suite.run.budget_s:g} s: shorter than one round of "
            f"this suite (every allocator and THP mode once: about {_duration(round_s)} by the "
            f"estimate), so it could never add a round; give at least --budget "
            f"{_duration(round_s)}, or leave it out for exactly --repeat rounds"
        )
    # The estimate is pessimistic (measured rounds here took half of it): plan the looks for
    # rounds twice as fast, so a fast machine is not stopped short. A look that the budget never
    # reaches only leaves its share of the 5% unspent (conservative), it never inflates it.
    optimistic = round_s / 2
    most = (
        plan_max_rounds(first, suite.run.budget_s, optimistic, cap) if suite.run.budget_s else first
    )
    return Design(first, most, min_effect_pct=suite.run.min_effect_pct)


def recorded_design(recorded: dict, fallback: Design) -> Design:
    """The design a run's manifest recorded before its first round (its `design`): what a resumed
    run's budget goes on with; `fallback` where the manifest has none."""
    try:
        first = int(recorded["first_look"])
        most = max(int(recorded["max_rounds"]), first)
    except (KeyError, TypeError, ValueError):
        return fallback
    return Design(
        first,
        most,
        alpha=float(recorded.get("alpha") or fallback.alpha),
        min_effect_pct=float(recorded.get("min_effect_pct") or fallback.min_effect_pct),
    )


def spent_s(cells: list[dict]) -> float:
    """Seconds the run's cells have taken so far (each from its start to its end, as recorded):
    what a resumed run's budget has already used. Time between a Ctrl-C and the --resume is not
    the run's."""
    total = 0.0
    for c in cells:
        try:
            a = datetime.fromisoformat(c["started_at"])
            b = datetime.fromisoformat(c["finished_at"])
        except (KeyError, TypeError, ValueError):
            continue
        total += max((b - a).total_seconds(), 0.0)
    return total


@dataclass
class Decision:
    more: bool
    message: str


def _point(v, several: bool = False) -> str:
    """An undecided verdict, short; with several servers, each named with its server (and a
    verdict between two servers with both)."""
    where = f"{v.workload} {v.threads} thr" if v.workload else v.metric
    server = f"{v.server} vs {v.baseline_server}: " if v.baseline_server else ""
    if several and not server:
        server = f"{v.server}: "
    what = f" {v.metric}" if v.baseline_server and v.workload else ""
    return f"{server}{v.allocator} {where}{what} ({v.ratio:.2f}x [{v.lo:.2f}-{v.hi:.2f}])"


class Budget:
    def __init__(self, budget_s: float, design: Design, baseline: str, started: float):
        self.budget_s = budget_s
        self.design = design
        self.baseline = baseline
        self.started = started  # time.monotonic() when the run began

    def after_round(self, run_dir: Path, rounds: int, last_round_s: float) -> Decision:
        run = load_run(run_dir)
        m = self.design.min_effect_pct
        # Several servers (an upgrade check): their NEW/BASE verdicts and interactions count too.
        verdicts = run_verdicts(run, self.baseline, min_effect_pct=m) + upgrade_verdicts(
            run, self.baseline, min_effect_pct=m
        )
        open_ = undecided(verdicts)
        left = self.budget_s - (time.monotonic() - self.started)
        head = f"after round {rounds}: {len(verdicts) - len(open_)} of {len(verdicts)} decided"
        if not verdicts:
            return Decision(False, f"{head}; no point could be judged, stopping")
        if not open_:
            return Decision(False, f"{head}: every point decided, stopping early")
        names = ", ".join(_point(v, several(run)) for v in open_[:SHOWN])
        more_names = f" and {len(open_) - SHOWN} more" if len(open_) > SHOWN else ""
        still = f"undecided: {names}{more_names}"
        if rounds >= self.design.max_rounds:
            return Decision(
                False, f"{head}; the planned maximum of {rounds} rounds is reached; {still}"
            )
        if left < last_round_s:
            return Decision(
                False,
                f"{head}; budget left {left:.0f} s < one round (~{last_round_s:.0f} s): "
                f"stopping; {still}",
            )
        fits = min(int(left // max(last_round_s, 1.0)), self.design.max_rounds - rounds)
        return Decision(
            True,
            f"{head}; {still}; round {rounds + 1} next (~{last_round_s:.0f} s; budget left "
            f"{left:.0f} s, room for {fits} more round(s), at most until "
            f"{time.strftime('%H:%M:%S', time.localtime(time.time() + fits * last_round_s))})",
        )
