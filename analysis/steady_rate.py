"""Which per-level figure the throughput verdicts judge: the steady rate where the run has it.

Format 6 records `steady_qps`, the workload's rate over the measured window, which opens after
the ramp the steady-state rule found (rundir/derive/steady.py). sysbench's own qps covers the
whole level, ramp included: at 256 threads on this 2-core VM its first ~4 s ran 18% below the
steady rate with twice the spread between lives, and that ramp is not the allocator's doing.

A workload is judged on steady_qps only when every measured row of it has one (a run recorded
before format 6, or a level too short to have a window, leaves it empty): one figure per point,
never a mix of the two.
"""

from __future__ import annotations

from collections.abc import Callable

from rundir.read import Run

STEADY = "steady_qps"


def throughput_value(run: Run, workload: str, metric: str) -> Callable[[dict], float | None]:
    """The getter of a workload's throughput for the verdicts: steady_qps when `metric` is qps
    and every ok row of the workload has it, else `metric` itself."""
    if metric == "qps":
        rows = [r for r in run.ok_rows if r["workload"] == workload]
        if rows and all(r.get(STEADY) is not None for r in rows):
            return lambda r: r.get(STEADY)
    return lambda r, metric=metric: r.get(metric)


def judged_column(run: Run, workload: str, metric: str) -> str:
    """The results column throughput_value reads (for the report's and the CSV's words)."""
    if metric == "qps":
        rows = [r for r in run.ok_rows if r["workload"] == workload]
        if rows and all(r.get(STEADY) is not None for r in rows):
            return STEADY
    return metric
