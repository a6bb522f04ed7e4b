"""The tables of the published allocator studies, computed from a run's results.

- throughput by allocator x threads, each value also as a ratio to glibc (Percona 2012/2013);
- latency percentiles by allocator x threads;
- context switches and CPU microseconds per operation (Callaghan), and for iibench per 1M rows.

Per-operation costs come from the columns the run recorded (cpu_us_per_op, ctxsw_per_op,
cpu_s_per_1m_ops, ctxsw_per_1m_ops): in a run with measured windows (results.csv has window_s) they
cover each level's window, where numerator and operation count span the same time. Older runs hold
whole-level figures; for them iibench's per-1M figures are computed from the totals as before.
Context switches that did not come from a whole-process source (taskstats or perf; the procfs
fallback counts live threads only) are never shown as a per-operation figure: the cell stays empty
and says why.

Memory and hugepage tables are in analysis/memory.py; per-cell tables (proof, failures) in
analysis/cell_tables.py.

Every figure is the median over repeats of one point; points come only from levels that completed.
A series is one (server, allocator, THP mode); its label shows the THP mode and the server only when
the run has several.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

from analysis.lives import by_life, cycles_per_life
from analysis.stats import MedianCI, median, median_ci
from analysis.table_model import Cell, Table, fmt, num, ratio_text, text
from analysis.workload_words import words
from rundir.format import WHOLE_PROCESS_SOURCES
from rundir.read import BASELINE_ALLOCATOR, Run
from rundir.schema import words as schema_words

# The reader's words for the figures these tables show, as the run-directory schema declares them.
METRIC_LABELS = {
    name: schema_words(name)
    for name in (
        "qps",
        "tps",
        "lat_p95_ms",
        "lat_p99_ms",
        "lat_avg_ms",
        "ctxsw_per_op",
        "cpu_us_per_op",
    )
}
# Higher is better only for throughput; the ratio column reads the same way for every metric.
STANDIN_LABEL = "protocol stand-in, no allocator conclusions"


@dataclass(frozen=True)
class Series:
    server: str
    allocator: str
    thp: str


def series_of(run: Run) -> list[Series]:
    """Every (server, allocator, THP mode) with rows, in display order (glibc first)."""
    present = {(r["server"], r["allocator"], r["thp"]) for r in run.rows}
    return [
        Series(s, a, t)
        for s in run.servers
        for t in run.thp_modes
        for a in run.allocators
        if (s, a, t) in present
    ]


def series_label(run: Run, s: Series) -> str:
    parts = [s.allocator]
    if len(run.thp_modes) > 1:
        parts.append(f"THP {s.thp}")
    if len(run.servers) > 1:
        parts.append(s.server)
    label = ", ".join(parts)
    if series_is_standin(run, s):
        label += f" ({STANDIN_LABEL})"
    return label


def series_is_standin(run: Run, s: Series) -> bool:
    return any(run.is_standin(r["cell"]) for r in run.rows if r["server"] == s.server)


def label_columns(run: Run) -> list[str]:
    cols = ["allocator"]
    if len(run.thp_modes) > 1:
        cols.append("THP")
    if len(run.servers) > 1:
        cols.append("server")
    return cols


def label_cells(run: Run, s: Series) -> list[Cell]:
    alloc = s.allocator + (f" ({STANDIN_LABEL})" if series_is_standin(run, s) else "")
    cells = [text(alloc)]
    if len(run.thp_modes) > 1:
        cells.append(text(s.thp))
    if len(run.servers) > 1:
        cells.append(text(s.server))
    return cells


def metric_label(workload: str, metric: str) -> str:
    """What a metric counts, for a workload: iibench's qps are rows, not queries."""
    own = words(workload).metric_labels.get(metric)
    return own or METRIC_LABELS.get(metric) or schema_words(metric)


