"""How a Comparison is shown: the terminal table, compare.md and a self-contained compare.html.

All three are built from the same Table objects, so the terminal, the Markdown and the HTML always
agree on every figure and verdict.
"""

from __future__ import annotations

import io
from pathlib import Path

import matplotlib.pyplot as plt
from jinja2 import Environment, StrictUndefined
from rich import box
from rich.console import Console
from rich.table import Table as RichTable
from rich.text import Text

from analysis import memory, point_tables
from analysis.compare import (
    FAILED_IN_NEW,
    FASTER,
    NO_VERDICT,
    POSSIBLY_FASTER,
    POSSIBLY_SLOWER,
    SLOWER,
    Comparison,
    PointComparison,
)
from analysis.errors import AnalysisError
from analysis.plots import to_data_uri
from analysis.report import TEMPLATES
from analysis.table_model import Cell, Table, fmt, text
from rundir.atomic import atomic_write_all

HOW_TO_READ = (
    "Each row is one point measured in both runs. base and new are geometric means over each run's"
    " repeats (the plain figure with one run per side); NEW/BASE is their ratio (1.00× = equal,"
    " 0.90× = NEW does 10% less work per second), with its 95% confidence interval in brackets."
    " A verdict of 'slower' or 'faster' needs both: the interval excludes 1.00× (the difference is"
    " not noise) and the change exceeds the threshold. Firm verdicts need at least 2 repeats per"
    " side (separate server lives). With one run per side the interval comes from batch means of"
    " that run's per-second throughput, which measures only the noise within one server life:"
    " such verdicts read 'possibly slower'/'possibly faster' and fail the exit code only with"
    " --allow-weak. 'failed in NEW' means BASE measured the point and NEW's level or server"
    " failed there: a regression."
)
MEMORY_HOW_TO_READ = (
    "RSS growth of each server (MB) {span}: the mean over each run's complete"
    " cells. The change is NEW's extra mean growth as a percentage of BASE's mean resident memory"
    " at the end, with its 95% confidence interval (Welch) when both sides were repeated."
    " Runs that read the allocator's own accounting add its in-use and cached bytes at the end"
    " of the load, compared the same way (change as a share of BASE's resident memory)."
)


def _ratio_cell(p: PointComparison) -> Cell:
    if p.ratio is None:
        return Cell(None, "–")
    ci = f" [{p.lo:.3f}–{p.hi:.3f}]" if p.lo is not None and p.hi is not None else ""
    return Cell(p.ratio, f"{p.ratio:.3f}×{ci}")


def pct_text(x: float) -> str:
    """A signed percentage; small ones keep enough digits not to read as zero."""
    return f"{x:+.1f}%" if abs(x) >= 0.1 or x == 0 else f"{x:+.2g}%"


def _change_cell(p: PointComparison) -> Cell:
    c = p.change_pct
    return Cell(c, "–" if c is None else pct_text(c))


def _verdict_cell(p: PointComparison) -> Cell:
    t = p.verdict.upper() if p.regression else p.verdict
    return Cell(p.verdict, t, note=p.note, warn=p.regression or p.verdict == POSSIBLY_SLOWER)


def _server_column(cmp: Comparison, points: list[PointComparison]) -> bool:
    """Whether rows need the server: several servers compared side by side (one per engine:
    "mariadb-10.11.19" and "mariadb-10.11.19+rocksdb"), where allocator and THP repeat."""
    return cmp.mode != "upgrade" and len({p.new_server for p in points}) > 1


def points_table(cmp: Comparison) -> Table:
    upgrade = cmp.mode == "upgrade"
    by_server = _server_column(cmp, cmp.points)
    cols = ["server"] * by_server + [
        "workload",
        "allocator",
        "THP",
        "threads",
        "metric",
        "base (geo. mean)",
        "new (geo. mean)",
        "NEW/BASE [95% CI]",
        "change",
        "verdict",
        "evidence",
    ]
    t = Table(
        "points", f"Throughput, NEW vs BASE (threshold {cmp.threshold_pct:g}%)", HOW_TO_READ, cols
    )
    if upgrade and cmp.points:
        t.title += f": {cmp.points[0].base_server} → {cmp.points[0].new_server}"
    for p in cmp.points:
        t.rows.append(
            [text(p.new_server)] * by_server
            + [
                text(p.workload),
                text(p.allocator),
                text(p.thp),
                Cell(p.threads, str(p.threads)),
                text(point_tables.metric_label(p.workload, p.metric)),
                Cell(p.base, fmt(p.base)),
                Cell(p.new, fmt(p.new)),
                _ratio_cell(p),
                _change_cell(p),
                _verdict_cell(p),
                text(p.evidence),
            ]
        )
    return t


MEMORY_FIGURE = {
    "rss_growth_kb": "RSS growth",
    "alloc_in_use_kb": "allocator: in use at end of load",
    "alloc_cached_kb": "allocator: cached at end of load",
}


