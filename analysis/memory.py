"""Memory tables: RSS/VSZ at start and end of the measured levels and their growth (Percona's
table), peak RSS and AnonHugePages, and the hugepage-impact table (THP modes side by side per
allocator, with the THP state each server process really had).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from analysis.rundir import Run
from analysis.table import Cell, Table, fmt, num, ratio_text, text
from analysis.tables import (
    Series,
    growth,
    kb_to_mb,
    label_cells,
    label_columns,
    med_or_none,
    metric_of,
    points,
    series_of,
)


# -- memory --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CellMemory:
    rss_start_kb: float | None
    rss_end_kb: float | None
    vsz_start_kb: float | None
    vsz_end_kb: float | None
    rss_peak_kb: float | None
    anon_huge_kb: float | None


def cell_memory(rows: list[dict]) -> CellMemory:
    """Memory over a cell's measured levels: start of the first, end of the last, peak of all."""

    def first(col):
        return next((r[col] for r in rows if r.get(col) is not None), None)

    def last(col):
        return next((r[col] for r in reversed(rows) if r.get(col) is not None), None)

    def most(col):
        vals = [r[col] for r in rows if r.get(col) is not None]
        return max(vals) if vals else None

    return CellMemory(
        first("rss_start_kb"),
        last("rss_end_kb"),
        first("vsz_start_kb"),
        last("vsz_end_kb"),
        most("rss_peak_kb"),
        most("anon_huge_kb"),
    )


def memory_by_series(run: Run) -> dict[Series, list[CellMemory]]:
    """One CellMemory per repeat (cell) of each series."""
    by_cell: dict[str, list[dict]] = defaultdict(list)
    for r in run.rows:
        by_cell[r["cell"]].append(r)
    out: dict[Series, list[CellMemory]] = defaultdict(list)
    for rows in by_cell.values():
        s = Series(rows[0]["server"], rows[0]["allocator"], rows[0]["thp"])
        out[s].append(cell_memory(rows))
    return out


def memory_table(run: Run) -> Table:
    table = Table(
        "memory",
        "Server memory (MB) by allocator: start, end and growth over the measured levels",
        "RSS is the server's resident memory, VSZ its mapped address space, both from"
        " /proc/PID/status. Start = when the first measured level began (after warmup), end = when"
        " the last one ended; growth = end − start (Percona's table: an allocator that fragments or"
        " caches per thread grows more as client threads rise). Peak RSS is the high-water mark;"
        " AnonHugePages is the largest amount of anonymous memory backed by transparent huge pages"
        " seen at a level boundary. Medians over repeats.",
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
    mem = memory_by_series(run)
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
        rg = med_or_none(growth(c.rss_end_kb, c.rss_start_kb) for c in cells)
        vg = med_or_none(growth(c.vsz_end_kb, c.vsz_start_kb) for c in cells)
        table.rows.append(
            label_cells(run, s)
            + [num(kb_to_mb(v)) for v in (rs, re_, rg, vs, ve, vg)]
            + [
                num(kb_to_mb(med_or_none(c.rss_peak_kb for c in cells))),
                num(kb_to_mb(med_or_none(c.anon_huge_kb for c in cells))),
            ]
        )
    return table


# -- hugepages -----------------------------------------------------------------------------------
def process_thp_states(run: Run, s: Series) -> list:
    """THP_enabled read back from each server process of the series (1, 0 or None = unknown)."""
    states = []
    for cell_id in sorted(
        {r["cell"] for r in run.rows if Series(r["server"], r["allocator"], r["thp"]) == s}
    ):
        state = (run.cell(cell_id).get("thp") or {}).get("process_thp_enabled")
        if state is None:
            state = next(
                (
                    r["process_thp_enabled"]
                    for r in run.rows
                    if r["cell"] == cell_id and r.get("process_thp_enabled") is not None
                ),
                None,
            )
        states.append(None if state is None else int(state))
    return states


def thp_in_force(run: Run, s: Series) -> str:
    for r in run.rows:
        if Series(r["server"], r["allocator"], r["thp"]) == s:
            force = (run.cell(r["cell"]).get("thp") or {}).get("in_force") or {}
            if force:
                return f"enabled={force.get('enabled', '?')}, defrag={force.get('defrag', '?')}"
    return "unknown"


def hugepage_table(run: Run, workload: str) -> Table | None:
    """THP modes side by side per allocator; None unless the run has more than one mode."""
    modes = run.thp_modes
    if len(modes) < 2:
        return None
    ref = "never" if "never" in modes else modes[0]
    metric = metric_of(run, workload)
    pts = points(run, workload, metric)
    p99 = points(run, workload, "lat_p99_ms")
    threads = run.threads(workload)
    top = threads[-1] if threads else None
    mem = memory_by_series(run)
    table = Table(
        f"hugepages-{workload}",
        f"{workload}: hugepage impact — THP modes side by side",
        f"Each row is one allocator under one transparent-hugepage mode. The per-thread columns give"
        f" throughput as a ratio to the same allocator with THP `{ref}` (above 1.00× = THP helped)."
        " p99 is at the highest thread count. AnonHugePages is how much of the server's anonymous"
        " memory huge pages backed; 'process THP' is the THP_enabled flag read back from the"
        " server's own /proc/PID/status (0 = the server had THP disabled for itself).",
        label_columns(run)
        + ["THP in force", "process THP"]
        + [f"{t} thr" for t in threads]
        + [f"p99 ms @{top}", "RSS growth (MB)", "AnonHugePages (MB)"],
    )
    for s in series_of(run):
        if s.thp not in modes:
            continue
        if not any((s, t) in pts for t in threads):
            continue
        states = process_thp_states(run, s)
        state = ", ".join("?" if x is None else str(x) for x in sorted(set(states), key=str))
        row = label_cells(run, s) + [text(thp_in_force(run, s)), text(state or "?")]
        for t in threads:
            ci, base = pts.get((s, t)), pts.get((Series(s.server, s.allocator, ref), t))
            r = ci.median / base.median if ci and base and base.median else None
            row.append(Cell(r, ratio_text(r), title=f"{fmt(ci.median) if ci else '–'} {metric}"))
        lat = p99.get((s, top))
        cells = mem.get(s, [])
        row += [
            num(lat.median if lat else None),
            num(kb_to_mb(med_or_none(growth(c.rss_end_kb, c.rss_start_kb) for c in cells))),
            num(kb_to_mb(med_or_none(c.anon_huge_kb for c in cells))),
        ]
        table.rows.append(row)
    return table


def thp_self_disabled(run: Run) -> list[str]:
    """Cells where THP was requested (or left to the system) but the server disabled it for itself."""
    out = []
    for cid, cell in run.cells.items():
        thp = cell.get("thp") or {}
        if thp.get("requested") != "never" and thp.get("process_thp_enabled") == 0:
            out.append(cid)
    return out