def metric_of(run: Run, workload: str) -> str:
    """Throughput metric of a workload: qps (queries/s; rows inserted/s for iibench), else tps."""
    if any(r["qps"] for r in run.ok_rows if r["workload"] == workload):
        return "qps"
    return "tps"


def points(
    run: Run, workload: str, metric: str, value: Callable[[dict], float | None] | None = None
) -> dict[tuple[Series, int], MedianCI]:
    """Median and confidence interval of `metric` (or of `value(row)`) per (series, threads),
    over repeats: one value per server life (analysis/lives.py: a churn life's cycles are one)."""
    get = value or (lambda r: r.get(metric))

    def key(r):
        if r["workload"] != workload:
            return None
        return (Series(r["server"], r["allocator"], r["thp"]), r["threads"])

    return {k: median_ci(list(v.values())) for k, v in by_life(run.ok_rows, key, get).items()}


# -- per-operation costs ------------------------------------------------------------------------
@dataclass(frozen=True)
class Gap:
    """Why a per-operation cell is empty: `short` beside the dash, `long` on hover and below."""

    short: str
    long: str


PROCFS_GAP = Gap(
    "live threads only",
    "context switches came from the procfs fallback (neither taskstats nor perf was available):"
    " it sums live threads only, so switches of threads that exited are lost and counts are too"
    " low; no per-operation figure is given (the raw counts are in the timeline and the manifest)",
)
NO_WINDOW_GAP = Gap(
    "no window",
    "the level had no measured window (it was too short for two interval reports inside the"
    " load; the manifest says why in cells[].levels[].window), so no per-operation figure",
)

# (kind, per) -> the results.csv column with that rate over the measured window
RATE_COLUMNS = {
    ("cpu", "op"): "cpu_us_per_op",
    ("ctxsw", "op"): "ctxsw_per_op",
    ("cpu", "1m"): "cpu_s_per_1m_ops",
    ("ctxsw", "1m"): "ctxsw_per_1m_ops",
}
TOTAL_COLUMNS = {
    "cpu": ("cpu_user_s", "cpu_sys_s"),
    "ctxsw": ("ctxsw_voluntary", "ctxsw_involuntary"),
}


def ctxsw_source(run: Run, row: dict) -> str | None:
    """Where a row's context switches came from: the row's own column (newer runs), else the
    cell's record in the manifest; None when the run does not say."""
    cell = run.cell(row["cell"])
    src = (
        row.get("ctxsw_source")
        or cell.get("ctxsw_source")
        or (cell.get("collectors") or {}).get("ctxsw_source")
    )
    return str(src) if src else None


def ctxsw_trusted(run: Run, row: dict) -> bool:
    """taskstats and perf count every thread, exited ones too; anything else (procfs) loses
    threads."""
    src = ctxsw_source(run, row)
    return src is None or src in WHOLE_PROCESS_SOURCES or src.startswith("perf")


def op_cost(run: Run, row: dict, kind: str, per: str) -> tuple[float | None, Gap | None]:
    """CPU ("cpu") or context switches ("ctxsw") per operation ("op": µs or switches per op) or
    per million operations ("1m": CPU seconds or switches per 1M ops), and why it is missing.

    A run with measured windows: the recorded rate over the window, never recomputed (its
    operation count is the window's, not the level's). An older run: the recorded per-op column,
    and per 1M ops the level's totals divided by its events (the computation of that time)."""
    if kind == "ctxsw" and not ctxsw_trusted(run, row):
        return None, PROCFS_GAP
    if run.has_windows:
        v = row.get(RATE_COLUMNS[(kind, per)])
        if v is None and row.get("window_s") is None:
            return None, NO_WINDOW_GAP
        return v, None
    if per == "op":
        return row.get(RATE_COLUMNS[(kind, per)]), None
    totals = [row.get(c) for c in TOTAL_COLUMNS[kind]]
    if any(v is None for v in totals) or not row.get("events"):
        return None, None
    return sum(totals) / row["events"] * 1e6, None


