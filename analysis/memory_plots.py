"""Figures of who holds the memory: RSS taken apart by mapping at every level's end (buffer
pool, thread stacks, files, the heap split into what the server uses and what the allocator
holds), stacked so that the parts add up to RSS and never rise above it; and RSS against the
churn cycle (analysis/memory.py has the tables).

What the allocator calls "cached" or "committed" is address space, not resident memory (pages
it obtained and the server never touched are not resident): it is never drawn against RSS.
"""

from __future__ import annotations

from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from analysis.churn import churn_rows
from analysis.plots import _first_cells, _style, plt, to_data_uri
from analysis.point_tables import series_label, series_of
from rundir.read import Run

# The parts of RSS, bottom to top (rundir.format.MEMORY_PART_COLUMNS); the heap is split into
# what the allocator says the server uses and the rest of it, resident and held by the allocator.
PARTS = (
    ("bufpool", "buffer pool (its mapping)", "#8c564b"),
    ("stacks", "thread stacks", "#bcbd22"),
    ("file", "files: code, libraries, static data", "#7f7f7f"),
    ("in_use", "heap: in use by the server (the allocator's figure)", "#1f77b4"),
    ("held", "heap: held by the allocator, resident", "#ff7f0e"),
    ("heap", "heap (the allocator keeps no in-use total)", "#17becf"),
)
COLOURS = {k: c for k, _, c in PARTS}


def parts_of(row: dict) -> dict[str, float] | None:
    """A row's resident parts in MB (PARTS' keys), summing to the RSS the mappings add up to;
    None where the row has no decomposition (older runs, [memory] parts off). The allocator's in
    use splits the heap when known, never beyond it: in use above the heap's resident part is
    memory the server holds untouched (not resident), so the heap is all "in use" then."""
    keys = ("bufpool_resident_kb", "stacks_kb", "file_kb", "heap_resident_kb")
    if any(row.get(k) is None for k in keys):
        return None
    heap = row["heap_resident_kb"] / 1024
    out = {
        "bufpool": row["bufpool_resident_kb"] / 1024,
        "stacks": row["stacks_kb"] / 1024,
        "file": row["file_kb"] / 1024,
        "in_use": 0.0,
        "held": 0.0,
        "heap": 0.0,
    }
    # the resident part of in use (format 6); an older row's in use, bounded by the heap below
    used = row.get("alloc_in_use_resident_kb")
    if used is None:
        used = row.get("alloc_in_use_kb")
    if used is None:
        out["heap"] = heap
    else:
        out["in_use"] = min(max(used / 1024, 0.0), heap)
        out["held"] = heap - out["in_use"]
    return out


def stack_parts(ax, xs: list[float], parts: list[dict[str, float]]) -> set[str]:
    """Stacked steps of the parts at each x; the top is their sum (RSS), never above it.
    Returns the parts drawn (for a legend)."""
    drawn = set()
    bottom = [0.0] * len(xs)
    for key, _label, colour in PARTS:
        ys = [p[key] for p in parts]
        if not any(ys):
            continue
        top = [b + y for b, y in zip(bottom, ys, strict=True)]
        ax.fill_between(xs, bottom, top, step="mid", color=colour, alpha=0.85, linewidth=0)
        bottom = top
        drawn.add(key)
    return drawn


def panel_grid(n: int, cols: int, width: float, height: float, sharey: bool = False):
    """A figure of n panels, `cols` per row (fewer when n is smaller), each width x height
    inches: (fig, the n axes in order); the grid's unused axes are hidden."""
    cols = min(cols, n)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(
        rows, cols, figsize=(width * cols, height * rows), squeeze=False, sharey=sharey
    )
    flat = list(axes.flat)
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat[:n]


def parts_legend(fig, drawn: set[str], ncol: int = 3) -> None:
    handles = [Patch(color=c, label=lbl) for k, lbl, c in PARTS if k in drawn]
    fig.legend(handles=handles, loc="lower center", ncol=ncol, fontsize=8)


def first_lives_parts(run: Run, rows_of) -> list[tuple]:
    """(series, rows, their parts) of each series' first repeat whose rows (`rows_of(cell id)`)
    all have a decomposition."""
    out = []
    for s, cid in _first_cells(run):
        rows = rows_of(cid)
        parts = [parts_of(r) for r in rows]
        if rows and all(p is not None for p in parts):
            out.append((s, rows, parts))
    return out


def resident_parts_figure(run: Run):
    """One panel per allocator (first repeat): RSS taken apart at the end of each level (each a
    phase boundary), stacked; None when the run has no decomposition."""
    cells = first_lives_parts(run, lambda cid: [r for r in run.rows if r["cell"] == cid])
    if not cells:
        return None
    fig, axes = panel_grid(len(cells), 3, 4.4, 3.2, sharey=True)
    drawn: set[str] = set()
    for ax, (s, rows, parts) in zip(axes, cells, strict=True):
        xs = list(range(1, len(rows) + 1))
        drawn |= stack_parts(ax, xs, parts)
        # where each workload begins
        firsts = {}
        for x, r in zip(xs, rows, strict=True):
            firsts.setdefault(r["workload"], x)
        ax.set_xticks(list(firsts.values()))
        ax.set_xticklabels(list(firsts), rotation=45, ha="right", fontsize=6)
        ax.set_title(series_label(run, s), fontsize=9)
        ax.set_ylabel("MB", fontsize=8)
        ax.tick_params(axis="y", labelsize=7)
        ax.grid(True, alpha=0.3)
    parts_legend(fig, drawn)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    return fig


def churn_rss_figure(run: Run):
    """RSS at the end of each churn level against the cycle: solid at the top client count,
    dotted back at the low one; one colour per allocator, one panel per thread cache size."""
    by = churn_rows(run)
    if not by:
        return None
    caches = list(dict.fromkeys(r.get("thread_cache_size") for rows in by.values() for r in rows))
    fig, axes = plt.subplots(1, len(caches), figsize=(6 * len(caches), 4.2), squeeze=False)
    for ax, tc in zip(axes.flat, caches, strict=True):
        for s in series_of(run):
            rows = by.get(s, [])
            if not rows:
                continue
            rows = [
                r for r in rows if r["cell"] == rows[0]["cell"] and r.get("thread_cache_size") == tc
            ]
            if not rows:
                continue
            top, low = max(int(r["threads"]) for r in rows), min(int(r["threads"]) for r in rows)
            st = _style(run, s)
            for threads, ls, label in ((top, "-", series_label(run, s)), (low, ":", None)):
                pts = [
                    (int(r["churn_cycle"]), r["rss_end_kb"] / 1024)
                    for r in rows
                    if int(r["threads"]) == threads and r.get("rss_end_kb") is not None
                ]
                if pts:
                    xs, ys = zip(*pts, strict=True)
                    ax.plot(xs, ys, ls, marker="o", ms=3, color=st["color"], label=label)
        title = f"thread_cache_size {tc:g}" if isinstance(tc, int | float) else "thread cache"
        ax.set_title(f"{title}: solid = {top} clients, dotted = {low}", fontsize=9)
        ax.set_xlabel("churn cycle")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylabel("RSS at level end (MB)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def resident_parts_plot(run: Run) -> str | None:
    fig = resident_parts_figure(run)
    return None if fig is None else to_data_uri(fig)


def churn_rss_plot(run: Run) -> str | None:
    fig = churn_rss_figure(run)
    return None if fig is None else to_data_uri(fig)
