"""The matrix: which cells run, in what order, and how long it should take.

A cell is one server life: server x allocator x THP mode x repeat round. Rounds change the
allocator order (a Williams design, see allocator_order) and alternate the THP order, so slow drift
of the machine — thermal, page cache, a noisy neighbour — does not always favour the allocator that
runs first or the one that runs next to the baseline (asv/pyperf interleaving).

A run with several servers (an upgrade check) has one arm per server x allocator: the Williams
order is over those combined arms, so every round runs every server's every allocator once and
the pairs NEW/BASE of one allocator are as balanced as the allocators' pairs (analysis/upgrade.py).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from suites.families.base import DEFAULT_ENGINE
from suites.workloads import registry as workloads


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
    # The server's name in a run with several ([server] servers); "" in a run of one.
    server: str = ""
    # A soak's segment: 1, or the piece of the arm's one life after a resumed break (a new
    # server life, suites/runner/soak.py)
    segment: int = 1

    @property
    def id(self) -> str:
        """Names the cell by what ran, safe as a file name."""
        raw = f"{self.server_label}__{self.allocator}__thp-{self.thp}__r{self.round}"
        if self.segment > 1:
            raw += f"__s{self.segment}"
        return re.sub(r"[^A-Za-z0-9_.+-]", "_", raw)


def engine_label(server_label: str, engine: str) -> str:
    """The label of a server running `engine`'s tables: unchanged for InnoDB (every run before
    engines existed was InnoDB, so its points still match), "+ENGINE" otherwise."""
    return server_label if engine == DEFAULT_ENGINE else f"{server_label}+{engine}"


@dataclass(frozen=True)
class ServerPlan:
    """One server of a run with several: its name, its label, and its allocators when they are
    not the run's list (a server root's own `all`)."""

    name: str
    label: str
    allocators: tuple[str, ...] = ()


Servers = str | Sequence[ServerPlan]  # one server's label, or several servers


def _arms(servers: Servers, allocators: list[str]) -> tuple[list[tuple[str, str]], dict]:
    """The round's arms (server name, allocator), the baseline server's arms first (the caller
    lists it first, each server's allocators baseline first), and each server's label."""
    if isinstance(servers, str):
        return [("", a) for a in allocators], {"": servers}
    arms = [(s.name, a) for s in servers for a in (s.allocators or allocators)]
    return arms, {s.name: s.label for s in servers}


def plan_cells(
    server_label: Servers,
    allocators: list[str],
    thp_modes: list[str],
    repeat: int,
    engines: tuple[str, ...] = (DEFAULT_ENGINE,),
) -> list[CellPlan]:
    """Cells in run order: each round runs every (engine, thp, server x allocator), in a rotated
    order. `server_label`: the one server's label, or the ServerPlans of a run with several."""
    cells: list[CellPlan] = []
    for rnd in range(1, repeat + 1):
        cells += plan_round(server_label, allocators, thp_modes, rnd, len(cells), engines)
    return cells


def plan_round(
    server_label: Servers,
    allocators: list[str],
    thp_modes: list[str],
    rnd: int,
    first_index: int,
    engines: tuple[str, ...] = (DEFAULT_ENGINE,),
) -> list[CellPlan]:
    """One round's cells (a budget adds rounds one at a time), the arms (allocators, or server x
    allocator) in the order of `allocator_order`; even rounds run the THP modes (and engines)
    backwards."""
    groups = [(e, t) for e in engines for t in thp_modes]
    if rnd % 2 == 0:
        groups.reverse()
    arms, labels = _arms(server_label, allocators)
    order = [(e, t, arm) for e, t in groups for arm in allocator_order(arms, rnd)]
    return [
        CellPlan(first_index + i, rnd, engine_label(labels[srv], e), alloc, thp, e, srv)
        for i, (e, thp, (srv, alloc)) in enumerate(order)
    ]


def allocator_order(allocators: list, rnd: int) -> list:
    """The allocators' order in round `rnd`: row rnd - 1 of a Williams design (a Latin square
    balanced for neighbours). Over n rounds (2n for an odd n) every allocator takes every place
    once and runs right after every other allocator equally often, so neither a drift within the
    round (first vs last) nor a neighbour (who ran just before) favours one, and the baseline is
    not always next to the same arms (the rotation of one fixed list used before kept it beside
    the same two, the A/A arm one of them, in every round). With two allocators this is strict
    alternation.

    The first allocator listed opens the run: put the baseline there (baseline_first). The run's
    first server life is often off (three recorded quick runs: by 4-25%, either way), and the
    verdicts' variance is that of the paired differences to the baseline (analysis/sequential.py):
    a baseline life that is off shows in every allocator's differences and widens every interval,
    while another allocator's life that is off would move that allocator's ratio alone."""
    n = len(allocators)
    if n < 2:
        return list(allocators)
    rows = _williams_rows(n)
    return [allocators[i] for i in rows[(rnd - 1) % len(rows)]]


def baseline_first(allocators: list[str], baseline: str) -> list[str]:
    """The allocator names with the baseline moved to the front (allocator_order says why)."""
    return sorted(allocators, key=lambda a: a != baseline)


def _williams_rows(n: int) -> list[list[int]]:
    """Williams' rows for n treatments: 0, 1, n-1, 2, n-2, ... shifted by k = 0..n-1 (mod n),
    and for an odd n the same rows reversed as well (an odd n needs 2n rows for the balance)."""
    first, lo, hi = [0], 1, n - 1
    while len(first) < n:
        first.append(lo)
        lo += 1
        if len(first) < n:
            first.append(hi)
            hi -= 1
    rows = [[(x + k) % n for x in first] for k in range(n)]
    return rows + [row[::-1] for row in rows] if n % 2 else rows


def estimate_cell_seconds(suite) -> float:
    """Expected wall time of one cell, for the ETA: startup and shutdown, and the workload's
    warmup and levels (its plugin's estimate)."""

    startup_shutdown = 15.0
    run = getattr(suite, "run", None)
    if getattr(run, "design", "solo") == "alternate":
        # A cell's own load is its blocks (blocks x block_s per level, each up to
        # block_settle_cap_s longer when blocks settle); the other arms' blocks are their cells'
        # share of the round.
        s = suite.sysbench
        per_block = run.block_s + run.block_settle_cap_s
        blocked = s.model_copy(update={"duration_s": run.blocks * per_block, "settle_cap_s": 0})
        init = sum(1 + t / 100 for t in s.threads) * len(s.workloads) * (run.blocks - 1)
        suite = suite.model_copy(update={"sysbench": blocked})
        return startup_shutdown + init + workloads.of(suite).estimate_cell_seconds(suite)
    return startup_shutdown + workloads.of(suite).estimate_cell_seconds(suite)
