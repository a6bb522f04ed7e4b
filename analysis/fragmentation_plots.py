"""Figures of the fragmentation section: per scenario, the parts of RSS at each cycle's end per
allocator (stacked: they add up to RSS, never above it), and throughput against growth for every
arm (which settings buy memory at what cost)."""

from __future__ import annotations

from analysis.fragmentation import rates_by, scenario_workloads
from analysis.memory_plots import first_lives_parts, panel_grid, parts_legend, stack_parts
from analysis.plots import _colour, to_data_uri
from analysis.point_tables import series_label
from analysis.stats import median
from rundir.read import Run


def parts_by_cycle_figure(run: Run, workload: str):
    """One panel per allocator (its first repeat) for one scenario: the parts of RSS at each
    cycle's end; None when no allocator has a decomposition of it."""
    panels = first_lives_parts(
        run,
        lambda cid: sorted(
            (r for r in run.rows if r["cell"] == cid and r["workload"] == workload),
            key=lambda r: r.get("scenario_cycle") or 0,
        ),
    )
    if not panels:
        return None
    fig, axes = panel_grid(len(panels), 4, 3.4, 2.8, sharey=True)
    drawn: set[str] = set()
    for ax, (s, rows, parts) in zip(axes, panels, strict=True):
        # the wall time growth per hour is fitted against, so a soak's hours show as hours; a run
        # recorded before scenario_end_s has the cycle's number only
        timed = all(r.get("scenario_end_s") is not None for r in rows)
        xs = [r["scenario_end_s"] / 3600 if timed else r["scenario_cycle"] for r in rows]
        drawn |= stack_parts(ax, xs, parts)
        ax.set_title(series_label(run, s), fontsize=9)
        ax.set_xlabel("hours since the server started" if timed else "cycle", fontsize=8)
        ax.set_ylabel("MB", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(True, alpha=0.3)
    fig.suptitle(workload, fontsize=10)
    parts_legend(fig, drawn)
    fig.tight_layout(rect=(0, 0.1, 1, 0.96))
    return fig


def parts_by_cycle_plots(run: Run) -> list[tuple[str, str]]:
    """(scenario workload, PNG data URI) for each scenario with a decomposition."""
    out = []
    for wl in scenario_workloads(run):
        fig = parts_by_cycle_figure(run, wl)
        if fig is not None:
            out.append((wl, to_data_uri(fig)))
    return out


def cost_figure(run: Run):
    """One panel per scenario: each arm's growth (x, MB per hour, median over lives) against
    its throughput (y, median over cycles and lives); None without growth figures."""
    lives = rates_by(run)
    wls = [
        w
        for w in scenario_workloads(run)
        if any(k[1] == w and any(x.rss for x in ls) for k, ls in lives.items())
    ]
    if not wls:
        return None
    fig, axes = panel_grid(len(wls), 3, 4.6, 3.6)
    for ax, wl in zip(axes, wls, strict=True):
        for (_server, w, alloc, _thp), ls in lives.items():
            slopes = [x.rss.value for x in ls if w == wl and x.rss]
            tps = [x.tps for x in ls if w == wl and x.tps]
            if not slopes or not tps:
                continue
            x, y = median(slopes), median(tps)
            ax.scatter([x], [y], color=_colour(run, alloc), s=28, zorder=3)
            ax.annotate(alloc, (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
        ax.axvline(0, color="#000000", linewidth=0.6)
        ax.set_title(wl, fontsize=9)
        ax.set_xlabel("RSS growth (MB per hour), all cycles", fontsize=8)
        ax.set_ylabel("throughput (transactions/s)", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(True, alpha=0.3)
    fig.tight_layout()
    return fig


def cost_plot(run: Run) -> str | None:
    fig = cost_figure(run)
    return None if fig is None else to_data_uri(fig)
