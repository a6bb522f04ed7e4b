"""The table model every report section is built from, and its Markdown form.

A table keeps each figure's raw value beside the text shown, so the HTML report, summary.md and the
tests all read the same numbers (tests compare `Cell.value` with results.csv).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Cell:
    value: float | str | None
    text: str
    note: str = ""  # secondary figure shown small beside the text, e.g. "1.08× glibc"
    title: str = ""  # hover text in HTML: how the interval was computed, the spread
    warn: bool = False  # unstable point (spread > 10% of the median)
    ci: str = ""  # the confidence interval, shown beside the value ("[1,020–1,090]")


@dataclass
class Table:
    key: str  # stable identifier (HTML anchor, tests)
    title: str
    explain: str  # what the figures are and how to read them, for someone without the README
    columns: list[str]
    rows: list[list[Cell]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def numeric_columns(self) -> set[int]:
        """Columns whose every filled cell is a number: right-aligned in HTML, text left."""
        out = set()
        for i in range(len(self.columns)):
            vals = [r[i].value for r in self.rows if i < len(r) and r[i].text not in ("", "–")]
            if vals and all(isinstance(v, int | float) and not isinstance(v, bool) for v in vals):
                out.add(i)
        return out

    def column(self, name: str) -> list[Cell]:
        i = self.columns.index(name)
        return [r[i] for r in self.rows]

    def markdown(self) -> str:
        def md(c: Cell) -> str:
            text = (
                c.text
                + (f" {c.ci}" if c.ci else "")
                + (f" ({c.note})" if c.note else "")
                + (" ⚠" if c.warn else "")
            )
            return text.replace("|", "\\|")

        lines = ["| " + " | ".join(self.columns) + " |", "|" + "---|" * len(self.columns)]
        lines += ["| " + " | ".join(md(c) for c in row) + " |" for row in self.rows]
        return "\n".join(lines)


def text(value: str | None) -> Cell:
    return Cell(value, "" if value is None else str(value))


def _missing(value: float | None) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def fmt(value: float | None, unit: str = "") -> str:
    """Numbers as a DBA reads them: thousands separated, three significant digits when small."""
    if _missing(value):
        return "–"
    v = float(value)
    if abs(v) >= 1000:
        s = f"{v:,.0f}"
    elif abs(v) >= 100:
        s = f"{v:.0f}"
    elif abs(v) >= 10:
        s = f"{v:.1f}"
    elif abs(v) >= 1:
        s = f"{v:.2f}"
    elif v == 0:
        s = "0"
    else:
        s = f"{v:.3g}"
    return s + unit


def ratio_text(r: float | None) -> str:
    return "–" if r is None else f"{r:.2f}×"


def num(
    value: float | None, note: str = "", title: str = "", warn: bool = False, ci: str = ""
) -> Cell:
    return Cell(value, fmt(value), note, title, warn, ci)


def count(value: float | None) -> Cell:
    """An event counter: a whole number, never "3.00"."""
    if _missing(value):
        return Cell(value, "–")
    return Cell(value, f"{round(value):,}")
