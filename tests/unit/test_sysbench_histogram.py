"""Percentile maths on sysbench's log-bucket histogram (hand-made counts and a recorded run)."""

import math
from pathlib import Path

import pytest

from suites.errors import SuiteError
from suites.workloads.sysbench.histogram import LatencyHistogram
from suites.workloads.sysbench.records import read_records

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "sysbench"


def test_geometry_matches_sysbench():
    h = LatencyHistogram()
    assert h.value(0) == pytest.approx(0.001)
    assert h.value(1023) == pytest.approx(100_000)
    # one bucket is ~1.8 % wide: 1e8 spread over 1023 steps in log space
    assert h.value(1) / h.value(0) == pytest.approx(math.exp(math.log(1e8) / 1023))
    for v in (0.0123, 0.5, 3.7, 41.9, 2500.0):
        assert h.value(h.bucket_of(v)) == pytest.approx(v, rel=0.01)
    assert h.bucket_of(1e9) == 1023 and h.bucket_of(1e-9) == 0 and h.bucket_of(0) == 0


def test_percentile_rule_hand_computed():
    # 100 events: 50 in bucket 300, 45 in bucket 400, 4 in bucket 500, 1 in bucket 600.
    h = LatencyHistogram({300: 50, 400: 45, 500: 4, 600: 1})
    assert h.total == 100
    assert h.percentile(50) == h.value(300)  # target 50 reached exactly at bucket 300
    assert h.percentile(51) == h.value(400)
    assert h.percentile(95) == h.value(400)  # running count 95 reaches target 95
    assert h.percentile(96) == h.value(500)
    assert h.percentile(99) == h.value(500)
    assert h.percentile(99.9) == h.value(600)  # round(99.9) = 100 -> last event
    assert h.percentile(100) == h.value(600)


def test_small_counts_never_target_zero_events():
    h = LatencyHistogram({700: 1})
    # floor(1 * 0.3 + 0.5) = 0 would pick bucket 0 (0.001 ms), a latency nobody saw
    assert h.percentile(30) == h.value(700)


def test_empty_histogram_has_no_percentiles():
    assert LatencyHistogram().percentile(95) is None


def test_percentiles_are_monotonic_on_recorded_run():
    recs = read_records(FIX / "point_select@1536.jsonl")
    ps = recs.histogram.percentiles((50, 90, 95, 99, 99.9, 100))
    values = list(ps.values())
    assert values == sorted(values) and values[0] > 0


@pytest.mark.parametrize("bad", [{-1: 1}, {1024: 1}, {3: -2}])
def test_bad_buckets_are_refused(bad):
    with pytest.raises(SuiteError, match="bucket"):
        LatencyHistogram(bad)


def test_bad_percentile_is_refused():
    with pytest.raises(SuiteError, match="percentile"):
        LatencyHistogram({1: 1}).percentile(0)


def test_from_pairs_merges_duplicates():
    h = LatencyHistogram.from_pairs([[5, 2], [5, 3], [9, 1]])
    assert dict(h.counts) == {5: 5, 9: 1}
