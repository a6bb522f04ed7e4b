"""The Pareto front of a tune: pareto.csv (every finished trial, the front first) and its plot.

A trial is on the front when it meets the throughput constraint (no point resolved as slower than
the defaults) and no other such trial has both less memory and less growth (RSS at stop as a ratio
to the defaults, growth as the difference in MB per hour from a growth run or, in a tune without
one, the life's growth as a ratio; lower is better on both). The front is computed here from the
recorded figures, so the file says what the recommendation was chosen from; the recommendation
itself needs a resolved gain (study.candidates), which a point on the front need not have.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path

from analysis.growth_rate import UNIT as GROWTH_UNIT
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
    def growth_value(self) -> float:
        """The growth objective: MB/h above the defaults' (a growth run), or the life's growth
        ratio; a trial without either is ranked on its memory ratio alone."""
        return self.figures.growth.ratio if self.figures.growth else self.figures.memory.ratio


def front(trials: list[Trial]) -> list[Trial]:
    ok = [t for t in trials if t.figures.feasible]

    def dominated(t: Trial) -> bool:
        return any(
            o.figures.memory.ratio <= t.figures.memory.ratio
            and o.growth_value <= t.growth_value
            and (o.figures.memory.ratio, o.growth_value) != (t.figures.memory.ratio, t.growth_value)
            for o in ok
        )

    return sorted((t for t in ok if not dominated(t)), key=lambda t: t.figures.memory.ratio)


def _fig(prefix: str, f: Figure | None, value: str = "ratio") -> dict:
    if f is None:
        return {f"{prefix}_{k}": "" for k in (value, "lo", "hi", "verdict")}
    return {
        f"{prefix}_{value}": f"{f.ratio:.4f}",
        f"{prefix}_lo": f"{f.lo:.4f}",
        f"{prefix}_hi": f"{f.hi:.4f}",
        f"{prefix}_verdict": f.verdict,
    }


def _growth_unit(trials: list[Trial]) -> str:
    """The growth columns' unit: "MB/h" (a growth run's difference) or "ratio" (the life's)."""
    units = {t.figures.growth.unit for t in trials if t.figures.growth}
    return GROWTH_UNIT if units == {GROWTH_UNIT} else "ratio"


def pareto_csv(trials: list[Trial], knobs: list[str]) -> str:
    on = {t.number for t in front(trials)}
    ordered = sorted(trials, key=lambda t: (t.number not in on, t.figures.memory.ratio))
    # growth in MB/h is a difference, not a ratio: its columns say so by their name
    unit = _growth_unit(trials)
    gvalue = "mb_per_hour" if unit == GROWTH_UNIT else "ratio"
    cols = ["trial", "on_front", "feasible", *knobs]
    for p, value in (("memory", "ratio"), ("growth", gvalue), ("throughput", "ratio")):
        cols += [f"{p}_{value}", f"{p}_lo", f"{p}_hi", f"{p}_verdict"]
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
            **_fig("growth", t.figures.growth, gvalue),
            **_fig("throughput", t.figures.throughput),
            "slower_points": " ".join(t.figures.slower_points),
            "rounds": t.figures.rounds,
            "run_dir": t.run_dir,
        }
        w.writerow(row)
    return buf.getvalue()


def write_plot(trials: list[Trial], path: Path, title: str) -> None:
    """Throughput (the worst point) against memory, both with their intervals, one panel per
    memory objective: RSS at stop as a ratio to the defaults, and growth (MB/h above the
    defaults', or the life's ratio); the front in colour, the defaults marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    on = {t.number for t in front(trials)}
    grown = [t for t in trials if t.figures.growth]
    unit = _growth_unit(trials)
    panels = [("RSS at stop / defaults' (lower is better)", lambda t: t.figures.memory, 1.0)]
    if grown:
        label = (
            "RSS growth, MB/h above the defaults' (lower is better)"
            if unit == GROWTH_UNIT
            else "RSS growth over the life / defaults' (lower is better)"
        )
        panels.append((label, lambda t: t.figures.growth, 0.0 if unit == GROWTH_UNIT else 1.0))
    fig, axes = plt.subplots(1, len(panels), figsize=(7 * len(panels), 5), squeeze=False)
    for ax, (xlabel, get, at_defaults) in zip(axes[0], panels, strict=True):
        for t in trials:
            m, s = get(t), t.figures.throughput
            if m is None:
                continue
            colour = (
                "tab:blue" if t.number in on else ("tab:gray" if t.figures.feasible else "tab:red")
            )
            ax.errorbar(
                m.ratio, s.ratio,
                xerr=[[max(m.ratio - m.lo, 0)], [max(m.hi - m.ratio, 0)]],
                yerr=[[max(s.ratio - s.lo, 0)], [max(s.hi - s.ratio, 0)]],
                fmt="o", color=colour, alpha=0.8, capsize=2,
            )  # fmt: skip
            ax.annotate(str(t.number), (m.ratio, s.ratio), textcoords="offset points",
                        xytext=(4, 4))  # fmt: skip
        ax.axvline(at_defaults, color="black", lw=0.8, ls="--")
        ax.axhline(1.0, color="black", lw=0.8, ls="--")
        ax.plot([at_defaults], [1.0], marker="s", color="black", label="defaults")
        ax.plot([], [], "o", color="tab:blue", label="on the front")
        ax.plot([], [], "o", color="tab:gray", label="dominated")
        ax.plot([], [], "o", color="tab:red", label="slower (resolved)")
        ax.set_xlabel(xlabel)
        # ratios: a log axis shows 0.5 and 2 as far from 1, and keeps a few-rounds interval
        # (which can span 0.02-7) from flattening every point
        ax.set_yscale("log", nonpositive="clip")
        ax.set_ylabel("throughput / defaults' (worst point, log scale)")
        ax.legend(loc="best", fontsize=8)
    fig.suptitle(title)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    plt.close(fig)
    atomic_write(path, buf.getvalue())
