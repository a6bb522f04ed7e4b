"""The measured window of a level: the stretch in which every client is connected and the load
runs, bounded by two of the collectors' window marks, and the per-operation rates over it.

Numerator (CPU, context switches, timed by the collectors) and operation count (timed by the
workload) must cover the same time; clients connecting and disconnecting fall outside. Used by
rundir.derive.levels to fill the per-op columns of results.csv (pure: no I/O).
"""

from __future__ import annotations

from dataclasses import dataclass

from rundir.format import WHOLE_PROCESS_SOURCES, WINDOW_RATE_COLUMNS


@dataclass
class Interval:
    """One interval report of a running level, as the workload gave it, and when the collectors
    took a window mark for it (None: no mark)."""

    t_s: float  # the report's time in the workload's own clock (seconds since it started timing)
    ops_per_s: float  # queries/s (sysbench) or rows/s (iibench) over the interval ending at t_s
    mark_t: float | None  # our clock: seconds since the collectors started


@dataclass
class Window:
    """The measured window of a level: between two window marks, placed in the workload's clock."""

    first_mark: int  # indices into the phase's window marks
    last_mark: int
    first_t_s: float  # the two marks in the workload's clock
    last_t_s: float
    ops: float  # operations the workload counted between them (its interval rates, integrated)
    last_mark_t: float = float("inf")  # the closing mark in our clock (seconds since start)

    @property
    def workload_s(self) -> float:
        return self.last_t_s - self.first_t_s

    @property
    def ops_per_s(self) -> float:
        return self.ops / self.workload_s


def load_end(
    intervals: list[Interval],
    planned_s: float | None,
    interval_s: float | None,
    last_ends_load: bool = False,
) -> float:
    """The last moment of full load in the workload's clock, as measured_window bounds it: the
    last report (an insert load), half an interval before the planned end (sysbench), or the
    second-to-last report (neither). Needs at least two reports."""
    limit = intervals[-1].t_s
    if not last_ends_load:
        if planned_s is not None:
            limit = min(limit, planned_s - (interval_s or 0.0) / 2)
        else:
            limit = intervals[-2].t_s
    return limit


def load_rates(
    intervals: list[Interval],
    planned_s: float | None,
    interval_s: float | None,
    last_ends_load: bool = False,
) -> list[float]:
    """The rates of the reports a window from the first report's mark can hold (reports 1.. up
    to load_end): the series the steady-state rule judges; its i-th value is report i+1's."""
    if len(intervals) < 2:
        return []
    end = load_end(intervals, planned_s, interval_s, last_ends_load)
    return [iv.ops_per_s for iv in intervals[1:] if iv.t_s <= end + 1e-9]


def _ops_between(intervals: list[Interval], a: float, b: float) -> float:
    """Operations from a to b (workload clock), each report's rate held over its own interval."""
    ops = 0.0
    for prev, iv in zip(intervals, intervals[1:], strict=False):
        lo, hi = max(a, prev.t_s), min(b, iv.t_s)
        if hi > lo:
            ops += iv.ops_per_s * (hi - lo)
    return ops


