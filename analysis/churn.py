"""Thread churn ([memory] churn_cycles, suites/workloads/sysbench/churn.py): RSS at the end of each cycle's levels and
its growth per cycle. The throughput of churn levels is in the study tables, one value per server
life (analysis/lives.py).
"""

from __future__ import annotations

from collections import defaultdict

from analysis.memory import complete_cells
from analysis.point_tables import Series, kb_to_mb, label_cells, label_columns, series_of
from analysis.table_model import Table, count, num
from rundir.read import Run


def churn_rows(run: Run) -> dict[Series, list[dict]]:
    """Rows of churn levels (churn_cycle set), per series, in run order."""
    out: dict[Series, list[dict]] = defaultdict(list)
    for rows in complete_cells(run).values():
        for r in rows:
            if r.get("churn_cycle") is not None:
                out[Series(r["server"], r["allocator"], r["thp"])].append(r)
    return out


def churn_table(run: Run) -> Table | None:
    """RSS at the end of each churn cycle's levels, and the growth per cycle (first repeat)."""
    by = churn_rows(run)
    if not by:
        return None
    cycles = sorted({int(r["churn_cycle"]) for rows in by.values() for r in rows})
    table = Table(
        "churn",
        "Thread churn: RSS (MB) at the end of each cycle's top level, and growth per cycle",
        "The client count cycles up and down (e.g. 8 → 1536 → 8); with a small thread_cache_size"
        " the server's threads exit when clients leave and start again in the next cycle. RSS is"
        " read when each level ends; growth per cycle = the slope of RSS at the top level over the"
        " cycles (least squares, MB per cycle). glibc's per-thread arenas are the known case of"
        " growth: arenas are reused, never freed. First repeat of each allocator.",
        label_columns(run)
        + ["thread cache"]
        + [f"cycle {c}" for c in cycles if c <= max(cycles) - 1]
        + ["growth / cycle", "RSS after"],
    )
    for s in series_of(run):
        rows = by.get(s, [])
        if not rows:
            continue
        first_cell = rows[0]["cell"]
        rows = [r for r in rows if r["cell"] == first_cell]
        for tc in dict.fromkeys(r.get("thread_cache_size") for r in rows):
            block = [r for r in rows if r.get("thread_cache_size") == tc]
            top = max(int(r["threads"]) for r in block)
            at_top = {
                int(r["churn_cycle"]): r.get("rss_end_kb")
                for r in block
                if int(r["threads"]) == top
            }
            xs = [c for c in sorted(at_top) if at_top[c] is not None]
            slope = _slope(xs, [at_top[c] for c in xs])
            closing = [r for r in block if int(r["churn_cycle"]) == max(cycles)]
            table.rows.append(
                label_cells(run, s)
                + [count(tc)]
                + [num(kb_to_mb(at_top.get(c))) for c in cycles if c <= max(cycles) - 1]
                + [
                    num(kb_to_mb(slope)),
                    num(kb_to_mb(closing[-1].get("rss_end_kb") if closing else None)),
                ]
            )
    return table


def _slope(xs: list[float], ys: list[float]) -> float | None:
    if len(xs) < 2:
        return None
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den if den else None
