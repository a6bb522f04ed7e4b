"""Per-batch latency histograms: recorded in each client process, merged in the runner.

HdrHistogram keeps every percentile exact to 3 significant digits in fixed memory, and its
compressed encoding is how a client process hands its whole distribution to the runner: merging
encoded histograms is exact, unlike averaging per-client percentiles.
"""

from __future__ import annotations

from hdrh.histogram import HdrHistogram

# Microseconds from 1 us to 1 hour: any batch slower than an hour is a hung server, not a latency.
LOWEST_US = 1
HIGHEST_US = 3_600_000_000
SIGNIFICANT_DIGITS = 3


def new_histogram() -> HdrHistogram:
    return HdrHistogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_DIGITS)


def record_us(hist: HdrHistogram, micros: float) -> None:
    """Record one latency, clamped into the trackable range (so one outlier cannot raise)."""
    hist.record_value(min(max(int(micros), LOWEST_US), HIGHEST_US))


def merge(encoded: list[bytes]) -> HdrHistogram:
    """One histogram holding every value of the encoded histograms."""
    total = new_histogram()
    for blob in encoded:
        if blob:
            total.decode_and_add(blob)
    return total


def summary_ms(hist: HdrHistogram) -> dict:
    """avg/p50/p95/p99/p99.9/max in milliseconds; None each when nothing was recorded."""
    keys = ("lat_avg_ms", "lat_p50_ms", "lat_p95_ms", "lat_p99_ms", "lat_p999_ms", "lat_max_ms")
    if hist.get_total_count() == 0:
        return dict.fromkeys(keys)
    values = (
        hist.get_mean_value(),
        hist.get_value_at_percentile(50),
        hist.get_value_at_percentile(95),
        hist.get_value_at_percentile(99),
        hist.get_value_at_percentile(99.9),
        hist.get_max_value(),
    )
    return {k: round(v / 1000.0, 3) for k, v in zip(keys, values, strict=True)}
