"""Figures of the fragmentation section: per scenario, the parts of RSS at each cycle's end per
allocator (stacked: they add up to RSS, never above it), and throughput against growth for every
arm (which settings buy memory at what cost)."""

from __future__ import annotations

from analysis.fragmentation import rates_by, scenario_workloads
from analysis.growth_rate import is_soak
from analysis.memory_plots import first_lives_parts, panel_grid, parts_legend, stack_parts
from analysis.plots import _colour, to_data_uri
from analysis.point_tables import series_label
from analysis.stats import median
from rundir.read import Run


def _cycle_rows(run: Run, cid: str, workload: str) -> list[dict]:
    return sorted(
        (r for r in run.rows if r["cell"] == cid and r["workload"] == workload),
        key=lambda r: r.get("scenario_cycle") or 0,
    )


def soak_segments(run: Run, cid: str) -> list[str]:
    """A soak's cells of the same arm as `cid`, in segment order (`cid` alone outside a soak, or
    for an arm never broken)."""
    if not is_soak(run):
        return [cid]
    me = run.cell(cid)

    def arm(c: dict) -> tuple:
        return (
            (c.get("allocator") or {}).get("name"),
            (c.get("thp") or {}).get("requested"),
            (c.get("server") or {}).get("label"),
            c.get("engine"),
        )

    same = [
        (int((c.get("soak") or {}).get("segment") or 1), i)
        for i, c in run.cells.items()
        if arm(c) == arm(me) and c.get("status") == "ok"
    ]
    return [i for _, i in sorted(same)] or [cid]


def _soak_rows(run: Run, cid: str, workload: str) -> tuple[list[dict], list[float]]:
    """The arm's cycles over every segment of its soak, each row's `soak_h` the hours since the
    soak's first server started, a segment's clock going on where the one before ended (the
    time the runner was away is not known, and no cycle ran in it); and the hours where a new
    life began."""
    rows, breaks, offset = [], [], 0.0
    for i, seg in enumerate(soak_segments(run, cid)):
        got = _cycle_rows(run, seg, workload)
        if not got or any(r.get("scenario_end_s") is None for r in got):
            continue
        if i:
            breaks.append(offset / 3600)
        rows += [dict(r, soak_h=(offset + r["scenario_end_s"]) / 3600) for r in got]
        offset += got[-1]["scenario_end_s"]
    return rows, breaks


def parts_by_cycle_figure(run: Run, workload: str):
    """One panel per allocator (its first repeat; a soak: every segment of its one life) for one
    scenario: the parts of RSS at each cycle's end; None when no allocator has a decomposition."""
    soak = is_soak(run)
    breaks: dict[str, list[float]] = {}

    def rows_of(cid: str) -> list[dict]:
        if not soak:
            return _cycle_rows(run, cid, workload)
        rows, breaks[cid] = _soak_rows(run, cid, workload)
        return rows

    panels = first_lives_parts(run, rows_of)
    if not panels:
        return None
    fig, axes = panel_grid(len(panels), 4, 3.4, 2.8, sharey=True)
    drawn: set[str] = set()
    for ax, (s, rows, parts) in zip(axes, panels, strict=True):
        # the wall time growth per hour is fitted against, so a soak's hours show as hours; a run
        # recorded before scenario_end_s has the cycle's number only
        timed = all(r.get("scenario_end_s") is not None for r in rows)
        if soak and timed:
            xs = [r["soak_h"] for r in rows]
            for x in breaks.get(rows[0]["cell"], ()):
                # the series broke here (a killed or interrupted soak, resumed): a new life
                ax.axvline(x, color="#b00000", linestyle="--", linewidth=0.8)
                ax.annotate("new life", (x, 0), xycoords=("data", "axes fraction"), fontsize=6,
                            color="#b00000", xytext=(2, 2), textcoords="offset points")  # fmt: skip
        else:
            xs = [r["scenario_end_s"] / 3600 if timed else r["scenario_cycle"] for r in rows]
        drawn |= stack_parts(ax, xs, parts)
        ax.set_title(series_label(run, s), fontsize=9)
        label = "hours of soak" if soak else "hours since the server started"
        ax.set_xlabel(label if timed else "cycle", fontsize=8)
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
