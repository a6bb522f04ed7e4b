"""Latency histograms cross process boundaries encoded, and merge exactly."""

import random

from suites.workloads.iibench.latency import merge, new_histogram, record_us, summary_ms


def test_merge_of_encoded_histograms_equals_one_histogram_of_all_values():
    rng = random.Random(3)
    parts = [[rng.randint(100, 200_000) for _ in range(2000)] for _ in range(5)]
    encoded = []
    whole = new_histogram()
    for values in parts:
        h = new_histogram()
        for v in values:
            record_us(h, v)
            record_us(whole, v)
        encoded.append(h.encode())
    merged = merge(encoded)
    assert merged.get_total_count() == 10_000
    for p in (50, 95, 99, 99.9, 100):
        assert merged.get_value_at_percentile(p) == whole.get_value_at_percentile(p)


def test_merge_keeps_each_clients_tail():
    fast, slow = new_histogram(), new_histogram()
    for _ in range(990):
        record_us(fast, 1000)  # 1 ms
    for _ in range(10):
        record_us(slow, 500_000)  # 500 ms
    s = summary_ms(merge([fast.encode(), slow.encode(), b""]))
    assert s["lat_p50_ms"] == 1.0
    assert 499 <= s["lat_p999_ms"] <= 501
    assert 499 <= s["lat_max_ms"] <= 501
    assert 5.0 < s["lat_avg_ms"] < 6.1


def test_out_of_range_values_are_clamped_not_raised():
    h = new_histogram()
    record_us(h, 0)
    record_us(h, 10**12)
    assert h.get_total_count() == 2


def test_empty_summary_is_all_none():
    assert set(summary_ms(new_histogram()).values()) == {None}
