"""The allocator's exposure in words: how many calls a query makes into the allocator, and how
much each call's cost would have to change for the allocator to move throughput by 5%.

A query costs the server `cpu_us_per_op` of CPU and makes `malloc_calls_per_query` allocation
calls and `free_calls_per_query` free calls (rundir.format.EXPOSURE_COLUMNS). An allocator can
change the query's CPU only through those calls, so a 5% change of CPU per query needs each call
to cost, on average,

    needed = 5% x cpu_us_per_op / (allocation + free calls per query)

more (or less) under one allocator than under another. The run records the largest difference
in per-call cost measured between the allocators installed on the machine and the run's own
arms (a custom library, a variant: manifest call_cost, servers/callcost.py: malloc+free pairs, 1
thread and one per CPU), for small blocks (16 B-8 kB)
and for large ones (32 kB-1 MB, where allocators differ by ten times more). What the installed
allocators could change per query is bounded by

    possible = small bound x (calls + frees - 2 L) + large bound x 2 L,
    L = min(allocation calls, bytes asked / 32 kB)   (at most that many calls can be large)

Where 5% of the CPU per query is at least MARGIN times `possible`, no installed allocator can
move this point's throughput by 5% through its calls: a throughput verdict the intervals left
undecided is decided as CANNOT_MATTER ("cannot matter here") instead. MARGIN is wide on purpose:
the microbenchmark's calls are typical ones, and a server's can be dearer (cache misses, frees
from another thread, a contended arena), so only an order of magnitude is a clear margin.

The premise is a CPU-bound server (throughput follows CPU per query): on the 2-core machines
this was written for every level of the stock workloads is. Pure: reads a Run only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from analysis.judge import Judged
from analysis.metrics import UNDECIDED
from analysis.stats import median
from analysis.table_model import Cell, Table, fmt, text
from analysis.workload_words import words
from rundir.read import Run

EFFECT = 0.05  # the change asked about: 5% of CPU per query
MARGIN = 10.0  # needed / bound at or above which the allocator cannot matter
CANNOT_MATTER = "cannot matter"
WORD = "cannot matter here"
MEANING = (
    "the allocator cannot matter here: a 5% change of throughput would need each call into the "
    f"allocator to cost at least {MARGIN:g} times more than the largest difference measured "
    "between the allocators installed here and this run's arms"
)


LARGE_MIN = 32 * 1024  # the large class's smallest block (servers/callcost.py LARGE_MIN)


def call_bound(run: Run) -> dict | None:
    """The run's recorded bounds: {"small": {"ns", "threads", "cheapest", "dearest"}, "large":
    {...}}, or None when the run recorded none (counting off, an older run, a failed
    measurement)."""
    cost = run.manifest.get("call_cost") or {}
    b = cost.get("bound") if isinstance(cost, dict) else None
    if not isinstance(b, dict) or not all(isinstance(b.get(c), dict) for c in ("small", "large")):
        return None
    return b


def possible_ns(exp: dict, bound: dict) -> float:
    """The most the installed allocators' per-call costs can differ over one query (ns)."""
    calls, frees = exp["calls"], exp["frees"] or 0.0
    large = min(calls, (exp["bytes"] or 0.0) / LARGE_MIN)
    small_ns, large_ns = float(bound["small"]["ns"]), float(bound["large"]["ns"])
    return small_ns * max(calls + frees - 2 * large, 0.0) + large_ns * 2 * large


def margin_of(exp: dict, bound: dict | None) -> float | None:
    """5% of the CPU per query over what the allocators could change of it (None: unknown)."""
    if bound is None or exp["needed_ns"] is None:
        return None
    possible = possible_ns(exp, bound)
    if possible <= 0:
        return None
    return EFFECT * exp["cpu_us"] * 1000.0 / possible


