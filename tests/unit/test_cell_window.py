"""The measured window of a level (rundir.derive.window): which marks bound it, where they fall in the
workload's clock, how many operations it holds, and the per-op rates over exactly that window."""

from __future__ import annotations

import pytest

from rundir.derive.window import (
    Interval,
    Window,
    connected_in_window,
    measured_window,
    window_rates,
)


def reports(ts, rate=1000.0, lag=0.05, start=100.0):
    """Reports at workload times `ts`, each marked `lag` s later (our clock = start + t)."""
    return [Interval(float(t), rate, start + t + lag) for t in ts]


def marks_of(ivs, *extra):
    return sorted([iv.mark_t for iv in ivs if iv.mark_t is not None] + list(extra))


def test_sysbench_window_ends_half_an_interval_before_the_planned_end():
    # --time=4, --report-interval=1: sysbench may or may not write the t=4 report as it stops.
    for ivs in (reports([1, 2, 3, 4.0]), reports([1, 2, 3])):
        w = measured_window(ivs, marks_of(ivs), planned_s=4, interval_s=1)
        assert (w.first_t_s, w.last_t_s) == pytest.approx((1, 3))
        assert (w.first_mark, w.last_mark) == (0, 2)
        assert w.ops == pytest.approx(2000.0)  # reports 2 and 3, 1 s each at 1000/s
        assert w.ops_per_s == pytest.approx(1000.0)


def test_periodic_marks_carry_the_window_to_the_end_of_the_load():
    ivs = reports([1, 2, 3, 4.0])
    periodic = [101.3, 101.55, 103.3, 103.55, 103.8]  # 103.55 - 100.05 = 3.5: the limit
    w = measured_window(ivs, marks_of(ivs, *periodic), planned_s=4, interval_s=1)
    assert (w.first_t_s, w.last_t_s) == pytest.approx((1, 3.5))
    assert w.ops == pytest.approx(2500.0)
    # periodic marks taken before the first report (clients still connecting) never start it
    w = measured_window(ivs, marks_of(ivs, 100.5), planned_s=4, interval_s=1)
    assert w.first_t_s == pytest.approx(1.0)


def test_late_marks_are_placed_in_the_workload_clock_and_teardown_marks_dropped():
    # What 1536 clients on 2 cores did: the runner read reports 2..5 in one burst, 1.5 s late.
    ivs = [
        Interval(1.0, 1000.0, 101.05),
        Interval(2.0, 2000.0, 103.5),
        Interval(3.0, 2000.0, 103.52),  # at 103.52 the load was already at t=3.47
        Interval(4.0, 2000.0, 104.9),  # t=4.85: past duration - interval/2
        Interval(5.0, 500.0, 105.2),  # the drain after --time
    ]
    w = measured_window(ivs, marks_of(ivs), planned_s=5, interval_s=1)
    assert w.first_t_s == pytest.approx(1.0)
    assert w.last_t_s == pytest.approx(3.47)  # 103.52 - offset 100.05
    assert w.last_mark == 2
    # 1000/s is the first report's rate, before t=1 only; from 1 to 3.47: 2000/s
    assert w.ops == pytest.approx(2000.0 * 2.47)
    # every mark after the load: no window rather than one that includes teardown
    late = [Interval(1.0, 1000.0, 101.0), Interval(2.0, 1000.0, 106.0)]
    assert measured_window(late, marks_of(late), planned_s=4, interval_s=1) is None


def test_iibench_window_spans_its_bracketing_reports():
    # iibench reports t=0 as its clock starts and a final partial interval when the last insert
    # returned, before any client disconnects: the whole insert load is the window.
    ivs = [Interval(0.0, 0.0, 50.0), *reports([1, 2, 3], lag=0, start=50.0)]
    ivs.append(Interval(3.4, 500.0, 53.4))
    after = 53.6  # a periodic mark after the last report: clients stopping, not in the window
    w = measured_window(ivs, marks_of(ivs, after), None, 1, last_ends_load=True)
    assert (w.first_t_s, w.last_t_s) == pytest.approx((0, 3.4))
    assert w.ops == pytest.approx(3000.0 + 200.0)
    # without the bracketing promise the partial last report is never the end
    ivs = reports([1, 2, 3]) + [Interval(3.4, 500.0, 103.45)]
    w = measured_window(ivs, marks_of(ivs), None, 1)
    assert (w.first_t_s, w.last_t_s) == pytest.approx((1, 3)) and w.ops == pytest.approx(2000.0)


