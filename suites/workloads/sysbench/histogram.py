"""Latency percentiles from sysbench's own histogram, with sysbench's own maths.

sysbench 1.0.20 records every event's latency (ms) into 1024 buckets spaced evenly in log(value)
between 0.001 ms and 100 000 ms (about 1.8 % per bucket). Bucket i stands for the value
exp(i / range_mult + range_deduct); an event goes to the nearest bucket. A percentile is the value
of the first bucket at which the running count reaches round(total * p / 100) — the rule sysbench
uses for its single --percentile, so our p95 equals the "95th percentile" it prints, and p50, p99
and p99.9 come from the same distribution instead of four separate runs.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from suites.errors import SuiteError

SIZE = 1024
RANGE_MIN_MS = 0.001
RANGE_MAX_MS = 100_000.0


@dataclass(frozen=True)
class LatencyHistogram:
    """Sparse bucket counts {bucket index: events} plus the bucket geometry."""

    counts: Mapping[int, int] = field(default_factory=dict)
    array_size: int = SIZE
    range_min: float = RANGE_MIN_MS
    range_max: float = RANGE_MAX_MS

    def __post_init__(self):
        if self.array_size < 2 or not 0 < self.range_min < self.range_max:
            raise SuiteError(
                f"latency histogram: bad geometry size={self.array_size} "
                f"range={self.range_min}..{self.range_max}"
            )
        for i, c in self.counts.items():
            if not 0 <= i < self.array_size or c < 0:
                raise SuiteError(f"latency histogram: bucket {i} with count {c} is out of range")

    @classmethod
    def from_pairs(cls, pairs: Iterable[Iterable[int]], **geometry) -> LatencyHistogram:
        """From [[index, count], ...] as the wrapper writes them."""
        counts: dict[int, int] = {}
        for pair in pairs:
            i, c = (int(x) for x in pair)
            counts[i] = counts.get(i, 0) + c
        return cls(counts, **geometry)

    @property
    def range_deduct(self) -> float:
        return math.log(self.range_min)

    @property
    def range_mult(self) -> float:
        return (self.array_size - 1) / (math.log(self.range_max) - self.range_deduct)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def value(self, index: int) -> float:
        """The latency (ms) bucket `index` stands for."""
        return math.exp(index / self.range_mult + self.range_deduct)

    def bucket_of(self, value_ms: float) -> int:
        """The bucket sysbench puts a latency of `value_ms` in (nearest in log space)."""
        if value_ms <= 0:
            return 0
        i = math.floor((math.log(value_ms) - self.range_deduct) * self.range_mult + 0.5)
        return min(max(i, 0), self.array_size - 1)

    def percentile(self, p: float) -> float | None:
        """The p-th percentile in ms; None for an empty histogram."""
        if not 0 < p <= 100:
            raise SuiteError(f"latency percentile must be in (0, 100], got {p}")
        total = self.total
        if total == 0:
            return None
        # sysbench: first bucket where the running count reaches floor(total * p / 100 + 0.5).
        # With fewer events than 1/(1-p) that target can round to 0; one event is the least
        # a percentile can stand on, so the target never goes below 1.
        target = max(1, math.floor(total * p / 100 + 0.5))
        running = 0
        for i in sorted(self.counts):
            running += self.counts[i]
            if running >= target:
                return self.value(i)
        return self.value(max(self.counts))  # pragma: no cover - running reaches total

    def percentiles(self, ps: Iterable[float] = (50, 95, 99, 99.9)) -> dict[float, float | None]:
        return {p: self.percentile(p) for p in ps}
