"""The statistics: exact median intervals, Student's t, Welch ratios, batch means."""

from __future__ import annotations

import math
import statistics

import pytest

from analysis.stats import (
    batch_means,
    diff_ci,
    median_ci,
    ratio_ci,
    spread_pct,
    t_quantile,
)


@pytest.mark.parametrize(
    ("df", "expected"),
    [(1, 12.706), (2, 4.303), (4, 2.776), (10, 2.228), (30, 2.042), (1e9, 1.960)],
)
def test_t_quantile_matches_the_tables(df, expected):
    assert t_quantile(0.975, df) == pytest.approx(expected, abs=2e-3)


def test_median_ci_is_a_95_percent_t_interval_on_the_log_scale():
    ci = median_ci([3.0, 1.0, 2.0])
    assert ci.median == 2.0 and ci.coverage == 0.95 and ci.n == 3
    logs = [math.log(x) for x in (1.0, 2.0, 3.0)]
    mean, sd = sum(logs) / 3, statistics.stdev(logs)
    half = 4.303 * sd / math.sqrt(3)  # t(0.975, df=2)
    assert ci.lo == pytest.approx(math.exp(mean - half), rel=1e-3)
    assert ci.hi == pytest.approx(math.exp(mean + half), rel=1e-3)
    assert "log" in ci.method


def test_median_ci_is_centred_on_the_geometric_mean_as_compare_is():
    """compare's ratio is one of geometric means; the report's interval is centred on the same."""
    xs = [100.0, 103.0, 97.0, 101.0]
    ci = median_ci(xs)
    gm = math.exp(sum(math.log(x) for x in xs) / len(xs))
    assert math.sqrt(ci.lo * ci.hi) == pytest.approx(gm)  # symmetric around the geometric mean


def test_median_ci_with_zeros_falls_back_to_the_linear_scale():
    ci = median_ci([0.0, 1.0, 2.0])
    assert ci.method == "Student t" and ci.lo < 0 < 1.0 < ci.hi


def test_median_ci_large_sample_narrows():
    ci = median_ci([float(x) for x in range(10, 30)])
    assert 10.0 < ci.lo < ci.median < ci.hi < 30.0


def test_single_value_has_no_interval():
    ci = median_ci([5.0])
    assert (ci.lo, ci.hi, ci.coverage, ci.unstable) == (5.0, 5.0, 0.0, False)


def test_unstable_when_spread_exceeds_ten_percent():
    assert median_ci([100.0, 104.0, 109.0]).unstable is False
    assert median_ci([100.0, 104.0, 112.0]).unstable is True
    assert spread_pct([100.0, 110.0]) == pytest.approx(10 / 105 * 100)


def test_ratio_ci_detects_a_ten_percent_drop():
    est = ratio_ci([100.0, 102.0, 98.0], [90.0, 91.5, 88.5])
    assert est.value == pytest.approx(0.9, abs=0.005)
    assert est.hi < 1.0 and est.excludes(1.0)


def test_ratio_ci_overlapping_samples_are_not_significant():
    est = ratio_ci([100.0, 105.0, 95.0], [101.0, 96.0, 104.0])
    assert est.lo < 1.0 < est.hi
    assert not est.excludes(1.0)


def test_ratio_ci_needs_two_values_per_side():
    with pytest.raises(ValueError):
        ratio_ci([100.0], [90.0, 91.0])


def test_diff_ci_is_symmetric_around_the_difference():
    est = diff_ci([10.0, 12.0, 11.0], [20.0, 22.0, 21.0])
    assert est.value == pytest.approx(10.0)
    assert est.value - est.lo == pytest.approx(est.hi - est.value)


def test_batch_means_keep_the_latest_intervals():
    assert batch_means(list(range(23))) == [4.5, 8.5, 12.5, 16.5, 20.5]
    assert all(not math.isnan(x) for x in batch_means([1.0] * 10))


def test_batch_means_refuse_series_too_short_to_decorrelate():
    """Raw 1-second intervals are autocorrelated: returning them would make intervals too narrow."""
    assert batch_means([1.0, 2.0, 3.0]) == []
    assert batch_means([1.0] * 9) == []