def gap_cell(gaps: list[Gap]) -> Cell:
    """An empty cell flagged with the reason(s) its figure is missing."""
    gaps = list(dict.fromkeys(gaps))
    return Cell(
        None,
        "–",
        note=", ".join(g.short for g in gaps),
        title="; ".join(g.long for g in gaps),
        warn=True,
    )


def gap_notes(gaps) -> list[str]:
    return [f"⚠ {g.short}: {g.long}." for g in dict.fromkeys(gaps)]


def window_note(run: Run, workload: str) -> str:
    """Which stretch of each level the CPU and context-switch figures cover."""
    if not run.has_windows:
        return (
            "Window: this run predates measured windows. CPU and context switches cover each whole"
            " level, the clients' connecting and disconnecting included, while the operation count"
            " covers only the load: per-operation figures are somewhat high and not comparable"
            " with newer runs."
        )
    levels = [r for r in run.ok_rows if r["workload"] == workload]
    rows = [r for r in levels if r.get("window_s")]
    text = (
        "Window: CPU and context switches are counted over each level's measured window, from"
        " the workload's first interval report (every client connected) to its last report"
        " inside the load, and divided by the operations served in that window; the clients"
        " connecting and disconnecting fall outside."
    )
    durations = [r["duration_s"] for r in rows if r.get("duration_s")]
    if rows and durations:
        text += (
            f" Here the windows lasted {fmt(median([r['window_s'] for r in rows]))} s"
            f" (median) of levels lasting {fmt(median(durations))} s"
            + (
                f", over the {len(rows)} of {len(levels)} levels that had one."
                if len(rows) < len(levels)
                else "."
            )
        )
    return text


def _ci_title(ci: MedianCI) -> str:
    if ci.n == 1:
        return "one repeat: no interval"
    return (
        f"median of {ci.n} repeats; 95% confidence interval {fmt(ci.lo)}–{fmt(ci.hi)}"
        f" ({ci.method}); spread of the repeats {ci.spread_pct:.1f}%"
    )


def ci_text(ci: MedianCI) -> str:
    """The interval as shown beside a value: "[lo–hi]" when repeated, "" for one value."""
    return "" if ci.n < 2 else f"[{fmt(ci.lo)}–{fmt(ci.hi)}]"


CI_NOTE = (
    "Values are medians over {n} repeats (separate server lives); [lo–hi] with each value is its 95%"
    " confidence interval (Student t on the log of the repeats — the method 'mallocsweep compare'"
    " uses). With few repeats the interval is wide: that is the honest uncertainty, not an error."
)

CHURN_NOTE = (
    "Thread churn: each server life ran a thread level up to {n} times (once per churn cycle and"
    " thread cache size); those levels share one life, so they count as one repeat: the life's"
    " value is their median. The churn table shows them cycle by cycle."
)


SCENARIO_NOTE = (
    "Scenario cycles: each server life ran this level up to {n} times (once per cycle of the"
    " scenario); those levels share one life, so they count as one repeat: the life's value is"
    " their median. The per-cycle plot shows them cycle by cycle."
)


