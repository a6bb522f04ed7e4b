"""Growth in MB per hour (analysis/growth_rate.py) on series whose answer is known: a linear
growth, a plateau, a step, a life cut short; the combination over lives keeps its stated
coverage; the per-hour verdicts of a recorded format-5 run, its cycles' times re-derived from
the raw records."""

from __future__ import annotations

import csv
import io
import math
import random
from pathlib import Path

import pytest

from analysis import growth_rate as gr
from analysis import verdicts
from analysis.fragmentation import REPRODUCED, claims_table
from rundir.read import load_run

MIN = 60.0  # one cycle a minute


def rows(values_kb: list[float | None], start_cycle: int = 1, **extra) -> list[dict]:
    return [
        {
            "server": "s", "allocator": "a", "thp": "system", "repeat": 1, "workload": "dump",
            "scenario_cycle": start_cycle + k, "rss_end_kb": v, "tps": 10.0, **extra,
        }
        for k, v in enumerate(values_kb)
    ]  # fmt: skip


def life(values_kb, times_s=None) -> gr.LifeRate:
    times = times_s or [MIN * (k + 1) for k in range(len(values_kb))]
    return gr.life_rate("c", rows(values_kb), times)


def test_a_known_linear_growth_is_found_with_an_interval_that_holds_it():
    rnd = random.Random(7)
    # 30 MB per hour = 0.5 MB a minute, with 200 kB of noise per reading
    ys = [500_000 + 512 * k + rnd.gauss(0, 200) for k in range(40)]
    x = life(ys)
    lo, hi = x.rss.interval()
    assert lo < 30 < hi and hi - lo < 3
    assert x.rss_per_100.value == pytest.approx(50, rel=0.05)  # 0.5 MB a cycle
    assert x.hours == pytest.approx(39 / 60)
    assert x.state(10) == gr.GROWING


def test_a_plateau_is_levelled_off_though_the_whole_life_grew():
    ys = [400_000 + 20_000 * (1 - math.exp(-k / 2)) for k in range(24)]
    x = life(ys)
    assert x.rss.value > 10  # all cycles: the climb is in the life's rate...
    assert x.state(10) == gr.LEVELLED  # ...but the last half is flat within 10 MB/h


def test_a_step_is_in_the_rate_and_not_in_the_state():
    ys = [300_000.0] * 10 + [340_000.0] * 10
    x = life(ys)
    assert x.rss.value > 0 and x.tail.value == 0
    assert x.state(10) == gr.LEVELLED


def test_autocorrelated_residuals_widen_the_error():
    xs = [float(k) for k in range(30)]
    wave = [math.sin(k / 3) * 5 for k in range(30)]  # residuals that follow each other
    alternating = [5 * (-1) ** k for k in range(30)]  # residuals that do not
    wide = gr.fit(xs, [x + w for x, w in zip(xs, wave, strict=True)])
    narrow = gr.fit(xs, [x + w for x, w in zip(xs, alternating, strict=True)])
    ss_w = sum(w * w for w in wave)
    ss_a = sum(a * a for a in alternating)
    # same slope model; per unit of residual, the wave's error is the wider one
    assert wide.se / math.sqrt(ss_w) > narrow.se / math.sqrt(ss_a)


def test_a_life_cut_short_or_with_a_hole_has_no_rate():
    assert life([100_000.0, 101_000.0]).rss is None  # two cycles: nothing to estimate an error
    x = life([100_000.0, None, 102_000.0, 103_000.0])
    assert x.rss is None  # a hole in the series: no rate over a gap
    cut = life([100_000.0, 100_500.0, 101_000.0, 101_500.0, 102_000.0])
    assert cut.rss is not None and cut.tail is not None and cut.cycles == 5


def test_decide_on_a_difference_with_a_margin():
    assert gr.decide(20, 5, 35, 10) == "worse"  # grows more
    assert gr.decide(-20, -35, -5, 10) == "better"  # grows less
    assert gr.decide(1, -4, 6, 10) == "none"
    assert gr.decide(5, 1, 9, 10) == "none"  # significant but within the margin
    assert gr.decide(8, -4, 20, 10) == "undecided"
    assert gr.decide(8, -math.inf, math.inf, 10) == "undecided"


def test_pairs_combined_over_rounds_cover_the_true_difference():
    """Three rounds, lives that differ by more than their fits say (tau): the Hartung-Knapp
    interval keeps ~95% coverage (a plain fixed-weight interval would not)."""
    rnd = random.Random(11)
    trials, covered = 600, 0
    true = 15.0
    for _ in range(trials):
        arm, base = {}, {}
        for r in (1, 2, 3):
            shared = rnd.gauss(0, 8)  # the round's load, in both lives
            se = rnd.uniform(1, 3)
            base[r] = gr.Rate(100 + shared + rnd.gauss(0, 6) + rnd.gauss(0, se), se, 10, 12)
            arm[r] = gr.Rate(100 + true + shared + rnd.gauss(0, 6) + rnd.gauss(0, se), se, 10, 12)
        d = gr.paired_difference(arm, base, 0.95, 10)
        covered += d.lo <= true <= d.hi
    assert covered / trials >= 0.93


