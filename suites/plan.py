"""The matrix: which cells run, in what order, and how long it should take.

A cell is one server life: server x allocator x THP mode x repeat round. Rounds alternate the
allocator order (and the THP order) so slow drift of the machine — thermal, page cache, a noisy
neighbour — does not always favour the allocator that runs first (asv/pyperf interleaving).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class CellPlan:
    index: int
    round: int  # 1-based repeat round
    server_label: str  # e.g. "mariadb-10.11.19"
    allocator: str
    thp: str
    # The storage engine the workload's tables use (a matrix dimension). It is part of the
    # server label (engine_label) whenever it is not InnoDB, so every point, verdict and compare
    # keeps engines apart without each of them knowing about engines.
    engine: str = "innodb"

    @property
    def id(self) -> str:
        """Names the cell by what ran, safe as a file name."""
        raw = f"{self.server_label}__{self.allocator}__thp-{self.thp}__r{self.round}"
        return re.sub(r"[^A-Za-z0-9_.+-]", "_", raw)


DEFAULT_ENGINE = "innodb"


def engine_label(server_label: str, engine: str) -> str:
    """The label of a server running `engine`'s tables: unchanged for InnoDB (every run before
    engines existed was InnoDB, so its points still match), "+ENGINE" otherwise."""
    return server_label if engine == DEFAULT_ENGINE else f"{server_label}+{engine}"


def plan_cells(
    server_label: str,
    allocators: list[str],
    thp_modes: list[str],
    repeat: int,
    engines: tuple[str, ...] = (DEFAULT_ENGINE,),
) -> list[CellPlan]:
    """Cells in run order: each round runs every (engine, thp, allocator), in a rotated order."""
    cells: list[CellPlan] = []
    for rnd in range(1, repeat + 1):
        cells += plan_round(server_label, allocators, thp_modes, rnd, len(cells), engines)
    return cells


def plan_round(
    server_label: str,
    allocators: list[str],
    thp_modes: list[str],
    rnd: int,
    first_index: int,
    engines: tuple[str, ...] = (DEFAULT_ENGINE,),
) -> list[CellPlan]:
    """One round's cells (a budget adds rounds one at a time). Round r starts its allocator list
    r - 1 places further on, and even rounds run it backwards: every allocator takes every place
    in turn, so neither a drift (first vs last) nor a neighbour (who ran just before) favours one.
    With two allocators this is the old strict alternation."""
    n = len(allocators)
    shift = (rnd - 1) // 2 % n if n else 0
    rotated = allocators[shift:] + allocators[:shift]
    order = [(e, t, a) for e in engines for t in thp_modes for a in rotated]
    if rnd % 2 == 0:
        order.reverse()
    return [
        CellPlan(first_index + i, rnd, engine_label(server_label, e), alloc, thp, e)
        for i, (e, thp, alloc) in enumerate(order)
    ]


def estimate_cell_seconds(suite) -> float:
    """Expected wall time of one cell, for the ETA: startup and shutdown, and the workload's
    warmup and levels (its plugin's estimate)."""
    from suites import workloads

    startup_shutdown = 15.0
    return startup_shutdown + workloads.of(suite).estimate_cell_seconds(suite)
