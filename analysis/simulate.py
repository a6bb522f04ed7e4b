"""Simulated runs with known truth, for the stopping rule's tests and `make bench`.

A simulated run follows the design of analysis/sequential.py: each round every arm runs once, in
the order `order(arms, round)` gives (the runner passes suites.runner.plan.allocator_order; analysis
never imports the runner). An arm's value in a life is log(true ratio) plus the machine's noise
at the moment that life ran (Noise: independent per-life noise, drift shared by a round, and the
ways a shared machine's load really changes: slowly from life to life, in steps inside a round,
stalled lives, an odd first life). After each round from the first look the runner's rule is
applied: judge every arm against the baseline at the look's level, stop when all are decided or
at the planned maximum. Nothing here touches a server.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from analysis.judge import outcome
from analysis.metrics import BETTER, DECIDED, METRICS, THROUGHPUT, WORSE
from analysis.sequential import Design, block_contrasts, verdict

BASE = "base"
Order = Callable[[list[str], int], list[str]]


@dataclass(frozen=True)
class Noise:
    """How the machine moves one server life's log-throughput, in the order the lives ran."""

    sigma: float  # independent noise of one life (sd of the log)
    drift_sd: float = 0.05  # a shift shared by every life of a round (a load between rounds)
    ar: float = 0.0  # correlation of successive lives: a load that changes slowly, across rounds
    step_p: float = 0.0  # chance, per round, that the load changes inside it ...
    step: float = 0.0  # ... by this much (log, either way), from a random life on, for good
    outlier_p: float = 0.0  # chance that a life is stalled (or boosted) ...
    outlier_sd: float = 0.0  # ... by extra noise of this sd
    first: float = 0.0  # shift of the run's first life

    def draw(self, rng: np.random.Generator, lives: int, per_round: int) -> np.ndarray:
        """One run's noise, life by life in run order."""
        if self.ar:
            e = rng.normal(0.0, self.sigma * math.sqrt(1 - self.ar**2), lives)
            x = np.empty(lives)
            prev = rng.normal(0.0, self.sigma)
            for i in range(lives):
                prev = self.ar * prev + e[i]
                x[i] = prev
        else:
            x = rng.normal(0.0, self.sigma, lives)
        rounds = -(-lives // per_round)
        x += np.repeat(rng.normal(0.0, self.drift_sd, rounds), per_round)[:lives]
        if self.step_p:
            for r in range(rounds):
                if rng.random() < self.step_p:
                    x[r * per_round + int(rng.integers(per_round)) :] += rng.choice((-1, 1)) * (
                        self.step
                    )
        if self.outlier_p:
            x += (rng.random(lives) < self.outlier_p) * rng.normal(0.0, self.outlier_sd, lives)
        x[0] += self.first
        return x


def fixed_order(arms: list[str], rnd: int) -> list[str]:
    return list(arms)


@dataclass(frozen=True)
class SimResult:
    rounds: int  # rounds when the rule stopped
    verdicts: dict[str, str]  # arm -> verdict at the stop
    ever_excluded_1: dict[str, bool]  # arm -> some look's interval excluded 1 (the rule's level)
    naive_excluded_1: dict[str, bool]  # arm -> some look's plain 95% interval excluded 1
    first_called: dict[str, int | None]  # arm -> rounds at the first look that called it faster
    # or slower (None: never)


def life_sd(values: list[float]) -> float:
    """Standard deviation of log values: the noise of one server life."""
    logs = np.log(np.asarray(values, dtype=float))
    return float(logs.std(ddof=1))


def simulate_run(
    rng: np.random.Generator,
    true_ratio: Mapping[str, float],
    noise: float | Noise,
    design: Design,
    drift_sd: float = 0.05,
    stop_when_decided: bool = True,
    order: Order = fixed_order,
) -> SimResult:
    """One run: the baseline (BASE, listed first) and the arms of `true_ratio`. A bare float
    `noise` is iid noise of that sd per life plus `drift_sd` per round."""
    if not isinstance(noise, Noise):
        noise = Noise(float(noise), drift_sd)
    arms = [BASE, *true_ratio]
    mu = {BASE: 0.0} | {a: math.log(r) for a, r in true_ratio.items()}
    shocks = noise.draw(rng, len(arms) * design.max_rounds, len(arms))
    values: dict[str, dict[int, float]] = {a: {} for a in arms}
    ever = {a: False for a in true_ratio}
    naive = {a: False for a in true_ratio}
    called: dict[str, int | None] = dict.fromkeys(true_ratio)
    final: dict[str, str] = {}
    life = 0
    for rnd in range(1, design.max_rounds + 1):
        for a in order(arms, rnd):
            values[a][rnd] = mu[a] + shocks[life]
            life += 1
        if rnd < design.first_look:
            continue
        level_alpha = design.alpha_at(rnd)
        judged = block_contrasts(values, BASE, level_alpha)
        plain = block_contrasts(values, BASE, design.alpha)
        final = {}
        for a, c in judged.items():
            ratio, lo, hi = math.exp(c.diff), math.exp(c.diff - c.half), math.exp(c.diff + c.half)
            final[a] = outcome(METRICS[THROUGHPUT], verdict(ratio, lo, hi, design.min_effect_pct))
            if called[a] is None and final[a] in (BETTER, WORSE):
                called[a] = rnd
            ever[a] |= lo > 1 or hi < 1
            p = plain[a]
            naive[a] |= abs(p.diff) > p.half
        if stop_when_decided and all(v in DECIDED for v in final.values()):
            return SimResult(rnd, final, ever, naive, called)
    return SimResult(design.max_rounds, final, ever, naive, called)


def rounds_to_decide(
    rng: np.random.Generator,
    effect: float,
    sigma: float | Noise,
    design: Design,
    runs: int,
    others: int = 0,
    order: Order = fixed_order,
) -> tuple[float, float, float]:
    """(share of runs that found `effect` as faster, median rounds to the first look that called
    it (a run that never did counts as the planned maximum), share called slower) for one arm
    with true ratio `effect` among `others` null arms. The run itself goes on while any arm is
    undecided, as the budget does; the rounds counted are those the 10% arm needed."""
    truth = {"x": effect} | {f"null{i}": 1.0 for i in range(others)}
    found, rounds, wrong = 0, [], 0
    for _ in range(runs):
        r = simulate_run(rng, truth, sigma, design, order=order)
        v = r.verdicts.get("x")
        found += v == BETTER
        wrong += v == WORSE
        rounds.append(r.first_called["x"] or design.max_rounds)
    return found / runs, float(np.median(rounds)), wrong / runs


def budget_vs_fixed(
    sigma: float,
    effect: float = 1.10,
    max_rounds: int = 60,
    runs: int = 300,
    seed: int = 1,
    others: int = 0,
    order: Order = fixed_order,
    points: float = 1,
) -> dict:
    """`make bench`'s figure: rounds the budgeted sequential design needs to decide a true
    `effect` at noise `sigma` per server life, among `others` allocators without a difference,
    against the fixed 3-round design (simulated). `points`: the family's total weight in units
    of this point's (analysis/verdicts.py, "One run, one 5%": the number of points when all
    weigh alike; 2.2 for two tested points and two the exposure settles)."""
    rng = np.random.default_rng(seed)
    budget, fixed3 = Design(3, max_rounds).share(1, points), Design(3, 3).share(1, points)
    found, rounds, wrong = rounds_to_decide(rng, effect, sigma, budget, runs, others, order)
    fixed, _, fixed_wrong = rounds_to_decide(rng, effect, sigma, fixed3, runs, others, order)
    return {
        "points": points,
        "sigma": sigma,
        "effect": effect,
        "max_rounds": max_rounds,
        "runs": runs,
        "others": others,
        "budget_found": found,
        "budget_median_rounds": rounds,
        "budget_wrong_direction": wrong,
        "fixed3_found": fixed,
        "fixed3_wrong_direction": fixed_wrong,
        "rounds_ratio": rounds / 3,
    }
