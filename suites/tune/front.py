"""The Pareto front of a tune: pareto.csv (every finished trial, the front first) and its plot.

A trial is on the front when it meets the throughput constraint (no point resolved as slower than
the defaults) and no other such trial has both less memory and less growth (ratios to the
defaults, lower is better on both). The front is computed here from the recorded figures, so the
file says exactly what the recommendation was chosen from.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path

from rundir.atomic import atomic_write
from suites.tune.objectives import Figure, TrialFigures

PARETO_CSV = "pareto.csv"
PARETO_PNG = "pareto.png"


@dataclass(frozen=True)
class Trial:
    number: int
    setting: dict  # knob -> value as the allocator reads it
    figures: TrialFigures
    run_dir: str

    @property
    def growth_ratio(self) -> float:
        return self.figures.growth.ratio if self.figures.growth else self.figures.memory.ratio


def front(trials: list[Trial]) -> list[Trial]:
    ok = [t for t in trials if t.figures.feasible]

    def dominated(t: Trial) -> bool:
        return any(
            o.figures.memory.ratio <= t.figures.memory.ratio
            and o.growth_ratio <= t.growth_ratio
            and (o.figures.memory.ratio, o.growth_ratio) != (t.figures.memory.ratio, t.growth_ratio)
            for o in ok
        )

    return sorted((t for t in ok if not dominated(t)), key=lambda t: t.figures.memory.ratio)


def _fig(prefix: str, f: Figure | None) -> dict:
    if f is None:
        return {f"{prefix}_{k}": "" for k in ("ratio", "lo", "hi", "verdict")}
    return {
        f"{prefix}_ratio": f"{f.ratio:.4f}",
        f"{prefix}_lo": f"{f.lo:.4f}",
        f"{prefix}_hi": f"{f.hi:.4f}",
        f"{prefix}_verdict": f.verdict,
    }


def pareto_csv(trials: list[Trial], knobs: list[str]) -> str:
    on = {t.number for t in front(trials)}
    ordered = sorted(trials, key=lambda t: (t.number not in on, t.figures.memory.ratio))
    cols = ["trial", "on_front", "feasible", *knobs]
    for p in ("memory", "growth", "throughput"):
        cols += [f"{p}_ratio", f"{p}_lo", f"{p}_hi", f"{p}_verdict"]
    cols += ["slower_points", "rounds", "run_dir"]
    buf = io.StringIO()
    w = csv.DictWriter(buf, cols, lineterminator="\n")
    w.writeheader()
    for t in ordered:
        row = {
            "trial": t.number,
            "on_front": t.number in on,
            "feasible": t.figures.feasible,
            **{k: t.setting.get(k, "") for k in knobs},
            **_fig("memory", t.figures.memory),
            **_fig("growth", t.figures.growth),
            **_fig("throughput", t.figures.throughput),
            "slower_points": " ".join(t.figures.slower_points),
            "rounds": t.figures.rounds,
            "run_dir": t.run_dir,
        }
        w.writerow(row)
    return buf.getvalue()


def write_plot(trials: list[Trial], path: Path, title: str) -> None:
    """Memory (RSS at stop) against the worst throughput point, both as ratios to the defaults
    with their intervals; the front in colour, the defaults at (1, 1)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    on = {t.number for t in front(trials)}
    fig, ax = plt.subplots(figsize=(7, 5))
    for t in trials:
        m, s = t.figures.memory, t.figures.throughput
        colour = "tab:blue" if t.number in on else ("tab:gray" if t.figures.feasible else "tab:red")
        ax.errorbar(
            m.ratio, s.ratio,
            xerr=[[max(m.ratio - m.lo, 0)], [max(m.hi - m.ratio, 0)]],
            yerr=[[max(s.ratio - s.lo, 0)], [max(s.hi - s.ratio, 0)]],
            fmt="o", color=colour, alpha=0.8, capsize=2,
        )  # fmt: skip
        ax.annotate(str(t.number), (m.ratio, s.ratio), textcoords="offset points", xytext=(4, 4))
    ax.axvline(1.0, color="black", lw=0.8, ls="--")
    ax.axhline(1.0, color="black", lw=0.8, ls="--")
    ax.plot([1.0], [1.0], marker="s", color="black", label="defaults")
    ax.plot([], [], "o", color="tab:blue", label="on the front")
    ax.plot([], [], "o", color="tab:gray", label="dominated")
    ax.plot([], [], "o", color="tab:red", label="slower (resolved)")
    ax.set_xlabel("RSS at stop / defaults' (lower is better)")
    # ratios: a log axis shows 0.5 and 2 as far from 1, and keeps a few-rounds interval (which
    # can span 0.02-7) from flattening every point
    ax.set_yscale("log", nonpositive="clip")
    ax.set_ylabel("throughput / defaults' (worst point, log scale)")
    ax.set_title(title)
    ax.legend(loc="best", fontsize=8)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    plt.close(fig)
    atomic_write(path, buf.getvalue())