def measured_window(
    intervals: list[Interval],
    mark_times: list[float],
    planned_s: float | None,
    interval_s: float | None,
    last_ends_load: bool = False,
    start_report: int = 0,
) -> Window | None:
    """Pick the measured window of a level (None: no two marks inside the load).

    `intervals` are the workload's reports with the mark taken at each; `mark_times` are all the
    phase's marks in order (those and the periodic ones between reports, same clock).

    A mark comes after its report, sometimes long after: on 2 cores under 1536 clients the runner
    that reads the reports waits for CPU like every other thread. So marks are placed in the
    workload's clock: offset = min(mark - report) over the reports (the promptest one), and a
    mark at our time m sits at m - offset there — never earlier than it really was.
    - Start: the first report's mark. The load runs with every client connected from the first
      report on (sysbench reports once its threads are running events; iibench reports t=0 as
      its clock starts); marks before it are not used. With `start_report` (the reports the
      steady-state rule called ramp, rundir/derive/steady.py) the mark of that report instead,
      or of the first report after it that has one.
    - End: the last mark still inside the load. With `last_ends_load` (iibench: its last report
      comes when the last insert has returned, before any client disconnects) the last report's
      own mark, however late after its report it came.
      Otherwise (sysbench) up to half an interval before the planned end `planned_s` (the raw clock's planned length; results.csv's duration_s is the measured one): after it,
      sysbench stops starting events and drains the ones in flight, then disconnects every
      thread before its cumulative report — teardown the operation count does not cover. With
      neither, up to the second-to-last report (the load outlasted it).
    - Operations: the workload's interval rates integrated between the two marks' places, so a
      late mark neither gains nor loses operations relative to the CPU it measures.
    """
    reported = [iv for iv in intervals if iv.mark_t is not None]
    if not reported or len(intervals) < 2:
        return None
    offset = min(iv.mark_t - iv.t_s for iv in reported)
    # The window's end as a bound in our clock.
    closing = intervals[-1].mark_t
    if last_ends_load and closing is not None:
        # The last report's own mark was taken before any client could disconnect (they wait
        # for it): it closes the window however late after its report it came. Placed by the
        # promptest offset it may fall a hair past the last report; the lag adds no operations
        # (no rate is known past the last report) and only the idle load's CPU.
        end = closing
    else:
        # no rate is known past the last report
        end = load_end(intervals, planned_s, interval_s, last_ends_load) + offset
    opening = next((iv.mark_t for iv in intervals[start_report:] if iv.mark_t is not None), None)
    if opening is None:
        return None
    first = next((i for i, t in enumerate(mark_times) if abs(t - opening) < 1e-6), None)
    if first is None:
        return None
    inside = [i for i in range(first + 1, len(mark_times)) if mark_times[i] <= end + 1e-9]
    if not inside:
        return None
    last = inside[-1]
    a, b = mark_times[first] - offset, mark_times[last] - offset
    return Window(first, last, a, b, _ops_between(intervals, a, b), mark_times[last])


def connected_in_window(fig: dict, window: Window | None):
    """Threads_connected as read mid-level, or None when the server answered only after the
    measured window closed (its clients may have been leaving already) or there is no window."""
    answered = fig.get("threads_connected_t_s")
    if window is None or answered is None or answered > window.last_mark_t:
        return None
    return fig.get("threads_connected")


def window_rates(win: dict | None, window: Window | None, ctxsw_source: str | None) -> dict:
    """Per-operation rates over the measured window (all None without one).

    The collectors' window is timed by us, the operations by the workload: the workload's rate
    over its side of the window times our window's length is the operations the server served
    while we measured (the marks trail the reports by the polling delay; in steady load the rate
    is the same on both sides, so the delay cancels instead of biasing the count).
    An op is a query for sysbench and a row (document) for iibench. Context switches per op only
    from a whole-process source (taskstats, perf): the procfs fallback loses exited threads (its
    counts stay in the row, named by ctxsw_source).
    """
    out = dict.fromkeys(("window_s", "window_ops", *WINDOW_RATE_COLUMNS))
    if not win or window is None or window.workload_s <= 0 or not win.get("window_s"):
        return out
    wall = win["window_s"]
    ops = window.ops_per_s * wall
    out["window_s"] = round(wall, 3)
    out["window_ops"] = round(ops, 1)
    if win.get("cpu_user_s") is not None and win.get("cpu_sys_s") is not None:
        cpu = win["cpu_user_s"] + win["cpu_sys_s"]
        out["cpu_overhead"] = round(cpu / wall, 4)
        if ops > 0:  # µs per op and s per 1M ops: one figure, two names
            out["cpu_us_per_op"] = out["cpu_s_per_1m_ops"] = round(cpu * 1e6 / ops, 3)
    if ctxsw_source in WHOLE_PROCESS_SOURCES and ops > 0 and win.get("ctxsw_voluntary") is not None:
        csw = win["ctxsw_voluntary"] + win["ctxsw_involuntary"]
        out["ctxsw_per_op"] = round(csw / ops, 5)
        out["ctxsw_per_1m_ops"] = round(csw * 1e6 / ops, 1)
    return out