def needed_ns(cpu_us_per_op: float | None, calls_per_query: float | None) -> float | None:
    """The per-call cost difference (ns) that would change CPU per query by EFFECT."""
    if not cpu_us_per_op or not calls_per_query or cpu_us_per_op <= 0 or calls_per_query <= 0:
        return None
    return EFFECT * cpu_us_per_op * 1000.0 / calls_per_query


def _med(rows: Iterable[dict], column: str) -> float | None:
    vals = [float(r[column]) for r in rows if r.get(column) not in (None, "")]
    return median(vals) if vals else None


def point_exposure(rows: list[dict]) -> dict | None:
    """Medians over the rows of one point (every allocator's lives: the calls a query makes are
    the server's, not the allocator's): calls, frees, bytes per query, calls per transaction,
    CPU per query, and the per-call difference a 5% change needs. None without counts."""
    calls = _med(rows, "malloc_calls_per_query")
    if calls is None:
        return None
    frees = _med(rows, "free_calls_per_query")
    cpu = _med(rows, "cpu_us_per_op")
    return {
        "calls": calls,
        "frees": frees,
        "bytes": _med(rows, "malloc_bytes_per_query"),
        "calls_per_txn": _med(rows, "malloc_calls_per_txn"),
        "cpu_us": cpu,
        "needed_ns": needed_ns(cpu, calls + (frees or 0.0)),
    }


def _rows_at(run: Run, server: str, workload: str, thp: str, threads) -> list[dict]:
    return [
        r
        for r in run.ok_rows
        if r["workload"] == workload
        and r["server"] == server
        and r["thp"] == thp
        and r["threads"] == threads
        and not run.is_standin(r["cell"])
    ]


def cannot_matter(run: Run, point: tuple) -> bool:
    """Whether no installed allocator can move throughput at `point` (server, workload, thp,
    threads) by EFFECT through its calls (see the module's doc)."""
    bound = call_bound(run)
    if bound is None:
        return False  # nothing to decide from: no rows need reading
    exp = point_exposure(_rows_at(run, *point))
    if exp is None:
        return False
    m = margin_of(exp, bound)
    return m is not None and m >= MARGIN


def settle(run: Run, point: tuple, judged: Judged) -> Judged:
    """The verdict hook (analysis.verdicts.run_verdicts): the judge's `judged` with each UNDECIDED
    throughput verdict at `point` made CANNOT_MATTER where the allocator cannot matter; the
    rest (the intervals, the decided verdicts, the notice) unchanged."""
    arms = judged.arms
    if not any(j.verdict == UNDECIDED for j in arms.values()) or not cannot_matter(run, point):
        return judged
    return dataclasses.replace(
        judged,
        arms={
            a: dataclasses.replace(j, verdict=CANNOT_MATTER) if j.verdict == UNDECIDED else j
            for a, j in arms.items()
        },
    )


def sentence(exp: dict, bound: dict | None, op: str = "query") -> str:
    """The exposure of one point in words."""
    s = (
        f"each {op} makes {fmt(exp['calls'])} allocation calls and {fmt(exp['frees'])} frees "
        f"({fmt(exp['bytes'])} bytes asked)"
    )
    if exp["needed_ns"] is None:
        return s + "; without the server's CPU per query the cost a 5% change needs is unknown"
    s += (
        f"; 5% of its {fmt(exp['cpu_us'])} µs of server CPU spread over those calls is "
        f"{fmt(exp['needed_ns'])} ns per call: the difference in per-call cost a 5% change "
        "would need"
    )
    ratio = margin_of(exp, bound)
    if ratio is None:
        return s + " (no per-call cost of the installed allocators was measured in this run)"
    sm, lg = bound["small"], bound["large"]
    s += (
        f"; the allocators measured here differ by at most {fmt(sm['ns'])} ns per call on small "
        f"blocks ({sm['dearest']} vs {sm['cheapest']}) and {fmt(lg['ns'])} ns on blocks of 32 kB "
        f"or more ({lg['dearest']} vs {lg['cheapest']}), {fmt(possible_ns(exp, bound))} ns per "
        f"{op} at most at this mix of sizes: 5% of the CPU is {fmt(ratio)}x that"
    )
    return s + (f": {WORD}" if ratio >= MARGIN else ": the allocator can matter")