def test_iibench_level_shorter_than_an_interval_keeps_its_window():
    # What CI saw: 20,000 rows in 0.355 s, so only the t=0 report and the final one, and the
    # final mark came 1 ms later after its report than the first did. Placed by the promptest
    # offset it falls past the last report; it still closes the window (taken before any client
    # could disconnect), with every row in it.
    ivs = [Interval(0.0, 0.0, 1.679), Interval(0.355, 56338.0, 2.035)]
    w = measured_window(ivs, marks_of(ivs), None, 1, last_ends_load=True)
    assert w is not None and (w.first_mark, w.last_mark) == (0, 1)
    assert w.last_t_s == pytest.approx(0.356)
    assert w.ops == pytest.approx(56338.0 * 0.355)
    rates = window_rates(
        {
            "window_s": 0.356,
            "cpu_user_s": 0.25,
            "cpu_sys_s": 0.02,
            "ctxsw_voluntary": 1000,
            "ctxsw_involuntary": 44,
        },
        w,
        "taskstats",
    )
    assert rates["window_ops"] == pytest.approx(56338.0 * 0.355, rel=1e-3)
    assert rates["cpu_us_per_op"] == pytest.approx(0.27e6 / (56338.0 * 0.355), rel=1e-3)
    # a periodic mark after the final report (clients stopping) is still not the end
    w = measured_window(ivs, marks_of(ivs, 2.2), None, 1, last_ends_load=True)
    assert w.last_mark == 1


def test_too_few_reports_give_no_window():
    ivs = reports([1])
    assert measured_window(ivs, marks_of(ivs, 101.5), 4, 1) is None
    assert measured_window([], [], 4, 1) is None
    # two reports, the second being the level's end: nothing the load certainly outlasted
    ivs = reports([1, 2])
    assert measured_window(ivs, marks_of(ivs), planned_s=2, interval_s=1) is None
    assert measured_window(ivs, marks_of(ivs), planned_s=3, interval_s=1) is not None


def test_an_unmarked_report_still_counts_its_operations():
    ivs = reports([1, 2, 3, 4, 5], rate=100.0)
    ivs[0] = Interval(1, 100.0, None)
    ivs[2] = Interval(3, 200.0, 103.05)
    ivs[3] = Interval(4, 300.0, 104.05)
    w = measured_window(ivs, marks_of(ivs), planned_s=5, interval_s=1)
    assert (w.first_t_s, w.last_t_s) == pytest.approx((2, 4))
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


def test_context_switches_per_op_only_from_whole_process_sources():
    window = Window(0, 1, 1.0, 2.0, 1000.0)
    win = {"window_s": 1.0, "cpu_user_s": 0.5, "cpu_sys_s": 0.0, "ctxsw_voluntary": 10,
           "ctxsw_involuntary": 0}  # fmt: skip
    assert window_rates(win, window, "taskstats")["ctxsw_per_op"] == pytest.approx(0.01)
    assert window_rates(win, window, "perf")["ctxsw_per_op"] == pytest.approx(0.01)
    r = window_rates(win, window, "procfs-task-sum")
    assert r["ctxsw_per_op"] is None and r["ctxsw_per_1m_ops"] is None
    assert r["cpu_us_per_op"] == pytest.approx(500.0)
    assert all(v is None for v in window_rates(None, window, "perf").values())
    assert all(v is None for v in window_rates(win, None, "perf").values())


def test_threads_connected_only_when_answered_inside_the_window():
    window = Window(0, 5, 1.0, 3.0, 2000.0, last_mark_t=13.0)
    assert connected_in_window({"threads_connected": 1537, "threads_connected_t_s": 12.5}, window)
    late = {"threads_connected": 348, "threads_connected_t_s": 14.2}  # clients were leaving
    assert connected_in_window(late, window) is None
    assert (
        connected_in_window({"threads_connected": 65, "threads_connected_t_s": 1.0}, None) is None
    )
