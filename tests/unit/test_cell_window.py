"""The measured window of a level (suites.cell): which interval reports bound it, how many
operations it holds, and the per-op rates computed over exactly that window."""

from __future__ import annotations

import pytest

from suites.cell import Interval, Window, measured_window, window_rates


def reports(ts, rate=1000.0, marked=True):
    return [Interval(float(t), rate, marked) for t in ts]


def test_sysbench_window_ends_on_a_report_the_load_outlasted():
    # --time=4, --report-interval=1: sysbench may or may not write the t=4 report as it stops.
    with_last = measured_window(reports([1, 2, 3, 4.0]), duration_s=4, interval_s=1)
    without = measured_window(reports([1, 2, 3]), duration_s=4, interval_s=1)
    for w in (with_last, without):
        assert (w.first_t_s, w.last_t_s) == (1, 3)
        assert (w.first_mark, w.last_mark) == (0, 2)
        assert w.ops == pytest.approx(2000.0)  # reports 2 and 3, 1 s each at 1000/s
        assert w.ops_per_s == pytest.approx(1000.0)


def test_iibench_window_uses_the_report_before_the_partial_last_one():
    ivs = reports([1, 2, 3]) + [Interval(3.4, 500.0, True)]  # the final partial interval
    w = measured_window(ivs, duration_s=None, interval_s=1)
    assert (w.first_t_s, w.last_t_s) == (1, 3) and w.ops == pytest.approx(2000.0)


def test_too_few_reports_give_no_window():
    assert measured_window(reports([1]), 4, 1) is None
    assert measured_window([], 4, 1) is None
    # two reports, the second being the level's end: nothing the load certainly outlasted
    assert measured_window(reports([1, 2]), duration_s=2, interval_s=1) is None
    assert measured_window(reports([1, 2]), duration_s=3, interval_s=1) is not None


def test_an_unmarked_report_is_skipped_and_its_operations_still_counted():
    ivs = [Interval(1, 100, False), Interval(2, 100, True), Interval(3, 200, True),
           Interval(4, 300, True), Interval(5, 300, True)]  # fmt: skip
    w = measured_window(ivs, duration_s=5, interval_s=1)
    assert (w.first_t_s, w.last_t_s) == (2, 4)
    assert (w.first_mark, w.last_mark) == (0, 2)  # indices among the marks, not the reports
    assert w.ops == pytest.approx(500.0)


def test_rates_use_the_window_and_its_operations():
    window = Window(0, 2, 1.0, 3.0, 2000.0)  # 1000 ops/s in the workload's clock
    win = {"window_s": 2.1, "cpu_user_s": 0.3, "cpu_sys_s": 0.12, "ctxsw_voluntary": 4000,
           "ctxsw_involuntary": 200, "ctxsw_source": "perf"}  # fmt: skip
    r = window_rates(win, window, "perf")
    assert r["window_s"] == 2.1 and r["window_ops"] == pytest.approx(2100.0)
    assert r["cpu_us_per_op"] == pytest.approx(0.42e6 / 2100, rel=1e-3)
    assert r["cpu_s_per_1m_ops"] == r["cpu_us_per_op"]  # the same figure, iibench's unit
    assert r["ctxsw_per_op"] == pytest.approx(2.0)
    assert r["ctxsw_per_1m_ops"] == pytest.approx(2e6)
    assert r["cpu_overhead"] == pytest.approx(0.2)


def test_context_switches_per_op_only_from_perf():
    window = Window(0, 1, 1.0, 2.0, 1000.0)
    win = {"window_s": 1.0, "cpu_user_s": 0.5, "cpu_sys_s": 0.0, "ctxsw_voluntary": 10,
           "ctxsw_involuntary": 0}  # fmt: skip
    r = window_rates(win, window, "procfs-task-sum")
    assert r["ctxsw_per_op"] is None and r["ctxsw_per_1m_ops"] is None
    assert r["cpu_us_per_op"] == pytest.approx(500.0)
    assert all(v is None for v in window_rates(None, window, "perf").values())
    assert all(v is None for v in window_rates(win, None, "perf").values())
