"""Per-statement latencies at a price a Python client loop can pay.

HdrHistogram's record_value costs ~15 us per call from Python here (measured on this VM: 100,000
calls), as much as the statement itself costs the client. A read-while-writing reader records
one latency per point read, so it counts into log-linear buckets instead (an integer
bit_length, a shift and a list increment, ~0.5 us): 2**SUB_BITS buckets per power of two, so a
bucket spans at most 1/64 of its value (< 1.6% error). At the end the counts are put into an
HdrHistogram (one record_value per non-empty bucket, at the bucket's middle), which the runner
merges exactly with the other clients', as iibench does.
"""

from __future__ import annotations

from suites.workloads.iibench.latency import new_histogram

SUB_BITS = 7
_EXACT = 1 << SUB_BITS  # below this many microseconds a bucket is one microsecond
_HALF = 1 << (SUB_BITS - 1)


def bucket(us: int) -> int:
    """The bucket of a latency in whole microseconds (>= 0): the value itself below 128 us,
    else (bit length << 7) | the 6 bits after the leading one (64 buckets per power of two)."""
    if us < _EXACT:
        return us
    bl = us.bit_length()
    return (bl << SUB_BITS) | ((us >> (bl - SUB_BITS)) - _HALF)


def bucket_range(b: int) -> tuple[int, int]:
    """[low, high) microseconds of bucket `b`."""
    if b < _EXACT:
        return b, b + 1
    shift = (b >> SUB_BITS) - SUB_BITS
    low = (_HALF + (b & (_EXACT - 1))) << shift
    return low, low + (1 << shift)


class Buckets:
    """Counts of latencies by bucket; `add` is the per-statement cost."""

    def __init__(self):
        self.counts: dict[int, int] = {}

    def add(self, us: int) -> None:
        b = bucket(us)
        self.counts[b] = self.counts.get(b, 0) + 1

    def encoded_histogram(self) -> bytes:
        """The counts as an encoded HdrHistogram at each bucket's middle (suites.workloads.iibench.latency
        .merge reads it); empty bytes when nothing was recorded."""
        if not self.counts:
            return b""
        hist = new_histogram()
        for b, n in self.counts.items():
            low, high = bucket_range(b)
            hist.record_value(max(1, (low + high - 1) // 2), n)
        return hist.encode()