def memory_table(cmp: Comparison) -> Table:
    by_server = _server_column(cmp, cmp.memory)
    cols = ["server"] * by_server + [
        "allocator",
        "THP",
        "figure",
        "base (MB, mean)",
        "new (MB, mean)",
        "change [95% CI]",
        "verdict",
        "evidence",
    ]
    span = (
        "from server start to the last reading before shutdown"
        if cmp.memory_basis == memory.SERVER
        else "over the measured levels (start of the first to end of the last)"
    )
    t = Table(
        "memory", "Memory: RSS growth, NEW vs BASE", MEMORY_HOW_TO_READ.format(span=span), cols
    )
    for p in cmp.memory:
        ch = _change_cell(p)
        if p.lo is not None and p.hi is not None:
            ch = Cell(
                ch.value, f"{ch.text} [{pct_text((p.lo - 1) * 100)}, {pct_text((p.hi - 1) * 100)}]"
            )
        t.rows.append(
            [text(p.new_server)] * by_server
            + [
                text(p.allocator),
                text(p.thp),
                text(MEMORY_FIGURE.get(p.metric, p.metric)),
                Cell(p.base, fmt(p.base / 1024)),
                Cell(p.new, fmt(None if p.new is None else p.new / 1024)),
                ch,
                _verdict_cell(p),
                text(p.evidence),
            ]
        )
    return t


def headline(cmp: Comparison) -> str:
    reg = cmp.regressions
    judged = cmp.judged
    code = cmp.exit_code
    if reg:
        failed = sum(1 for p in reg if p.verdict == FAILED_IN_NEW)
        slow = sum(1 for p in reg if p.kind == "throughput") - failed
        mem = len(reg) - slow - failed
        parts = []
        if failed:
            parts.append(f"{failed} point(s) measured in BASE failed in NEW")
        if slow:
            weak = sum(1 for p in reg if p.verdict == POSSIBLY_SLOWER)
            extra = f" ({weak} on weak evidence, --allow-weak)" if weak else ""
            parts.append(
                f"{slow} point(s) significantly slower by more than {cmp.threshold_pct:g}%{extra}"
            )
        if mem:
            parts.append(f"{mem} significant memory-growth increase(s)")
        return "REGRESSION: " + "; ".join(parts) + f" (exit code {code})"
    if cmp.nothing_judged:
        return (
            f"NO VERDICT: none of the {len(cmp.points)} point(s) had enough evidence to judge —"
            f" nothing was checked (exit code {code}). Re-run both sides with --repeat 3."
        )
    possible = cmp.possible_regressions
    if possible:
        return (
            f"POSSIBLE REGRESSION (weak evidence: 1 run per side): {len(possible)} point(s)"
            f" possibly slower by more than {cmp.threshold_pct:g}%; not counted (exit code {code})."
            " Re-run both sides with --repeat 3 for a firm answer, or pass --allow-weak to fail on it."
        )
    return (
        f"No significant regression: {len(judged)} point(s) judged, none slower by more than"
        f" {cmp.threshold_pct:g}% (exit code {code})"
    )


def render_text(cmp: Comparison) -> str:
    buf = io.StringIO()
    console = Console(file=buf, width=160, color_system=None, force_terminal=False, highlight=False)
    for line in cmp.gap_lines():  # first: what this comparison could not see
        console.print(line, markup=False)
    console.print(
        f"mallocsweep compare: BASE {cmp.base_id} -> NEW {cmp.new_id} ({cmp.mode}; "
        f"threshold {cmp.threshold_pct:g}%, 95% confidence)",
        markup=False,
    )
    for w in cmp.warnings:
        console.print(f"WARNING: {w}", markup=False)
    for table in (points_table(cmp), memory_table(cmp)):
        if not table.rows:
            continue
        rt = RichTable(title=table.title, box=box.SIMPLE_HEAD, show_lines=False)
        for c in table.columns:
            text_col = c in (
                "server",
                "workload",
                "allocator",
                "THP",
                "metric",
                "verdict",
                "evidence",
            )
            rt.add_column(c, justify="left" if text_col else "right")
        notes: list[str] = []
        for row in table.rows:
            cells = []
            for c in row:
                mark = ""
                if c.note:
                    if c.note not in notes:
                        notes.append(c.note)
                    mark = f" [{notes.index(c.note) + 1}]"
                cells.append(Text(c.text + mark))
            rt.add_row(*cells)
        console.print(rt)
        for i, n in enumerate(notes, 1):
            console.print(f"  [{i}] {n}", markup=False)
    console.print(headline(cmp), markup=False)
    return buf.getvalue()


