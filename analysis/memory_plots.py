"""Figures of the allocator's own accounting: in use and cached stacked over each server's life
with RSS drawn over them, and RSS against the churn cycle (see analysis/memory.py for the tables).

RSS is a line, not a third band: what the allocator counts as committed can exceed RSS (pages it
obtained and the server never touched are not resident), so the stack may rise above the line.
"""

from __future__ import annotations

from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from analysis.churn import churn_rows
from analysis.memory import alloc_readings
from analysis.plots import _first_cells, _style, plt, to_data_uri
from analysis.study_tables import series_label, series_of
from rundir.read import Run

STACK = (("in use", "#1f77b4"), ("cached by the allocator (committed, not in use)", "#ff7f0e"))


def alloc_stack_figure(run: Run):
    """One panel per allocator (first repeat): in use, cached and the rest of RSS stacked at each
    reading (phase boundaries and the idle phase); None when no cell has allocator figures."""
    cells = []
    for s, cid in _first_cells(run):
        rs = [r for r in alloc_readings(run, cid) if r.get("alloc_in_use_kb") is not None]
        if rs and all(r.get("rss_kb") is not None for r in rs):
            cells.append((s, rs))
    if not cells:
        return None
    n = len(cells)
    cols = min(3, n)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.2 * rows), squeeze=False)
    for ax, (s, rs) in zip(axes.flat, cells, strict=False):
        t = [r["t_s"] for r in rs]
        used = [r["alloc_in_use_kb"] / 1024 for r in rs]
        cached = [(r.get("alloc_cached_kb") or 0) / 1024 for r in rs]
        rss = [r["rss_kb"] / 1024 for r in rs]
        top = [u + c for u, c in zip(used, cached, strict=True)]
        ax.fill_between(t, 0, used, step="post", color=STACK[0][1], alpha=0.85, linewidth=0)
        ax.fill_between(t, used, top, step="post", color=STACK[1][1], alpha=0.85, linewidth=0)
        ax.step(t, rss, where="post", color="#000000", linewidth=1.5, zorder=5)
        idle = [r["t_s"] for r in rs if r.get("phase") == "idle"]
        if idle:
            ax.axvspan(min(idle), max(idle), color="#000000", alpha=0.06, linewidth=0)
            ax.text(min(idle), 1.01, "idle", transform=ax.get_xaxis_transform(), fontsize=7)
        ax.set_title(series_label(run, s), fontsize=9)
        ax.set_xlabel("s since server start", fontsize=8)
        ax.set_ylabel("MB", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(True, alpha=0.3)
    for ax in list(axes.flat)[n:]:
        ax.set_visible(False)
    handles = [Patch(color=c, label=lbl) for lbl, c in STACK]
    handles.append(Line2D([], [], color="#000000", label="RSS (the kernel's resident figure)"))
    fig.legend(handles=handles, loc="lower center", ncol=3, fontsize=8)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
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


def alloc_stack_plot(run: Run) -> str | None:
    fig = alloc_stack_figure(run)
    return None if fig is None else to_data_uri(fig)


def churn_rss_plot(run: Run) -> str | None:
    fig = churn_rss_figure(run)
    return None if fig is None else to_data_uri(fig)
