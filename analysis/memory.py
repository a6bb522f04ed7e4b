"""Each server life's memory and the memory table: RSS/VSZ at server start and stop (older runs: at
the start and end of the measured levels) and their growth (Percona's table), peak RSS and
AnonHugePages. The hugepage tables are in analysis/hugepage_tables.py, the allocator's own accounting in
analysis/alloc_memory.py, thread churn in analysis/churn.py: each reads the per-life figures here.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from analysis.point_tables import (
    Series,
    growth,
    kb_to_mb,
    label_cells,
    label_columns,
    med_or_none,
    series_of,
)
from analysis.table_model import Table, num
from rundir.read import Run

# -- memory --------------------------------------------------------------------------------------
# Where a cell's start/end memory comes from:
SERVER = (
    "server"  # the manifest's cells[].memory: server_start (it answers), server_stop (last live)
)
LEVELS = "levels"  # results.csv: start of the first measured level, end of the last (older runs)


@dataclass(frozen=True)
class CellMemory:
    basis: str  # SERVER or LEVELS
    rss_start_kb: float | None
    rss_end_kb: float | None
    vsz_start_kb: float | None
    vsz_end_kb: float | None
    rss_peak_kb: float | None
    anon_huge_kb: float | None
    # the allocator's own figures at the end of the load (cells[].alloc_memory; None before them)
    alloc_in_use_kb: float | None = None
    alloc_cached_kb: float | None = None

    @property
    def rss_growth_kb(self) -> float | None:
        return growth(self.rss_end_kb, self.rss_start_kb)

    @property
    def vsz_growth_kb(self) -> float | None:
        return growth(self.vsz_end_kb, self.vsz_start_kb)


def server_marks(run: Run, cell_id: str) -> tuple[dict, dict] | None:
    """The cell's memory at server start and stop (manifest cells[].memory), when both carry RSS
    and VSZ; None for runs recorded before them (or a cell that never reached its start)."""
    mem = run.cell(cell_id).get("memory") or {}
    start, stop = mem.get("server_start"), mem.get("server_stop")
    ok = all(isinstance(m, dict) and m.get("rss_kb") is not None for m in (start, stop))
    if not ok or start.get("vsz_kb") is None or stop.get("vsz_kb") is None:
        return None
    return start, stop


def cell_memory(run: Run, cell_id: str, rows: list[dict], basis: str | None = None) -> CellMemory:
    """Memory of one cell. With `basis` SERVER (or None, when the run recorded it): from server
    start to the last reading before shutdown, peak = VmHWM then (the high-water mark over the
    whole life). With LEVELS: start of the first measured level, end of the last, peak of all.
    AnonHugePages: the largest value seen at any of those readings."""

    def first(col):
        return next((r[col] for r in rows if r.get(col) is not None), None)

    def last(col):
        return next((r[col] for r in reversed(rows) if r.get(col) is not None), None)

    def most(values):
        vals = [v for v in values if v is not None]
        return max(vals) if vals else None

    level_peak = most(r.get("rss_peak_kb") for r in rows)
    level_huge = [r.get("anon_huge_kb") for r in rows]
    load = end_of_load(alloc_readings(run, cell_id))
    alloc = (load.get("alloc_in_use_kb"), load.get("alloc_cached_kb")) if load else (None, None)
    marks = server_marks(run, cell_id) if basis != LEVELS else None
    if marks is not None:
        start, stop = marks
        return CellMemory(
            SERVER,
            start["rss_kb"],
            stop["rss_kb"],
            start["vsz_kb"],
            stop["vsz_kb"],
            stop.get("hwm_kb") if stop.get("hwm_kb") is not None else level_peak,
            most(level_huge + [start.get("anon_huge_kb"), stop.get("anon_huge_kb")]),
            *alloc,
        )
    return CellMemory(
        LEVELS,
        first("rss_start_kb"),
        last("rss_end_kb"),
        first("vsz_start_kb"),
        last("vsz_end_kb"),
        level_peak,
        most(level_huge),
        *alloc,
    )


def complete_cells(run: Run) -> dict[str, list[dict]]:
    """Rows of each cell that finished ok with every level ok, in run order.

    Memory is a whole-cell figure: a cell that failed or skipped a level covers a different
    stretch of the server's life, so it is left out rather than mixed in."""
    by_cell: dict[str, list[dict]] = defaultdict(list)
    for r in run.rows:
        by_cell[r["cell"]].append(r)
    return {
        cid: rows
        for cid, rows in by_cell.items()
        if run.cell(cid).get("status", "ok") == "ok"
        and all((r.get("status") or "ok") == "ok" for r in rows)
    }


