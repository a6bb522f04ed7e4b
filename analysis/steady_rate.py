"""Which per-level figure the throughput verdicts judge: the steady rate where the run has it.

Format 6 records `steady_qps`, the workload's rate over the measured window, which opens after
the ramp the steady-state rule found (rundir/derive/steady.py). sysbench's own qps covers the
whole level, ramp included: at 256 threads on this 2-core VM its first ~4 s ran 18% below the
steady rate with twice the spread between lives, and that ramp is not the allocator's doing.

A workload is judged on steady_qps only when every measured row of it has one (a run recorded
before format 6, or a level too short to have a window, leaves it empty): one figure per point,
never a mix of the two.

An alternate-design run (docs/designs.md) is judged on steady_qps always: it is the rate of the
level's blocks, paired with the other arms' blocks at the same moments, while its qps sums the
blocks and the idle time between them means nothing to the pairs. A level of it without a
steady rate (a block failed, or its raw record lost one on a --rederive) leaves that life out of
its point, named by `unmeasured`: the verdict says the rounds it stands on. Falling back to qps
there once changed a verdict in silence.
"""

from __future__ import annotations

from collections.abc import Callable

from analysis import run_design
from rundir.read import Run

STEADY = "steady_qps"


def _always_steady(run: Run) -> bool:
    return run_design.name(run.manifest) == run_design.ALTERNATE


def throughput_value(run: Run, workload: str, metric: str) -> Callable[[dict], float | None]:
    """The getter of a workload's throughput for the verdicts: steady_qps when `metric` is qps
    and every ok row of the workload has it, else `metric` itself."""
    if judged_column(run, workload, metric) == STEADY:
        return lambda r: r.get(STEADY)
    return lambda r, metric=metric: r.get(metric)


def judged_column(run: Run, workload: str, metric: str) -> str:
    """The results column throughput_value reads (for the report's and the CSV's words)."""
    if metric == "qps":
        rows = [r for r in run.ok_rows if r["workload"] == workload]
        if _always_steady(run) or (rows and all(r.get(STEADY) is not None for r in rows)):
            return STEADY
    return metric


def unmeasured(run: Run, workload: str, metric: str) -> list[str]:
    """One line per ok level of `workload` that has no figure in the judged column of an
    alternate run (its life is left out of its point's throughput verdict), else none."""
    if not _always_steady(run) or judged_column(run, workload, metric) != STEADY:
        return []
    return [
        f"cell {r['cell']}, {workload}@{r['threads']}: no steady rate from its blocks (a block "
        f"failed or served nothing), so round {r.get('repeat')} of {r['allocator']} is left out "
        "of this point's throughput verdict, which stands on the rounds it has"
        for r in run.ok_rows
        if r["workload"] == workload and r.get(STEADY) is None
    ]
