"""What deciding would take (analysis/verdicts.py forecast, analysis/sequential.py rounds_for):
the rounds for a +-2.5% interval at the noise a run saw, per tested point, and at the run's pace."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from analysis.sequential import half_width, rounds_for
from analysis.verdict_tables import forecast_text, noise_table
from analysis.verdicts import (
    FORECAST_PCT,
    forecast,
    minutes_per_round,
    paired_noise,
    run_verdicts,
    throughput_points,
)
from rundir.read import load_run

RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "runs"


def test_rounds_for_is_the_first_round_count_that_meets_the_goal():
    goal = math.log(1 + FORECAST_PCT / 100)
    for sigma, arms in ((0.05, 1), (0.10, 6), (0.02, 3)):
        n = rounds_for(FORECAST_PCT, sigma, arms, 0.05)
        assert half_width(sigma, arms, n, 0.05) <= goal < half_width(sigma, arms, n - 1, 0.05)
    # one arm, 10% per life: the paired t over R rounds, sd of a difference 10% x sqrt 2
    n = rounds_for(FORECAST_PCT, 0.10, 1, 0.05)
    assert 120 < n < 140  # ~ (1.98 x 0.1414 / 0.0247)^2 = 128
    assert rounds_for(FORECAST_PCT, 0.0, 1, 0.05) == 2
    assert rounds_for(FORECAST_PCT, 5.0, 1, 0.05) is None  # beyond 10,000 rounds
    # a smaller share of the 5% needs more rounds
    assert rounds_for(FORECAST_PCT, 0.05, 1, 0.0125) > rounds_for(FORECAST_PCT, 0.05, 1, 0.05)


def test_a_recorded_run_is_forecast_per_point_at_its_own_pace():
    run = load_run(RUNS / "real-servers-aa-format5")
    fc = forecast(run)
    points = throughput_points(run)
    assert set(fc.rounds) == {p for p, _ in points}
    pooled = paired_noise(run)
    for p, values in points:
        # each point at its own noise: the sd of its paired log differences / sqrt 2
        (arm,) = [a for a in values if a != "glibc"]
        d = [math.log(values[arm][r] / values["glibc"][r]) for r in sorted(values["glibc"])]
        m = sum(d) / len(d)
        sigma = math.sqrt(sum((x - m) ** 2 for x in d) / (len(d) - 1) / 2)
        assert fc.rounds[p] == rounds_for(FORECAST_PCT, sigma, 1, 0.05 / 2)
    assert pooled.points == 2  # the pool is both points'; the forecast is each point's own
    assert fc.rounds_now == 3
    # three rounds of two cells, each round's span from its first start to its last finish
    assert (
        fc.minutes_per_round == pytest.approx(minutes_per_round(run)) and 0 < fc.minutes_per_round
    )
    words = forecast_text(fc)
    # two servers: each point is named by its server; the most rounds set the time
    assert "a:mariadb-10.11.19 point_select@4" in words and "b:mariadb-10.11.19" in words
    assert f"{max(fc.rounds.values())} rounds at this run's" in words
    table = noise_table(run, run_verdicts(run), "glibc")
    assert any("rounds for a ±2.5% interval" in r[0].text for r in table.rows)


def test_no_pairs_no_forecast():
    assert forecast(load_run(RUNS / "real-smoke-1")) is None  # one round: no noise measured


def test_the_end_of_run_notes_say_what_deciding_would_take(tmp_path):
    """Where a throughput point is left undecided, the console's notes forecast the rounds."""
    import shutil

    from suites.cli.commands.run import verdict_tables

    run_dir = tmp_path / "run"
    shutil.copytree(RUNS / "real-servers-aa-format5", run_dir)
    judged = run_verdicts(load_run(run_dir))
    assert any(v.metric == "throughput" and v.verdict == "undecided" for v in judged)
    _tables, notes = verdict_tables(run_dir)
    (note,) = [n for n in notes if n.startswith("rounds for a ±2.5% interval")]
    assert "point_select@4: about" in note
