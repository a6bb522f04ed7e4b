"""`--shard K/N`: the K-th of N shares of a matrix, for a fleet of identical hosts.

The split is by whole rounds (every cell of each). A round holds every (THP mode, allocator) once in
its own rotated order (suites.runner.plan), so each shard still interleaves every allocator within one
host's rounds, and a host's own speed is a block effect shared by all allocators of its rounds. A
round-robin of single cells would instead tie some allocators to some hosts more often than
others: a host difference would read as an allocator difference. The cost: N shards need at least
N rounds (run.repeat >= N).

Rounds are dealt like a snake: 1..N to shards 1..N, then N+1..2N to shards N..1, and so on. Each
round runs its own row of a neighbour-balanced order (suites.runner.plan.allocator_order); dealing K,
K+N, K+2N... would give a host rows a fixed stride apart (with two shards and an even number of
allocators, only every other row), so on each host the same allocators would keep meeting. The
snake mixes the rows each shard gets. The rule is the same for every K: N shards need N rounds.

Cells keep the index and round they have in the whole plan, so `mallocsweep merge` puts the shards
back in the plan's order without renumbering anything.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from suites.errors import SuiteError
from suites.runner.plan import CellPlan

SPLIT = "whole-rounds-snake"
# [0-9], not \d: \d takes any script's digits ("１/２"), which the shell history would not show as 1/2
_SPEC = re.compile(r"^\s*([0-9]+)\s*/\s*([0-9]+)\s*$")


@dataclass(frozen=True)
class Shard:
    index: int  # K, 1-based
    count: int  # N

    @property
    def label(self) -> str:
        return f"{self.index}/{self.count}"

    def rounds(self, repeat: int) -> list[int]:
        """The rounds (1-based) this shard runs out of `repeat` (dealt like a snake)."""
        return [r for r in range(1, repeat + 1) if self.of_round(r) == self.index]

    def of_round(self, rnd: int) -> int:
        """The shard (1-based) that runs round `rnd`."""
        lap, pos = divmod(rnd - 1, self.count)
        return pos + 1 if lap % 2 == 0 else self.count - pos

    def check_rounds(self, repeat: int) -> None:
        """N shards need at least N rounds, whichever shard K this is: each runs whole rounds, and
        with fewer rounds some shard would run none while shard 1 ran the whole matrix."""
        if repeat < self.count:
            raise SuiteError(
                f"--shard {self.label}: {self.count} shards need at least {self.count} rounds "
                f"(each shard runs whole rounds) and the suite has {repeat} (run.repeat); "
                f"raise --repeat to {self.count} or use fewer shards"
            )

    def select(self, cells: list[CellPlan], repeat: int) -> list[CellPlan]:
        """This shard's cells of the whole plan, in plan order (check_rounds first)."""
        self.check_rounds(repeat)
        mine = set(self.rounds(repeat))
        return [c for c in cells if c.round in mine]

    def to_manifest(self, cells: list[CellPlan], repeat: int) -> dict:
        return {
            "index": self.index,
            "count": self.count,
            "split": SPLIT,
            "rounds": self.rounds(repeat),
            "planned_cells": len(cells),
        }


def parse_shard(text: str | None) -> Shard | None:
    """'K/N' with 1 <= K <= N; a bad spec is a one-line user error naming it."""
    if text is None:
        return None
    m = _SPEC.match(text)
    if not m:
        raise SuiteError(f"--shard {text}: expected K/N, e.g. 1/2 (the K-th of N shares)")
    k, n = int(m.group(1)), int(m.group(2))
    if n < 1:
        raise SuiteError(f"--shard {text}: N must be at least 1")
    if not 1 <= k <= n:
        raise SuiteError(f"--shard {text}: K must be between 1 and {n} (shards are numbered 1..N)")
    return Shard(k, n)
