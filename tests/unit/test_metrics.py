"""The one metric table (analysis/metrics.py) and the one judge (analysis/judge.py)."""

from __future__ import annotations

import math

import pytest

from analysis import growth, hugepage_verdicts
from analysis.judge import judge
from analysis.metrics import (
    BETTER,
    DIFF,
    LOG,
    METRICS,
    RSS_GROWTH,
    RSS_STOP,
    THROUGHPUT,
    WORSE,
    Metric,
    register,
)
from analysis.sequential import Design

DESIGN = Design(3, 3)


def _values(ratio: float, base: float = 100.0, noise=(1.0, 1.01, 0.99)) -> dict:
    return {
        "glibc": {r: base * n for r, n in enumerate(noise, 1)},
        "x": {r: base * ratio * n for r, n in enumerate(noise, 1)},
    }


def test_a_name_is_registered_once():
    with pytest.raises(ValueError, match="registered twice"):
        register(Metric(THROUGHPUT, "again", LOG, True, "faster", "slower", "-"))


def test_a_scale_must_be_one_of_the_two():
    with pytest.raises(ValueError, match="scale"):
        Metric("m", "m", "linear", True, "a", "b", "-")


def test_every_judged_metric_is_in_the_table():
    for name in (*growth.METRICS, *hugepage_verdicts.HUGEPAGE_METRICS):
        assert name in METRICS


def test_memory_is_never_said_faster_or_slower():
    for m in METRICS.values():
        if m.memory:
            assert {m.word(BETTER), m.word(WORSE)}.isdisjoint({"faster", "slower"}), m.name


def test_the_direction_decides_better_or_worse():
    fast = judge(METRICS[THROUGHPUT], _values(1.3), "glibc", DESIGN).arms["x"]
    assert fast.ratio == pytest.approx(1.3) and fast.verdict == BETTER
    assert METRICS[THROUGHPUT].word(fast.verdict) == "faster"
    fat = judge(METRICS[RSS_STOP], _values(1.3), "glibc", DESIGN).arms["x"]
    assert fat.verdict == WORSE and METRICS[RSS_STOP].word(fat.verdict) == "more memory"
    assert fat.lo < fat.ratio < fat.hi and fat.rounds == 3 and fat.level == pytest.approx(0.95)


def test_a_non_positive_value_refuses_the_whole_point_with_a_notice():
    values = _values(1.3)
    values["x"][2] = 0.0
    judged = judge(METRICS[THROUGHPUT], values, "glibc", DESIGN, where="srv oltp 8")
    assert judged.arms == {}  # no arm judged on fewer lives than it ran
    assert judged.notice is not None
    assert "srv oltp 8" in judged.notice and "x measured 0 in round 2" in judged.notice


def test_a_difference_without_a_positive_norm_is_refused_with_a_notice():
    metric = METRICS[RSS_GROWTH]
    assert metric.scale == DIFF
    judged = judge(metric, _values(1.3), "glibc", DESIGN, norm=None, where="srv")
    assert judged.arms == {} and "no positive baseline" in judged.notice
    ok = judge(metric, _values(1.3), "glibc", DESIGN, norm=1000.0).arms["x"]
    assert ok.ratio == pytest.approx(1 + 30 / 1000, rel=1e-6)  # 1 + difference / norm


def test_one_round_gives_no_interval_and_no_notice():
    judged = judge(METRICS[THROUGHPUT], _values(1.3, noise=(1.0,)), "glibc", DESIGN)
    assert judged.arms == {} and judged.notice is None


def test_an_arm_missing_rounds_has_no_interval_below_two():
    values = _values(1.3)
    values["x"] = {1: 130.0}
    j = judge(METRICS[THROUGHPUT], values, "glibc", DESIGN).arms["x"]
    assert math.isnan(j.lo) and j.verdict == "undecided"
