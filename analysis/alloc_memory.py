"""The allocator's own accounting (cells[].alloc_memory, issue 16): in use, cached and RSS at the
end of the load and after the idle phase, per allocator.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from analysis.memory import alloc_readings, complete_cells, end_of_load
from analysis.point_tables import (
    Series,
    growth,
    kb_to_mb,
    label_cells,
    label_columns,
    med_or_none,
    series_of,
)
from analysis.table_model import Table, num, text
from rundir.read import Run

ALLOC_API_NOTE = {
    None: "no statistics (TBB malloc exposes none)",
    "mimalloc mi_process_info": "no totals (mimalloc's release build keeps no in-use counts)",
}


def after_idle(readings: list[dict]) -> dict | None:
    idle = [r for r in readings if r.get("phase") == "idle"]
    return idle[-1] if idle else None


@dataclass(frozen=True)
class AllocEnd:
    """One cell's allocator figures at the end of the load and after the idle phase (kB)."""

    api: str | None
    in_use_kb: float | None
    cached_kb: float | None
    rss_kb: float | None
    idle_in_use_kb: float | None
    idle_cached_kb: float | None
    idle_rss_kb: float | None
    idle_s: float | None


def alloc_end(run: Run, cell_id: str) -> AllocEnd | None:
    readings = alloc_readings(run, cell_id)
    load = end_of_load(readings)
    if load is None:
        return None
    idle = after_idle(readings)
    am = run.cell(cell_id).get("alloc_memory") or {}
    return AllocEnd(
        am.get("api"),
        load.get("alloc_in_use_kb"),
        load.get("alloc_cached_kb"),
        load.get("rss_kb"),
        idle.get("alloc_in_use_kb") if idle else None,
        idle.get("alloc_cached_kb") if idle else None,
        idle.get("rss_kb") if idle else None,
        round(idle["t_s"] - load["t_s"], 1) if idle else None,
    )


def alloc_by_series(run: Run) -> dict[Series, list[AllocEnd]]:
    out: dict[Series, list[AllocEnd]] = defaultdict(list)
    for cid, rows in complete_cells(run).items():
        e = alloc_end(run, cid)
        if e is not None:
            out[Series(rows[0]["server"], rows[0]["allocator"], rows[0]["thp"])].append(e)
    return out


def _ratio(a, b) -> float | None:
    return None if a is None or not b else a / b


def alloc_table(run: Run) -> Table | None:
    """In use / cached / RSS at the end of the load and after the idle phase, per allocator."""
    by = alloc_by_series(run)
    if not by:
        return None
    table = Table(
        "alloc-memory",
        "Memory as the allocator sees it (MB): end of the load and after the idle phase",
        "Read inside the server by a library preloaded after the allocator, right after the last"
        " level's clients left, and again at the end of the idle phase. In use: what the server"
        " holds through malloc; cached: what the allocator keeps committed but not in use (free"
        " lists, thread caches, dirty pages not yet purged, its metadata); RSS from /proc at the same"
        " moment. Cached can exceed what is resident: the allocator counts pages it obtained that"
        " the server never touched."
        " Overhead = RSS / in use: it includes everything not from malloc (a MariaDB buffer pool"
        " is mmap'ed directly, code, stacks), so compare it between allocators, not with 1."
        " Returned = RSS at the end of the load − RSS after idling. Medians over complete repeats.",
        label_columns(run)
        + [
            "in use",
            "cached",
            "RSS",
            "overhead",
            "in use (idle)",
            "cached (idle)",
            "RSS (idle)",
            "RSS returned",
            "idle s",
        ],
    )
    for s in series_of(run):
        ends = by.get(s, [])
        if not ends:
            continue

        def med(f, ends=ends):
            return med_or_none(f(e) for e in ends)

        rss, idle_rss = med(lambda e: e.rss_kb), med(lambda e: e.idle_rss_kb)
        in_use = med(lambda e: e.in_use_kb)
        returned = med(lambda e: growth(e.rss_kb, e.idle_rss_kb))
        api = ends[0].api
        row = label_cells(run, s) + [
            num(kb_to_mb(in_use)),
            num(kb_to_mb(med(lambda e: e.cached_kb))),
            num(kb_to_mb(rss)),
            num(med(lambda e: _ratio(e.rss_kb, e.in_use_kb))),
            num(kb_to_mb(med(lambda e: e.idle_in_use_kb))),
            num(kb_to_mb(med(lambda e: e.idle_cached_kb))),
            num(kb_to_mb(idle_rss)),
            num(kb_to_mb(returned)),
            num(med(lambda e: e.idle_s)),
        ]
        if in_use is None and api in ALLOC_API_NOTE:
            row[len(label_cells(run, s))] = text(ALLOC_API_NOTE[api])
        table.rows.append(row)
    return table