def test_one_round_uses_the_fits_own_error():
    a = {1: gr.Rate(50.0, 2.0, 10, 12)}
    b = {1: gr.Rate(10.0, 2.0, 20, 22)}
    d = gr.paired_difference(a, b, 0.95, 10)
    half = (d.hi - d.lo) / 2
    from analysis.stats import t_quantile

    assert d.diff == 40 and d.rounds == 1
    assert half == pytest.approx(t_quantile(0.975, 10) * math.sqrt(8))
    assert d.verdict == "worse"


RECORDED = Path(__file__).parent.parent / "fixtures" / "runs" / "real-fragmentation-format5"


def test_a_recorded_format5_run_gets_per_hour_verdicts_from_its_raw_records():
    run = load_run(RECORDED)
    assert all(r.get("scenario_end_s") is None for r in run.rows)  # written before the column
    lives = gr.life_rates(run)
    assert {x.workload for x in lives} == {"dump"}  # the spike has its release instead
    for x in lives:
        # the times came from the raw record's phase boundaries: minutes, not a cycle count
        assert x.hours is not None and 0 < x.hours < 0.1 and x.rss is not None
    vs = [v for v in verdicts.run_verdicts(run, "glibc") if v.metric in gr.METRICS]
    assert {v.metric for v in vs} == set(gr.METRICS)
    for v in vs:
        assert v.unit == "MB/h" and v.lo <= v.ratio <= v.hi
    text = verdicts.verdicts_csv(vs)
    for row in csv.DictReader(io.StringIO(text)):
        assert row["ratio"] == "" and row["unit"] == "MB/h" and row["margin"] == "10"
    # the claim behind an undecided verdict is not called reproduced
    claims = {
        r[0].text: r for r in claims_table(run, verdicts.run_verdicts(run, "glibc"), "glibc").rows
    }
    mdev = claims["MDEV-30889"]
    assert "undecided" in mdev[3].text and mdev[4].text != REPRODUCED


def test_a_life_on_a_perfect_line_does_not_take_every_weight():
    """A fit with no residual (RSS unchanged over the cycles, or a part clamped at 0) knows its
    slope to the page, not exactly: combined with lives that scatter, it is one life among them.
    (Recorded: glibc-trim vs glibc held in the dump scenario came out +0.0 [-0.0 - +0.0] MB/h,
    'no difference', from one round whose two lives both read 0 at every cycle.)"""
    from analysis.growth_rate import combine, fit

    flat = fit([0.0, 0.001, 0.002, 0.003], [100.0, 100.0, 100.0, 100.0])
    assert flat.value == 0 and flat.se > 0
    both = combine([(595.1, 100.97, 6), (282.4, 92.0, 6), (flat.value, flat.se, flat.df)])
    assert 100 < both.value < 500
    lo, hi = both.interval()
    assert lo < 0 < hi  # three rounds this different decide nothing


def test_a_held_part_that_read_0_at_every_cycle_has_no_rate():
    """held = resident - in use, clamped at 0: a life where it never rose above 0 never saw what
    its allocator held (in use but untouched memory hid it), so it gives no rate at all."""
    from analysis.growth_rate import life_rate

    def rows(held):
        return [
            {
                "server": "s",
                "allocator": "glibc",
                "thp": "system",
                "workload": "dump",
                "scenario_cycle": i + 1,
                "rss_end_kb": 100_000 + 500 * i,
                "tps": 10.0,
                "alloc_held_resident_kb": h,
            }  # fmt: skip
            for i, h in enumerate(held)
        ]

    times = [10.0 * i for i in range(1, 6)]
    hidden = life_rate("c", rows([0, 0, 0, 0, 0]), times)
    assert hidden.held is None and hidden.held_per_100 is None and hidden.rss is not None
    seen = life_rate("c", rows([0, 300, 0, 800, 900]), times)
    assert seen.held is not None and seen.held.value > 0


def test_outside_a_soak_one_shared_round_decides_nothing(monkeypatch):
    """Two lives' fits alone say how sure each trend is, not how much lives differ: a difference
    on one round that both arms have (the others without a rate) stays undecided; on two, the
    same figures decide."""
    from types import SimpleNamespace

    from analysis import growth_rate as g

    def life(alloc, repeat, slope):
        r = g.Rate(slope, 1.0, 6, 8)
        return g.LifeRate(
            cell=f"{alloc}-{repeat}", server="s", allocator=alloc, thp="system", repeat=repeat,
            workload="dump", cycles=8, hours=0.5, rss=r, rss_per_100=r, held=r, held_per_100=r,
            account=None, tail=None, rss_end_mb=100.0, tps=1.0,
        )  # fmt: skip

    run = SimpleNamespace(manifest={})
    lives = [life("glibc", 1, 0.0), life("jemalloc", 1, 500.0)]
    monkeypatch.setattr(g, "life_rates", lambda _run: lives)
    one_d = g.verdict_differences(run, "glibc", lambda _n: 0.95)[0][2]
    assert one_d.rounds == 1 and one_d.verdict == g.UNDECIDED and one_d.diff == 500.0
    lives += [life("glibc", 2, 1.0), life("jemalloc", 2, 520.0)]
    two_d = g.verdict_differences(run, "glibc", lambda _n: 0.95)[0][2]
    assert two_d.rounds == 2 and two_d.verdict == g.WORSE