def forest_plot(cmp: Comparison, workload: str) -> str | None:
    """Each point's NEW/BASE ratio with its interval; the band is the threshold."""
    pts = [p for p in cmp.points if p.workload == workload and p.ratio is not None]
    if not pts:
        return None
    fig, ax = plt.subplots(figsize=(8, 0.8 + 0.28 * len(pts)))
    thr = cmp.threshold_pct / 100
    ax.axvspan(1 - thr, 1 + thr, color="#999999", alpha=0.15, linewidth=0)
    ax.axvline(1.0, color="#555555", linewidth=1)
    for i, p in enumerate(pts):
        colour = (
            "#d62728"
            if p.verdict in (SLOWER, POSSIBLY_SLOWER, FAILED_IN_NEW)
            else "#2ca02c"
            if p.verdict in (FASTER, POSSIBLY_FASTER)
            else "#444444"
        )
        if p.verdict == NO_VERDICT:  # a ratio with no interval is not evidence: say so
            ax.plot([p.ratio], [i], "x", color="#999999")
            continue
        if p.lo is not None and p.hi is not None:
            ax.plot([p.lo, p.hi], [i, i], color=colour, linewidth=2)
        ax.plot([p.ratio], [i], "o", color=colour, markerfacecolor="white" if p.weak else colour)
    ax.set_yticks(range(len(pts)))
    ax.set_yticklabels([f"{p.allocator} THP {p.thp} @{p.threads}" for p in pts], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("NEW / BASE throughput (1.0 = unchanged)")
    ax.set_title(
        f"{workload}: ratio with 95% CI (grey band: ±{cmp.threshold_pct:g}%;"
        " hollow = weak; × = no verdict)",
        fontsize=9,
    )
    ax.grid(True, axis="x", alpha=0.3)
    return to_data_uri(fig)


def _env() -> Environment:
    return Environment(
        loader=TEMPLATES,
        undefined=StrictUndefined,
        autoescape=lambda n: bool(n) and n.endswith(".html.j2"),
        trim_blocks=True,
        lstrip_blocks=True,
    )


def render_markdown(cmp: Comparison) -> str:
    lines = [
        f"# mallocsweep compare: {cmp.base_id} → {cmp.new_id}",
        "",
        *(f"**{line}**\n" for line in cmp.gap_lines()),
        f"- base: `{cmp.base_path}`",
        f"- new: `{cmp.new_path}`",
        f"- mode: {cmp.mode}",
        f"- threshold: {cmp.threshold_pct:g}%, confidence 95%",
        "",
        f"**{headline(cmp)}**",
        "",
    ]
    if cmp.warnings:
        lines += ["## Warnings", ""] + [f"- ⚠ {w}" for w in cmp.warnings] + [""]
    for t in (points_table(cmp), memory_table(cmp)):
        if t.rows:
            lines += [f"## {t.title}", "", t.explain, "", t.markdown(), ""]
    return "\n".join(lines)


def render_html(cmp: Comparison) -> str:
    workloads = list(dict.fromkeys(p.workload for p in cmp.points))
    return (
        _env()
        .get_template("compare.html.j2")
        .render(
            cmp=cmp,
            headline=headline(cmp),
            points=points_table(cmp),
            memory=memory_table(cmp),
            plots=[(w, forest_plot(cmp, w)) for w in workloads],
        )
    )


def output_stem(cmp: Comparison) -> str:
    """compare-<base>-vs-<new>: named by both runs, so comparing NEW with another BASE never
    replaces an earlier comparison. Each id is cut to keep the name under NAME_MAX (255 bytes)."""

    def part(run_id: str) -> str:
        return run_id.replace("/", "_")[:100]

    return f"compare-{part(cmp.base_id)}-vs-{part(cmp.new_id)}"


def write_outputs(cmp: Comparison, out_dir: Path) -> list[Path]:
    """The .md and .html of this comparison in out_dir, both or neither (rendered first, written
    to temp names, then moved into place), never overwriting a file: when the pair was compared
    there before, the new files get the next free suffix (.2, .3, ...). AnalysisError (one line
    naming the place) when they cannot be written; nothing is left behind then."""
    views = ((".md", render_markdown(cmp)), (".html", render_html(cmp)))
    made = [p for p in (out_dir, *out_dir.parents) if not p.exists() and not p.is_symlink()]
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        _unmake(made)
        raise AnalysisError(
            f"{out_dir}: cannot create the output directory: {e.strerror}; nothing was written"
        ) from None
    if not out_dir.is_dir():
        raise AnalysisError(f"{out_dir}: not a directory; nothing was written")
    try:
        return _write_pair(cmp, out_dir, views)
    except AnalysisError:
        _unmake(made)  # the directories made for it go too: nothing is left behind
        raise


def _unmake(made: list[Path]) -> None:
    for d in made:  # deepest first
        try:
            d.rmdir()
        except OSError:
            pass


def _write_pair(cmp: Comparison, out_dir: Path, views) -> list[Path]:
    stem = output_stem(cmp)
    n = 1
    while True:
        name = stem if n == 1 else f"{stem}.{n}"
        paths = [out_dir / f"{name}{ext}" for ext, _ in views]
        if any(p.exists() for p in paths):
            n += 1
            continue
        try:
            atomic_write_all([(p, data) for p, (_, data) in zip(paths, views, strict=True)])
        except FileExistsError:  # another compare took this name meanwhile: next suffix
            n += 1
            continue
        except OSError as e:
            raise AnalysisError(
                f"{out_dir}: cannot write {name}.md and .html: {e.strerror or e}; nothing was "
                "written"
            ) from None
        return paths