def exposure_table(run: Run, workload: str) -> Table | None:
    """Calls into the allocator per query at each point of `workload`; None when no level of it
    was counted (the counter off, or a run older than format 6)."""
    op = words(workload).op
    points = sorted(
        {
            (r["server"], r["thp"], r["threads"])
            for r in run.ok_rows
            if r["workload"] == workload and r.get("malloc_calls_per_query") not in (None, "")
        },
        key=lambda p: (p[0], p[1], p[2] or 0),
    )
    if not points:
        return None
    bound = call_bound(run)
    several = len({(s, t) for s, t, _ in points}) > 1
    t = Table(
        key=f"exposure-{workload}",
        title=f"{workload}: calls into the allocator per {op}",
        explain=(
            f"Counted inside the server by a library preloaded ahead of the allocator, which "
            f"passes every call on: allocation calls (the malloc family and C++ operator new) and "
            f"frees (free, operator delete) per {op}, over the whole level (the clients' connects "
            f"included, so the figures err high), the median over every allocator's lives. "
            f"'5% needs' is 5% of the server's CPU per {op} divided by those calls: how much more "
            "(or less) each call would have to cost for the allocator to change throughput by 5%. "
            "'x bound' is 5% of the CPU over the most the installed allocators' measured per-call "
            f"costs can differ at this {op}'s calls (small and large blocks); at {MARGIN:g}x or "
            "more the allocator cannot matter at that point."
        ),
        columns=(["server / THP"] if several else [])
        + [
            "threads",
            f"calls per {op}",
            f"frees per {op}",
            f"bytes per {op}",
            "calls per txn",
            f"CPU µs per {op}",
            "5% needs, ns per call",
            "x bound",
            "allocator",
        ],
    )
    for server, thp, threads in points:
        exp = point_exposure(_rows_at(run, server, workload, thp, threads))
        if exp is None:
            continue
        ratio = margin_of(exp, bound)
        word = "–" if ratio is None else (WORD if ratio >= MARGIN else "can matter")
        t.rows.append(
            ([text(f"{server} / {thp}")] if several else [])
            + [
                Cell(threads, str(threads)),
                Cell(exp["calls"], fmt(exp["calls"])),
                Cell(exp["frees"], fmt(exp["frees"])),
                Cell(exp["bytes"], fmt(exp["bytes"])),
                Cell(exp["calls_per_txn"], fmt(exp["calls_per_txn"])),
                Cell(exp["cpu_us"], fmt(exp["cpu_us"])),
                Cell(exp["needed_ns"], fmt(exp["needed_ns"])),
                Cell(ratio, fmt(ratio)),
                text(word),
            ]
        )
        t.notes.append(f"At {threads} threads{f' ({server}, {thp})' if several else ''}: "
                       + sentence(exp, bound, op) + ".")  # fmt: skip
    if bound is None:
        t.notes.append(
            "This run recorded no per-call cost of the installed allocators (manifest call_cost), "
            "so no point is decided from its exposure."
        )
    else:
        cost = run.manifest.get("call_cost") or {}
        threads = "/".join(str(x) for x in cost.get("threads") or ())
        for c in ("small", "large"):
            rows = ", ".join(
                f"{e['allocator']} "
                + "/".join(fmt(v) for _, v in sorted((e["ns_per_call"].get(c) or {}).items()))
                for e in cost.get("table") or ()
            )
            t.notes.append(f"Per-call cost here, {c} blocks, ns at {threads} threads: {rows}.")
        t.notes.append(f"Measured by {cost.get('source')}.")
    return t
