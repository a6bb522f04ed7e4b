"""Figures for the report, rendered off-screen (matplotlib Agg) into PNG data URIs.

Embedding the PNGs keeps report.html one self-contained file that opens offline. Thread counts go on
a log2 axis: the sweep doubles them, and equal steps then look equal. Colours are fixed per
allocator, so glibc is the same colour in every figure.
"""

from __future__ import annotations

import base64
import io

import matplotlib

matplotlib.use("Agg")  # before pyplot: no display on servers and CI machines

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import (  # noqa: E402
    FixedLocator,
    FuncFormatter,
    LogLocator,
    NullFormatter,
    NullLocator,
)

from analysis.point_tables import Series, metric_label, points, series_label, series_of  # noqa: E402
from analysis.table_model import fmt  # noqa: E402
from analysis.workload_words import words  # noqa: E402
from rundir.read import Run  # noqa: E402

PALETTE = [
    "#444444",
    "#1f77b4",
    "#d62728",
    "#2ca02c",
    "#9467bd",
    "#ff7f0e",
    "#8c564b",
    "#e377c2",
    "#17becf",
    "#bcbd22",
]
LINESTYLES = {"system": "-", "always": "--", "madvise": "-.", "never": ":"}


def _colour(run: Run, allocator: str) -> str:
    return (
        PALETTE[run.allocators.index(allocator) % len(PALETTE)]
        if allocator in run.allocators
        else "k"
    )


def _style(run: Run, s: Series) -> dict:
    servers = run.servers
    return {
        "color": _colour(run, s.allocator),
        "linestyle": LINESTYLES.get(s.thp, "-"),
        "marker": "os^vD"[servers.index(s.server) % 5] if s.server in servers else "o",
    }


def to_data_uri(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=96, bbox_inches="tight")
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _threads_axis(ax, threads: list[int]) -> None:
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(threads))
    ax.xaxis.set_minor_locator(NullLocator())
    # Levels closer than a doubling (1024, 1536) sit close on a log2 axis: slant their labels so
    # they do not run into each other.
    crowded = any(b / a < 1.8 for a, b in zip(threads, threads[1:], strict=False) if a > 0)
    ax.set_xticklabels([str(t) for t in threads], rotation=45 if crowded else 0)
    ax.set_xlabel("client threads (log2 scale)")
    ax.grid(True, alpha=0.3)


def _series_lines(ax, run: Run, workload: str, metric: str) -> bool:
    pts = points(run, workload, metric)
    threads = run.threads(workload)
    drawn = False
    for s in series_of(run):
        xs = [t for t in threads if (s, t) in pts]
        if not xs:
            continue
        cis = [pts[(s, t)] for t in xs]
        st = _style(run, s)
        ax.plot(xs, [c.median for c in cis], label=series_label(run, s), **st)
        if any(c.n > 1 for c in cis):
            ax.fill_between(
                xs, [c.lo for c in cis], [c.hi for c in cis], color=st["color"], alpha=0.15
            )
        drawn = True
    _threads_axis(ax, threads)
    return drawn


def throughput_plot(run: Run, workload: str, metric: str) -> str | None:
    fig, ax = plt.subplots(figsize=(8, 4.2))
    if not _series_lines(ax, run, workload, metric):
        plt.close(fig)
        return None
    ax.set_ylabel(metric_label(workload, metric))
    ax.set_ylim(bottom=0)
    ax.set_title(f"{workload}: throughput vs client threads")
    ax.legend(fontsize=8, loc="best")
    return to_data_uri(fig)


def latency_plot(run: Run, workload: str) -> str | None:
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.0))
    drawn = False
    for ax, pct in zip(axes, ("p95", "p99"), strict=True):
        drawn |= _series_lines(ax, run, workload, f"lat_{pct}_ms")
        ax.set_yscale("log")
        # Labels at 1-2-5 steps: plain numbers even when the range is less than a decade.
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: fmt(v)))
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_ylabel(f"{pct} latency (ms, log scale)")
        ax.set_title(f"{workload}: {pct} latency")
    if not drawn:
        plt.close(fig)
        return None
    axes[0].legend(fontsize=8, loc="best")
    fig.tight_layout()
    return to_data_uri(fig)


def _first_cells(run: Run) -> list[tuple[Series, str]]:
    """The first repeat's cell of each series: one line per series keeps the timeline readable."""
    seen: dict[Series, str] = {}
    for r in sorted(run.rows, key=lambda r: r["repeat"]):
        seen.setdefault(Series(r["server"], r["allocator"], r["thp"]), r["cell"])
    return [(s, seen[s]) for s in series_of(run) if s in seen]


def rss_timeline_plot(run: Run) -> str | None:
    """RSS over each server's life, with its phases (startup, warmup, each level, shutdown)."""
    cells = [(s, cid, run.samples(cid)) for s, cid in _first_cells(run)]
    cells = [c for c in cells if any(x.get("rss_kb") is not None for x in c[2])]
    if not cells:
        return None
    fig, ax = plt.subplots(figsize=(10, 4.5))
    for s, _cid, samples in cells:
        xs = [x["t_s"] for x in samples if x.get("rss_kb") is not None]
        ys = [x["rss_kb"] / 1024 for x in samples if x.get("rss_kb") is not None]
        st = _style(run, s)
        ax.plot(
            xs,
            ys,
            label=series_label(run, s),
            color=st["color"],
            linestyle=st["linestyle"],
            linewidth=1.3,
        )
    # Phase bands of the first series: cells run the same phases in the same order.
    samples = cells[0][2]
    spans: list[list] = []
    for x in samples:
        if spans and spans[-1][0] == x["phase"]:
            spans[-1][2] = x["t_s"]
        else:
            spans.append([x["phase"], x["t_s"], x["t_s"]])
    for i, (phase, t0, t1) in enumerate(spans):
        if i % 2:
            ax.axvspan(t0, t1, color="#000000", alpha=0.05, linewidth=0)
        if len(spans) <= 24:
            ax.text(
                (t0 + t1) / 2,
                1.01,
                phase,
                transform=ax.get_xaxis_transform(),
                rotation=60,
                fontsize=6,
                ha="left",
                va="bottom",
            )
    ax.set_xlabel("seconds since server start")
    ax.set_ylabel("RSS (MB)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    return to_data_uri(fig)


def interval_rate_plot(run: Run, workload: str) -> str | None:
    """Throughput per reporting interval over a level (iibench: a single long level)."""
    fig, ax = plt.subplots(figsize=(8, 4.0))
    drawn = False
    for s, cid in _first_cells(run):
        for t in run.threads(workload):
            rates = run.interval_rates(cid, workload, t)
            if rates:
                st = _style(run, s)
                ax.plot(
                    range(1, len(rates) + 1),
                    rates,
                    label=series_label(run, s),
                    color=st["color"],
                    linestyle=st["linestyle"],
                )
                drawn = True
    if not drawn:
        plt.close(fig)
        return None
    ax.set_xlabel("reporting interval")
    unit = words(workload).rate_unit
    ax.set_ylabel(f"{unit} in the interval")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(f"{workload}: rate per interval")
    return to_data_uri(fig)
