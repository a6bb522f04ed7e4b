"""A level run in blocks (the alternate design): each block's steady rate and the level's rate.

In the alternate design (suites/runner/alternate.py, docs/designs.md) every arm of a round is
alive at once and each level runs on them in turn, `blocks` blocks per arm, one arm loaded at a
time. The k-th blocks of the arms (pair k) ran next to each other in time, so the machine's drift
is (nearly) the same for both; the ratio of the two blocks' rates is a comparison made at the
same moments.

A block's rate: the mean of its interval reports after the first (the clients' connect and the
server's change of load are in it; the same report the measured window of a whole level leaves
out, rundir.derive.window), with the steady-state rule (rundir.derive.steady, MSER) dropping
more where it sees a ramp in what is left. A block without such reports has the workload's own
figure over the block.

The level's rate: the geometric mean of its blocks' rates. Then, for two arms with the same
number of blocks, log(level_B / level_A) is exactly the mean over pairs of log(block_B /
block_A): the verdict's per-round value (analysis/judge.py pairs arms by round) is the round's
mean log pair ratio. The round is the unit the interval is taken over, not the pair: blocks of
one server life share that life's state (its memory layout, its threads' placement), and pairs
of one round share a stretch of machine time, so pairs within a round are not independent
(docs/designs.md says more).

Pure: no I/O; rundir.derive.levels calls it on a raw level's recorded blocks.
"""

from __future__ import annotations

import math
import statistics

from rundir.derive.steady import mser_truncation


def block_rate(intervals, report_qps: float) -> float | None:
    """One block's steady rate (module docstring); None for a block that served nothing."""
    rates = [float(r) for _t, r in intervals[1:]]
    if rates:
        steady = mser_truncation(rates)
        kept = rates[steady.drop :] if steady is not None else rates
        rate = statistics.fmean(kept)
    else:
        rate = float(report_qps or 0.0)
    return rate if rate > 0 else None


def level_rate(blocks: list[dict]) -> float | None:
    """The level's rate from its blocks: the geometric mean of the blocks' rates, or None when
    a block failed or served nothing (the level is then not judged on a partial set: pairs
    would no longer line up)."""
    if not blocks or any(b.get("status") != "ok" for b in blocks):
        return None
    rates = [block_rate(b.get("intervals") or [], b.get("qps") or 0.0) for b in blocks]
    if any(r is None for r in rates):
        return None
    return math.exp(statistics.fmean(math.log(r) for r in rates))


def pair_log_ratios(base: list[dict], arm: list[dict]) -> list[float]:
    """log(arm's block k rate / base's block k rate) for every pair k both have (by index):
    what the level rates' ratio averages (the report shows their spread within a round)."""
    by_index = {b["index"]: b for b in base}
    out = []
    for b in arm:
        a = by_index.get(b["index"])
        if a is None:
            continue
        ra = block_rate(a.get("intervals") or [], a.get("qps") or 0.0)
        rb = block_rate(b.get("intervals") or [], b.get("qps") or 0.0)
        if ra and rb:
            out.append(math.log(rb / ra))
    return out


def cpu_us_per_op(blocks: list[dict]) -> float | None:
    """The server's CPU per query over the level's blocks: the CPU each block took (the server
    read before its clients started and after they exited) over the queries it served (its qps x
    its duration). None when a block failed or has no CPU reading (a run recorded before blocks
    had one): then the level says nothing, rather than something over part of its blocks.

    A block's CPU includes its clients' connecting and leaving, which a solo level's measured
    window leaves out: per query it errs high by the connect work over a block's queries
    (docs/designs.md measures it against solo lives)."""
    if not blocks or any(b.get("status") != "ok" or b.get("cpu_s") is None for b in blocks):
        return None
    ops = sum(float(b.get("qps") or 0.0) * float(b.get("duration_s") or 0.0) for b in blocks)
    cpu = sum(float(b["cpu_s"]) for b in blocks)
    return round(cpu * 1e6 / ops, 3) if ops > 0 and cpu >= 0 else None


def blocks_columns(blocks: list[dict] | None) -> dict:
    """The level's steady_qps and CPU per query from its blocks (nothing: not a blocked level)."""
    if blocks is None:
        return {}
    rate = level_rate(blocks)
    cpu = cpu_us_per_op(blocks)
    return {
        "steady_qps": None if rate is None else round(rate, 1),
        # one figure, two names (rundir.derive.window.window_rates)
        "cpu_us_per_op": cpu,
        "cpu_s_per_1m_ops": cpu,
    }
