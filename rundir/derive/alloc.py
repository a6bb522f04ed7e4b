"""The allocator's own accounting as results columns: a level's end-of-level reading.

The readings themselves (servers/shims/alloc_stats.c via suites/runner/alloc_memory.py) are recorded in
the cell's raw record; which reading belongs to a level is decided here, so a fix reaches runs
already on disk through `report --rederive`.
"""

from __future__ import annotations

# The results.csv columns filled for a level (its end-of-level reading): rundir.format's group.
from rundir.format import ALLOC_COLUMNS


def level_columns(readings: list[dict] | None, phase: str) -> dict:
    """Level `phase`'s columns from its "level end" reading; all empty if there is none."""
    r = next(
        (r for r in readings or () if r.get("phase") == phase and r.get("at") == "level end"),
        None,
    )
    if r is None:
        return dict.fromkeys(ALLOC_COLUMNS)
    return {k: r.get(k) for k in ALLOC_COLUMNS[:-1]} | {"alloc_overhead": r.get("overhead")}
