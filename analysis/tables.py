"""The tables of the published allocator studies, computed from a run's results.

- throughput by allocator x threads, each value also as a ratio to glibc (Percona 2012/2013);
- latency percentiles by allocator x threads;
- context switches and CPU microseconds per operation (Callaghan), and for iibench per 1M rows.

Memory and hugepage tables are in analysis/memory.py; per-cell tables (proof, failures) in
analysis/cells.py.

Every figure is the median over repeats of one point; points come only from levels that completed.
A series is one (server, allocator, THP mode); its label shows the THP mode and the server only when
the run has several.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from analysis.rundir import BASELINE_ALLOCATOR, Run
from analysis.stats import MedianCI, median, median_ci
from analysis.table import Cell, Table, fmt, num, ratio_text, text

METRIC_LABELS = {
    "qps": "queries/s",
    "tps": "transactions/s",
    "lat_p95_ms": "p95 latency (ms)",
    "lat_p99_ms": "p99 latency (ms)",
    "lat_avg_ms": "average latency (ms)",
    "ctxsw_per_op": "context switches per operation",
    "cpu_us_per_op": "CPU microseconds per operation",
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


def metric_of(run: Run, workload: str) -> str:
    """Throughput metric of a workload: queries/s, or transactions (rows) per s when no queries."""
    if any(r["qps"] for r in run.ok_rows if r["workload"] == workload):
        return "qps"
    return "tps"


def points(run: Run, workload: str, metric: str) -> dict[tuple[Series, int], MedianCI]:
    """Median and confidence interval of `metric` per (series, threads), over repeats."""
    values: dict[tuple[Series, int], list[float]] = defaultdict(list)
    for r in run.ok_rows:
        if r["workload"] == workload and r.get(metric) is not None:
            values[(Series(r["server"], r["allocator"], r["thp"]), r["threads"])].append(r[metric])
    return {k: median_ci(v) for k, v in values.items()}


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


def pivot_table(
    run: Run, workload: str, metric: str, *, key: str, title: str, explain: str, ratio: bool = True
) -> Table:
    """Series x threads of `metric`; with `ratio`, each value also relative to glibc."""
    pts = points(run, workload, metric)
    threads = run.threads(workload)
    table = Table(key, title, explain, label_columns(run) + [f"{t} thr" for t in threads])
    unstable = []
    for s in series_of(run):
        if not any((s, t) in pts for t in threads):
            continue
        row = label_cells(run, s)
        for t in threads:
            ci = pts.get((s, t))
            if ci is None:
                row.append(num(None))
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
    if run.repeats > 1:
        table.notes.append(CI_NOTE.format(n=run.repeats))
    return table


def throughput_table(run: Run, workload: str, metric: str | None = None) -> Table:
    metric = metric or metric_of(run, workload)
    unit = METRIC_LABELS.get(metric, metric)
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
    return pivot_table(
        run,
        workload,
        metric,
        key=f"latency-{pct}-{workload}",
        title=f"{workload}: {pct} latency (ms) by allocator and client threads",
        explain=(
            f"{pct} latency: {pct[1:]}% of requests finished within this many milliseconds (lower is"
            " better). The ratio to glibc below 1.00× means faster responses than glibc."
        ),
    )


def efficiency_tables(run: Run, workload: str) -> list[Table]:
    """Callaghan's normalised figures: what one operation costs the server in CPU and switches."""
    op, ops = ("inserted row", "rows") if workload == "iibench" else ("query", "queries")
    return [
        pivot_table(
            run,
            workload,
            "cpu_us_per_op",
            key=f"cpu-{workload}",
            title=f"{workload}: server CPU microseconds per {op}",
            explain=(
                f"User + system CPU time of the whole server process during the level, divided by"
                f" the {ops} it served (lower is better). It normalises away throughput differences:"
                " an allocator that burns CPU in locks or page faults shows up here first."
            ),
        ),
        pivot_table(
            run,
            workload,
            "ctxsw_per_op",
            key=f"ctxsw-{workload}",
            title=f"{workload}: server context switches per {op}",
            explain=(
                "Voluntary + involuntary context switches of every server thread during the level,"
                f" per {op} (lower is better). Many voluntary switches per operation usually mean"
                " threads sleeping on a contended mutex — classic allocator lock contention."
            ),
        ),
    ]


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
    table = Table(
        "iibench",
        "iibench: cost per 1M inserted rows, duration and memory",
        "Insert benchmark (iibench) with the suite's concurrent clients. Context switches and CPU"
        " seconds of the whole server process are divided by the rows inserted, per million rows"
        " (lower is better); duration is how long the load ran; VSZ and RSS are the server's"
        " address space and resident memory when it ended (Callaghan's table). Medians over repeats.",
        label_columns(run)
        + [
            "clients",
            "rows",
            "duration (s)",
            "rows/s",
            "ctxsw per 1M rows",
            "CPU s per 1M rows",
            "VSZ end (MB)",
            "RSS end (MB)",
            "peak RSS (MB)",
        ],
    )
    by_series: dict[Series, list[dict]] = defaultdict(list)
    for r in run.ok_rows:
        if r["workload"] == "iibench":
            by_series[Series(r["server"], r["allocator"], r["thp"])].append(r)
    for s in series_of(run):
        rows = by_series.get(s)
        if not rows:
            continue

        def per_million(r, cols):
            vals = [r.get(c) for c in cols]
            if any(v is None for v in vals) or not r.get("events"):
                return None
            return sum(vals) / r["events"] * 1e6

        def rate(r):
            if r.get("events") and r.get("duration_s"):
                return r["events"] / r["duration_s"]
            return r.get("tps")

        table.rows.append(
            label_cells(run, s)
            + [
                text(", ".join(str(t) for t in sorted({r["threads"] for r in rows}))),
                num(med_or_none(r.get("events") for r in rows)),
                num(med_or_none(r.get("duration_s") for r in rows)),
                num(med_or_none(rate(r) for r in rows)),
                num(
                    med_or_none(
                        per_million(r, ("ctxsw_voluntary", "ctxsw_involuntary")) for r in rows
                    )
                ),
                num(med_or_none(per_million(r, ("cpu_user_s", "cpu_sys_s")) for r in rows)),
                num(kb_to_mb(med_or_none(r.get("vsz_end_kb") for r in rows))),
                num(kb_to_mb(med_or_none(r.get("rss_end_kb") for r in rows))),
                num(kb_to_mb(med_or_none(r.get("rss_peak_kb") for r in rows))),
            ]
        )
    return table