def pivot_table(
    run: Run,
    workload: str,
    metric: str,
    *,
    key: str,
    title: str,
    explain: str,
    ratio: bool = True,
    cost: Callable[[dict], tuple[float | None, Gap | None]] | None = None,
) -> Table:
    """Series x threads of `metric`; with `ratio`, each value also relative to glibc.

    `cost(row)` -> (value, why missing) replaces the plain column: a point whose every repeat is
    missing for a stated reason is shown empty and flagged with it."""
    value = (lambda r: cost(r)[0]) if cost else None
    pts = points(run, workload, metric, value)
    gaps: dict[tuple[Series, int], list[Gap]] = defaultdict(list)
    if cost:
        for r in run.ok_rows:
            gap = cost(r)[1] if r["workload"] == workload else None
            if gap is not None:
                gaps[(Series(r["server"], r["allocator"], r["thp"]), r["threads"])].append(gap)
    threads = run.threads(workload)
    table = Table(key, title, explain, label_columns(run) + [f"{t} thr" for t in threads])
    unstable, shown_gaps = [], []
    for s in series_of(run):
        if not any((s, t) in pts or (s, t) in gaps for t in threads):
            continue
        row = label_cells(run, s)
        for t in threads:
            ci = pts.get((s, t))
            if ci is None:
                row.append(gap_cell(gaps[(s, t)]) if gaps.get((s, t)) else num(None))
                shown_gaps += gaps.get((s, t), [])
                continue
            note = ""
            base = pts.get((Series(s.server, BASELINE_ALLOCATOR, s.thp), t))
            if ratio and base is not None and base.median and s.allocator != BASELINE_ALLOCATOR:
                note = f"{ratio_text(ci.median / base.median)} glibc"
            row.append(num(ci.median, note, _ci_title(ci), ci.unstable, ci_text(ci)))
            if ci.unstable:
                unstable.append(f"{series_label(run, s)} at {t} threads ({ci.spread_pct:.0f}%)")
        table.rows.append(row)
    if unstable:
        table.notes.append(
            "⚠ unstable (repeats spread > 10% of the median): " + "; ".join(unstable)
        )
    table.notes += gap_notes(shown_gaps)
    if run.repeats > 1:
        table.notes.append(CI_NOTE.format(n=run.repeats))
    rows = [r for r in run.ok_rows if r["workload"] == workload]
    cycles = cycles_per_life(rows)
    if cycles > 1:
        # a fragmentation scenario's cycles (a soak's: hundreds) repeat a level in one life too
        scenario = any(r.get("scenario_cycle") not in (None, "") for r in rows)
        table.notes.append((SCENARIO_NOTE if scenario else CHURN_NOTE).format(n=cycles))
    return table


def throughput_table(run: Run, workload: str, metric: str | None = None) -> Table:
    metric = metric or metric_of(run, workload)
    unit = metric_label(workload, metric)
    return pivot_table(
        run,
        workload,
        metric,
        key=f"throughput-{workload}",
        title=f"{workload}: throughput ({unit}) by allocator and client threads",
        explain=(
            f"Each value is the {unit} the server sustained at that many concurrent client threads"
            " (higher is better). The small figure is the ratio to glibc malloc (no preload) at the"
            " same thread count: 1.10× means 10% more throughput than glibc."
        ),
    )


def latency_table(run: Run, workload: str, pct: str = "p99") -> Table:
    metric = f"lat_{pct}_ms"
    what = words(workload).timed
    return pivot_table(
        run,
        workload,
        metric,
        key=f"latency-{pct}-{workload}",
        title=f"{workload}: {pct} latency (ms) by allocator and client threads",
        explain=(
            f"{pct} latency: {pct[1:]}% of {what} finished within this many milliseconds (lower is"
            " better). The ratio to glibc below 1.00× means faster responses than glibc."
        ),
    )


def efficiency_tables(run: Run, workload: str) -> list[Table]:
    """Callaghan's normalised figures: what one operation costs the server in CPU and switches."""
    op, ops = words(workload).op, words(workload).ops
    span = "measured window of the level" if run.has_windows else "level"
    tabs = [
        pivot_table(
            run,
            workload,
            "cpu_us_per_op",
            key=f"cpu-{workload}",
            title=f"{workload}: server CPU microseconds per {op}",
            explain=(
                f"User + system CPU time of the whole server process during the {span}, divided by"
                f" the {ops} it served (lower is better). It normalises away throughput differences:"
                " an allocator that burns CPU in locks or page faults shows up here first."
            ),
            cost=lambda r: op_cost(run, r, "cpu", "op"),
        ),
        pivot_table(
            run,
            workload,
            "ctxsw_per_op",
            key=f"ctxsw-{workload}",
            title=f"{workload}: server context switches per {op}",
            explain=(
                f"Voluntary + involuntary context switches of every server thread during the {span},"
                f" per {op} (lower is better). Many voluntary switches per operation usually mean"
                " threads sleeping on a contended mutex — classic allocator lock contention."
            ),
            cost=lambda r: op_cost(run, r, "ctxsw", "op"),
        ),
    ]
    # Said once, between the two tables it concerns.
    tabs[0].notes.insert(0, window_note(run, workload))
    tabs[1].notes.insert(0, "Window: the same measured window as the CPU table above.")
    return tabs


