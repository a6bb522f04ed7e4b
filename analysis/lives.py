"""One value per server life: what a repeat (a round) means in every table, verdict and compare.

A cell is one server life. Usually it runs each (workload, threads) level once, so a point's
values over the cells are its repeats. A thread-churn cell ([memory] churn_cycles, suites/workloads/sysbench/churn.py)
runs the same level once per churn cycle and thread_cache_size block, all in one life: those rows
share the life's start, its warm buffer pool and whatever the earlier cycles left behind, so they
are not independent repeats. Counted as repeats they would narrow every interval and make a single
life look like several. Here a life's rows at one point become one value: their median (the
level as that life ran it, over its cycles). Runs without churn have one row per life and point
and read exactly as before.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable

from analysis.stats import median


def by_life(
    rows: Iterable[dict],
    key: Callable[[dict], Hashable | None],
    value: Callable[[dict], float | None],
) -> dict[Hashable, dict[str, float]]:
    """key -> {cell id: the life's value}, in row order. Rows whose key or value is None are
    passed over; a cell with several rows under one key (churn cycles) gives their median."""
    found: dict[Hashable, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        k = key(r)
        v = value(r) if k is not None else None
        if v is not None:
            found[k][r["cell"]].append(v)
    return {k: {c: _one(vs) for c, vs in cells.items()} for k, cells in found.items()}


def life_values(rows: Iterable[dict], value: Callable[[dict], float | None]) -> list[float]:
    """The values of rows that all belong to one point, one per life (see by_life)."""
    return list(by_life(rows, lambda r: 0, value).get(0, {}).values())


def cycles_per_life(rows: Iterable[dict]) -> int:
    """The most rows one life has at one (workload, threads) point: 1 outside churn runs."""
    n: dict[tuple, int] = defaultdict(int)
    for r in rows:
        n[(r["cell"], r["workload"], r["threads"])] += 1
    return max(n.values(), default=0)


def _one(values: list[float]) -> float:
    return values[0] if len(values) == 1 else median(values)
