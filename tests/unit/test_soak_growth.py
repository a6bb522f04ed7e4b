"""Growth per hour of a soak on synthetic series (issue 34 item 2): a known linear growth, a
plateau, a step, a life cut short, and a soak broken into segments (analysis/growth_rate.py).

The series are made here with a seeded generator, so each has a known true rate to check the
estimate and its interval against."""

from __future__ import annotations

import math
import random

import pytest

from analysis import growth_rate as g
from analysis.metrics import BETTER, NONE, UNDECIDED, WORSE

BASE_MB = 400.0


def rows(
    mb_per_hour: float,
    hours: float,
    cycles: int,
    noise_mb: float = 0.5,
    seed: int = 1,
    step_at: float | None = None,
    step_mb: float = 0.0,
    alloc: str = "glibc",
    workload: str = "dump",
) -> list[dict]:
    """Cycle rows of one life: RSS at each cycle's end = base + rate x hours (+ a step at
    `step_at` hours), plus Gaussian noise; the held part grows at half the rate."""
    rnd = random.Random(seed)
    out = []
    for k in range(1, cycles + 1):
        h = hours * k / cycles
        mb = BASE_MB + mb_per_hour * h + (step_mb if step_at is not None and h >= step_at else 0)
        mb += rnd.gauss(0, noise_mb)
        out.append(
            {
                "cell": f"{alloc}-cell",
                "server": "mariadb-10.11",
                "allocator": alloc,
                "thp": "system",
                "repeat": 1,
                "workload": workload,
                "status": "ok",
                "scenario_cycle": k,
                "scenario_end_s": h * 3600,
                "rss_end_kb": mb * 1024,
                "alloc_held_resident_kb": (50 + mb_per_hour / 2 * h) * 1024,
                "tps": 100.0,
            }
        )
    return out


def life(r: list[dict], segment: int = 1) -> g.LifeRate:
    (only,) = g.lives_of_rows(r[0]["cell"], r, segment)
    return only


def test_linear_growth_is_recovered_with_an_interval_holding_it_and_still_growing():
    x = life(rows(30.0, hours=2, cycles=120))
    lo, hi = x.rss.interval()
    assert lo <= 30.0 <= hi and hi - lo < 3
    assert x.hours == pytest.approx(2 - 2 / 120)
    # per 100 cycles: 120 cycles in 2 h, 30 MB/h -> 50 MB per 100 cycles
    assert x.rss_per_100.value == pytest.approx(50.0, rel=0.05)
    assert x.held.value == pytest.approx(15.0, abs=0.01)
    assert x.state(g.MARGIN_MB_PER_HOUR) == g.GROWING


def test_plateau_is_levelled_off():
    x = life(rows(0.0, hours=3, cycles=90))
    assert abs(x.rss.value) < 1
    assert x.state(g.MARGIN_MB_PER_HOUR) == g.LEVELLED


def test_a_step_is_not_a_trend_in_the_tail_and_widens_the_whole_life_fit():
    # flat, a 100 MB jump at 1 h (one dump that fragmented the heap), flat again
    x = life(rows(0.0, hours=2, cycles=60, step_at=1.0, step_mb=100.0))
    flat = life(rows(0.0, hours=2, cycles=60))
    # after the step the series is flat: the tail (last half) says levelled off
    assert x.state(g.MARGIN_MB_PER_HOUR) == g.LEVELLED
    # the whole life's slope sees the jump as growth, but its residuals are one long run
    # (autocorrelated): its error is widened far beyond the flat life's
    assert x.rss.value > 50
    assert x.rss.se > 10 * flat.rss.se


def test_a_life_cut_short_has_no_rate_rather_than_a_made_up_one():
    short = rows(30.0, hours=0.1, cycles=g.MIN_CYCLES - 1)
    assert g.lives_of_rows("c", short) == []
    assert g.fit([0.0, 1.0], [1.0, 2.0]) is None
    # a hole in the series (a cycle without its reading): no rate over the gap
    holed = rows(30.0, hours=1, cycles=10)
    holed[4]["rss_end_kb"] = None
    assert life(holed).rss is None