def lives_by_point(run: Run) -> tuple[dict, dict]:
    """(server, thp) -> allocator -> round -> RSS at stop, and the same for RSS growth: one value
    per complete server life (complete_cells), on the run's basis; stand-ins left out. What the
    memory verdicts compare (analysis/verdicts.py, between servers analysis/upgrade.py)."""
    basis = memory_basis(run)
    stop: dict[tuple, dict] = defaultdict(lambda: defaultdict(dict))
    growth: dict[tuple, dict] = defaultdict(lambda: defaultdict(dict))
    for cid, rows in complete_cells(run).items():
        if run.is_standin(cid):
            continue
        m = cell_memory(run, cid, rows, basis)
        key, a, rnd = (rows[0]["server"], rows[0]["thp"]), rows[0]["allocator"], rows[0]["repeat"]
        if m.rss_growth_kb is not None:
            growth[key][a][rnd or 1] = m.rss_growth_kb
        if m.rss_end_kb is not None:
            stop[key][a][rnd or 1] = m.rss_end_kb
    return stop, growth


def memory_basis(run: Run) -> str:
    """SERVER when every complete cell recorded its server start/stop memory, else LEVELS: one
    basis for the whole run, so rows of a table (and two runs compared) mean the same thing."""
    cells = complete_cells(run)
    if cells and all(server_marks(run, cid) is not None for cid in cells):
        return SERVER
    return LEVELS


def memory_by_series(run: Run, basis: str | None = None) -> dict[Series, list[CellMemory]]:
    """One CellMemory per complete repeat (cell) of each series, all on one basis (the run's own,
    memory_basis(), unless given); see complete_cells()."""
    basis = basis or memory_basis(run)
    out: dict[Series, list[CellMemory]] = defaultdict(list)
    for cid, rows in complete_cells(run).items():
        s = Series(rows[0]["server"], rows[0]["allocator"], rows[0]["thp"])
        out[s].append(cell_memory(run, cid, rows, basis))
    return out


BASIS_TEXT = {
    SERVER: (
        "Start = when the server first answered (before warmup), end = the last reading before it"
        " was asked to shut down; growth = end − start, over the server's whole measured life"
        " (warmup and every level). Peak RSS is the kernel's high-water mark (VmHWM) at the end."
    ),
    LEVELS: (
        "This run predates the server start/stop readings: start = when the first measured level"
        " began (after warmup), end = when the last one ended; growth = end − start. Peak RSS is"
        " the highest seen at a level."
    ),
}


def memory_table(run: Run) -> Table:
    basis = memory_basis(run)
    where = "from server start to shutdown" if basis == SERVER else "over the measured levels"
    table = Table(
        "memory",
        f"Server memory (MB) by allocator: start, end and growth {where}",
        "RSS is the server's resident memory, VSZ its mapped address space, both from"
        f" /proc/PID/status. {BASIS_TEXT[basis]} Percona's table: an allocator that fragments or"
        " caches per thread grows more as client threads rise. AnonHugePages is the largest amount"
        " of anonymous memory backed by transparent huge pages seen at a phase boundary. Medians"
        " over the repeats whose cell and levels all completed (a failed cell covers a different"
        " stretch of the server's life and is left out).",
        label_columns(run)
        + [
            "RSS start",
            "RSS end",
            "RSS growth",
            "VSZ start",
            "VSZ end",
            "VSZ growth",
            "peak RSS",
            "AnonHugePages",
        ],
    )
    mem = memory_by_series(run, basis)
    for s in series_of(run):
        cells = mem.get(s, [])
        if not cells:
            continue
        rs, re_ = (
            med_or_none(c.rss_start_kb for c in cells),
            med_or_none(c.rss_end_kb for c in cells),
        )
        vs, ve = (
            med_or_none(c.vsz_start_kb for c in cells),
            med_or_none(c.vsz_end_kb for c in cells),
        )
        rg = med_or_none(c.rss_growth_kb for c in cells)
        vg = med_or_none(c.vsz_growth_kb for c in cells)
        table.rows.append(
            label_cells(run, s)
            + [num(kb_to_mb(v)) for v in (rs, re_, rg, vs, ve, vg)]
            + [
                num(kb_to_mb(med_or_none(c.rss_peak_kb for c in cells))),
                num(kb_to_mb(med_or_none(c.anon_huge_kb for c in cells))),
            ]
        )
    return table


# -- the allocator's readings (cells[].alloc_memory; analysis/alloc_memory.py tables them) ----
def alloc_readings(run: Run, cell_id: str) -> list[dict]:
    """The cell's allocator readings in time order (empty for runs recorded before them)."""
    am = run.cell(cell_id).get("alloc_memory") or {}
    return [r for r in am.get("readings") or [] if isinstance(r, dict)]


def end_of_load(readings: list[dict]) -> dict | None:
    """The reading after the last level (the load's end), None if no level was read."""
    ends = [r for r in readings if r.get("at") == "level end"]
    return ends[-1] if ends else None
