"""The exposure columns (rundir/derive/exposure.py) from recorded readings: the level's span is
its end reading minus the reading before the level, per query and per transaction."""

from __future__ import annotations

from rundir.derive.exposure import level_columns, level_counts
from rundir.format import EXPOSURE_COLUMNS, FORMAT6_ADDED_COLUMNS


def _r(phase, at, calls, frees, nbytes):
    return {"phase": phase, "at": at, "alloc_calls": calls, "free_calls": frees,
            "alloc_bytes": nbytes}  # fmt: skip


READINGS = [
    {"phase": "startup", "at": "server start"},  # no counter figures: never used as a start
    _r("warmup", "warmup end", 1_000, 900, 64_000),
    _r("oltp_ro@8", "level end", 301_000, 290_900, 30_064_000),
    _r("point_select@8", "level end", 311_000, 300_900, 30_564_000),
]
REPORT = {"qps": 10_000.0, "tps": 625.0, "duration_s": 2.0}


def test_a_level_spans_from_the_reading_before_it():
    assert level_counts(READINGS, "oltp_ro@8", None) == {
        "alloc_calls": 300_000, "free_calls": 290_000, "alloc_bytes": 30_000_000,
    }  # fmt: skip
    got = level_columns(READINGS, "oltp_ro@8", None, REPORT)
    # 20,000 queries, 1,250 transactions
    assert got == {
        "malloc_calls_per_query": 15.0,
        "malloc_bytes_per_query": 1500.0,
        "free_calls_per_query": 14.5,
        "malloc_calls_per_txn": 240.0,
    }
    second = level_columns(READINGS, "point_select@8", "oltp_ro@8", REPORT)
    assert second["malloc_calls_per_query"] == 0.5


def test_a_missing_reading_leaves_the_level_empty_instead_of_merging_two():
    # the first level's end reading failed: the second cannot start from the warmup's
    gap = [r for r in READINGS if r["phase"] != "oltp_ro@8"]
    assert level_counts(gap, "point_select@8", "oltp_ro@8") is None
    assert set(level_columns(gap, "point_select@8", "oltp_ro@8", REPORT).values()) == {None}


def test_no_counter_no_figures():
    plain = [{k: v for k, v in r.items() if not k.endswith(("calls", "bytes"))} for r in READINGS]
    assert set(level_columns(plain, "oltp_ro@8", None, REPORT).values()) == {None}
    assert set(level_columns(None, "oltp_ro@8", None, REPORT).values()) == {None}
    # a level that completed no query has no per-query figure
    empty = level_columns(READINGS, "oltp_ro@8", None, {"qps": 0, "tps": 0, "duration_s": 2.0})
    assert set(empty.values()) == {None}


def test_counts_that_go_back_are_not_one_life():
    back = [_r("warmup", "warmup end", 10, 10, 10), _r("a", "level end", 5, 20, 20)]
    assert level_counts(back, "a", None) is None


def test_the_columns_are_format_6s_exposure_group():
    assert set(EXPOSURE_COLUMNS) <= set(FORMAT6_ADDED_COLUMNS)
    assert list(level_columns(READINGS, "oltp_ro@8", None, REPORT)) == list(EXPOSURE_COLUMNS)