def test_segments_are_fitted_apart_and_pooled():
    # a soak killed after 1 h and resumed: a fresh server starts its memory again
    s1 = rows(20.0, hours=1, cycles=60, seed=1)
    s2 = rows(20.0, hours=1, cycles=60, seed=2)
    pooled = g.pooled([life(s1).rss, life(s2, 2).rss])
    lo, hi = pooled.interval()
    assert lo <= 20.0 <= hi
    # the pooled error is smaller than either segment's alone
    assert pooled.se < min(life(s1).rss.se, life(s2).rss.se)
    # one fit across the break (the second life's clock going on) is a sawtooth's slope: wrong
    joined_x = [r["scenario_end_s"] / 3600 for r in s1] + [
        1 + r["scenario_end_s"] / 3600 for r in s2
    ]
    joined_y = [r["rss_end_kb"] / 1024 for r in s1 + s2]
    across = g.fit(joined_x, joined_y)
    assert not across.interval()[0] <= 20.0 <= across.interval()[1]


def test_pooled_degrees_of_freedom_are_welch_satterthwaite():
    a, b = g.Rate(10.0, 1.0, 10, 12), g.Rate(20.0, 1.0, 10, 12)
    p = g.pooled([a, b])
    assert p.value == pytest.approx(15.0)
    assert p.se == pytest.approx(math.sqrt(0.5))
    assert p.df == pytest.approx(20.0)
    assert g.pooled([None]) is None and g.pooled([a]) is a


def test_unpaired_difference_takes_its_error_from_both_arms():
    a, b = g.Rate(50.0, 3.0, 40, 42), g.Rate(10.0, 4.0, 40, 42)
    d = g.unpaired_difference(a, b, 0.95, 10.0)
    assert d.diff == pytest.approx(40.0)
    half = (d.hi - d.lo) / 2
    assert half == pytest.approx(5.0 * 2.0, rel=0.03)  # se 5 (3-4-5), t ~ 1.99 at ~78 df
    assert d.verdict == WORSE


def soak(arm_rate: float, base_rate: float, noise: float, hours: float = 2, cycles: int = 60):
    lives = [
        life(rows(base_rate, hours, cycles, noise, seed=3, alloc="glibc")),
        life(rows(arm_rate, hours, cycles, noise, seed=4, alloc="jemalloc")),
    ]
    got = g.soak_differences(lives, "glibc", 0.95, g.MARGIN_MB_PER_HOUR)
    return {metric: d for (_s, _w, _t, alloc), metric, d in got if alloc == "jemalloc"}


def test_soak_verdicts_grow_more_less_none_and_undecided():
    assert soak(60.0, 5.0, 0.5)[g.RSS_GROWTH_MB_PER_HOUR].verdict == WORSE
    assert soak(5.0, 60.0, 0.5)[g.RSS_GROWTH_MB_PER_HOUR].verdict == BETTER
    assert soak(5.0, 5.0, 0.5)[g.RSS_GROWTH_MB_PER_HOUR].verdict == NONE
    # noise of 100 MB on a 10-minute soak: nothing can be said
    noisy = soak(30.0, 5.0, 100.0, hours=1 / 6, cycles=8)[g.RSS_GROWTH_MB_PER_HOUR]
    assert noisy.verdict == UNDECIDED
    assert noisy.lo < 0 < noisy.hi


def test_series_rate_fits_every_scenario_of_a_life_in_time_order():
    a = rows(30.0, 1, 30, workload="dump")
    b = rows(30.0, 1, 30, workload="fulltext", seed=5)
    for r in b:
        r["scenario_end_s"] += 30  # the fulltext cycle ends after each dump cycle
    rate = g.series_rate(a + b)
    assert rate.points == 60
    lo, hi = rate.interval()
    assert lo <= 30.0 <= hi


def test_the_report_tables_pool_a_soaks_segments_like_its_verdicts():
    # two segments of one arm (the same repeat) are pooled; two rounds' lives are combined with
    # a between-life variance (Hartung-Knapp: 1 degree of freedom from two lives)
    s1, s2 = life(rows(20.0, 1, 60, seed=1)), life(rows(20.0, 1, 60, seed=2), 2)
    assert g.arm_rate([s1, s2], lambda x: x.rss) == g.pooled([s1.rss, s2.rss])
    r2 = g.LifeRate(**{**s2.__dict__, "repeat": 2})
    assert g.arm_rate([s1, r2], lambda x: x.rss).df == 1