# -- shared by the memory tables ----------------------------------------------------------------
def med_or_none(values) -> float | None:
    vals = [v for v in values if v is not None]
    return median(vals) if vals else None


def kb_to_mb(kb: float | None) -> float | None:
    return None if kb is None else kb / 1024.0


def growth(end: float | None, start: float | None) -> float | None:
    return None if end is None or start is None else end - start


def iibench_table(run: Run) -> Table:
    """Callaghan's iibench table: cost per 1M inserted rows, duration and memory."""
    span = (
        "during the level's measured window, per million rows inserted in it"
        if run.has_windows
        else "during the whole level, divided by the rows inserted, per million rows"
    )
    table = Table(
        "iibench",
        "iibench: cost per 1M inserted rows, duration and memory",
        "Insert benchmark (iibench) with the suite's concurrent clients. Context switches and CPU"
        f" seconds of the whole server process are counted {span} (lower is better); duration is"
        " how long the load ran; rows/s is the insert rate and batches/s the multi-row INSERTs"
        " (transactions) per second; VSZ and RSS are the server's address space and resident"
        " memory when the load ended (Callaghan's table). Medians over repeats.",
        label_columns(run)
        + [
            "clients",
            "rows",
            "duration (s)",
            "rows/s",
            "batches/s",
            "ctxsw per 1M rows",
            "CPU s per 1M rows",
            "VSZ end (MB)",
            "RSS end (MB)",
            "peak RSS (MB)",
        ],
    )
    by_series: dict[Series, list[dict]] = defaultdict(list)
    for r in run.ok_rows:
        if words(r["workload"]).insert_table:
            by_series[Series(r["server"], r["allocator"], r["thp"])].append(r)
    shown_gaps: list[Gap] = []

    def rate(r):
        if r.get("qps") is not None:  # rows inserted per second, as the workload measured it
            return r["qps"]
        if r.get("events") and r.get("duration_s"):
            return r["events"] / r["duration_s"]
        return None

    def per_million(rows, kind) -> Cell:
        got = [op_cost(run, r, kind, "1m") for r in rows]
        value = med_or_none(v for v, _ in got)
        gaps = [g for _, g in got if g is not None]
        if value is None and gaps:
            shown_gaps.extend(gaps)
            return gap_cell(gaps)
        return num(value)

    for s in series_of(run):
        rows = by_series.get(s)
        if not rows:
            continue
        table.rows.append(
            label_cells(run, s)
            + [
                text(", ".join(str(t) for t in sorted({r["threads"] for r in rows}))),
                num(med_or_none(r.get("events") for r in rows)),
                num(med_or_none(r.get("duration_s") for r in rows)),
                num(med_or_none(rate(r) for r in rows)),
                num(med_or_none(r.get("tps") for r in rows)),
                per_million(rows, "ctxsw"),
                per_million(rows, "cpu"),
                num(kb_to_mb(med_or_none(r.get("vsz_end_kb") for r in rows))),
                num(kb_to_mb(med_or_none(r.get("rss_end_kb") for r in rows))),
                num(kb_to_mb(med_or_none(r.get("rss_peak_kb") for r in rows))),
            ]
        )
    table.notes.append(window_note(run, "iibench"))
    table.notes += gap_notes(shown_gaps)
    return table
