"""The tables of the published allocator studies, computed from a run's results.

- throughput by allocator x threads, each value also as a ratio to glibc (Percona 2012/2013);
- latency percentiles by allocator x threads;
- memory: RSS/VSZ at start and end of the measured levels and their growth (Percona), peak RSS and
  AnonHugePages;
- context switches and CPU microseconds per operation (Callaghan), and for iibench per 1M rows;
- hugepage impact: THP modes side by side per allocator, with the THP state each server really had.

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
    cov = f"{ci.coverage * 100:.1f}%"
    return (
        f"median of {ci.n} repeats; {cov} CI {fmt(ci.lo)}–{fmt(ci.hi)}; spread {ci.spread_pct:.1f}%"
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
            row.append(num(ci.median, note, _ci_title(ci), ci.unstable))
            if ci.unstable:
                unstable.append(f"{series_label(run, s)} at {t} threads ({ci.spread_pct:.0f}%)")
        table.rows.append(row)
    if unstable:
        table.notes.append(
            "⚠ unstable (repeats spread > 10% of the median): " + "; ".join(unstable)
        )
    if run.repeats > 1:
        table.notes.append(
            "Values are medians over repeats; hover a value for its confidence interval."
        )
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
    op = "inserted row" if workload == "iibench" else "query"
    return [
        pivot_table(
            run,
            workload,
            "cpu_us_per_op",
            key=f"cpu-{workload}",
            title=f"{workload}: server CPU microseconds per {op}",
            explain=(
                f"User + system CPU time of the whole server process during the level, divided by"
                f" the {op}s it served (lower is better). It normalises away throughput differences:"
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


# -- memory --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CellMemory:
    rss_start_kb: float | None
    rss_end_kb: float | None
    vsz_start_kb: float | None
    vsz_end_kb: float | None
    rss_peak_kb: float | None
    anon_huge_kb: float | None


def cell_memory(rows: list[dict]) -> CellMemory:
    """Memory over a cell's measured levels: start of the first, end of the last, peak of all."""

    def first(col):
        return next((r[col] for r in rows if r.get(col) is not None), None)

    def last(col):
        return next((r[col] for r in reversed(rows) if r.get(col) is not None), None)

    def most(col):
        vals = [r[col] for r in rows if r.get(col) is not None]
        return max(vals) if vals else None

    return CellMemory(
        first("rss_start_kb"),
        last("rss_end_kb"),
        first("vsz_start_kb"),
        last("vsz_end_kb"),
        most("rss_peak_kb"),
        most("anon_huge_kb"),
    )


def memory_by_series(run: Run) -> dict[Series, list[CellMemory]]:
    """One CellMemory per repeat (cell) of each series."""
    by_cell: dict[str, list[dict]] = defaultdict(list)
    for r in run.rows:
        by_cell[r["cell"]].append(r)
    out: dict[Series, list[CellMemory]] = defaultdict(list)
    for rows in by_cell.values():
        s = Series(rows[0]["server"], rows[0]["allocator"], rows[0]["thp"])
        out[s].append(cell_memory(rows))
    return out


def _med(values) -> float | None:
    vals = [v for v in values if v is not None]
    return median(vals) if vals else None


def _mb(kb: float | None) -> float | None:
    return None if kb is None else kb / 1024.0


def _growth(end: float | None, start: float | None) -> float | None:
    return None if end is None or start is None else end - start


def memory_table(run: Run) -> Table:
    table = Table(
        "memory",
        "Server memory (MB) by allocator: start, end and growth over the measured levels",
        "RSS is the server's resident memory, VSZ its mapped address space, both from"
        " /proc/PID/status. Start = when the first measured level began (after warmup), end = when"
        " the last one ended; growth = end − start (Percona's table: an allocator that fragments or"
        " caches per thread grows more as client threads rise). Peak RSS is the high-water mark;"
        " AnonHugePages is the largest amount of anonymous memory backed by transparent huge pages"
        " seen at a level boundary. Medians over repeats.",
        label_columns(run)
        + [
            "RSS start",
            "RSS end",
            "RSS growth",
            "VSZ start",
            "VSZ end",
            "VSZ growth",
            "peak RSS",
            "AnonHugePages",
        ],
    )
    mem = memory_by_series(run)
    for s in series_of(run):
        cells = mem.get(s, [])
        if not cells:
            continue
        rs, re_ = _med(c.rss_start_kb for c in cells), _med(c.rss_end_kb for c in cells)
        vs, ve = _med(c.vsz_start_kb for c in cells), _med(c.vsz_end_kb for c in cells)
        rg = _med(_growth(c.rss_end_kb, c.rss_start_kb) for c in cells)
        vg = _med(_growth(c.vsz_end_kb, c.vsz_start_kb) for c in cells)
        table.rows.append(
            label_cells(run, s)
            + [num(_mb(v)) for v in (rs, re_, rg, vs, ve, vg)]
            + [
                num(_mb(_med(c.rss_peak_kb for c in cells))),
                num(_mb(_med(c.anon_huge_kb for c in cells))),
            ]
        )
    return table


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
                num(_med(r.get("events") for r in rows)),
                num(_med(r.get("duration_s") for r in rows)),
                num(_med(rate(r) for r in rows)),
                num(_med(per_million(r, ("ctxsw_voluntary", "ctxsw_involuntary")) for r in rows)),
                num(_med(per_million(r, ("cpu_user_s", "cpu_sys_s")) for r in rows)),
                num(_mb(_med(r.get("vsz_end_kb") for r in rows))),
                num(_mb(_med(r.get("rss_end_kb") for r in rows))),
                num(_mb(_med(r.get("rss_peak_kb") for r in rows))),
            ]
        )
    return table


# -- hugepages -----------------------------------------------------------------------------------
def process_thp_states(run: Run, s: Series) -> list:
    """THP_enabled read back from each server process of the series (1, 0 or None = unknown)."""
    states = []
    for cell_id in sorted(
        {r["cell"] for r in run.rows if Series(r["server"], r["allocator"], r["thp"]) == s}
    ):
        state = (run.cell(cell_id).get("thp") or {}).get("process_thp_enabled")
        if state is None:
            state = next(
                (
                    r["process_thp_enabled"]
                    for r in run.rows
                    if r["cell"] == cell_id and r.get("process_thp_enabled") is not None
                ),
                None,
            )
        states.append(None if state is None else int(state))
    return states


def thp_in_force(run: Run, s: Series) -> str:
    for r in run.rows:
        if Series(r["server"], r["allocator"], r["thp"]) == s:
            force = (run.cell(r["cell"]).get("thp") or {}).get("in_force") or {}
            if force:
                return f"enabled={force.get('enabled', '?')}, defrag={force.get('defrag', '?')}"
    return "unknown"


def hugepage_table(run: Run, workload: str) -> Table | None:
    """THP modes side by side per allocator; None unless the run has more than one mode."""
    modes = run.thp_modes
    if len(modes) < 2:
        return None
    ref = "never" if "never" in modes else modes[0]
    metric = metric_of(run, workload)
    pts = points(run, workload, metric)
    p99 = points(run, workload, "lat_p99_ms")
    threads = run.threads(workload)
    top = threads[-1] if threads else None
    mem = memory_by_series(run)
    table = Table(
        f"hugepages-{workload}",
        f"{workload}: hugepage impact — THP modes side by side",
        f"Each row is one allocator under one transparent-hugepage mode. The per-thread columns give"
        f" throughput as a ratio to the same allocator with THP `{ref}` (above 1.00× = THP helped)."
        " p99 is at the highest thread count. AnonHugePages is how much of the server's anonymous"
        " memory huge pages backed; 'process THP' is the THP_enabled flag read back from the"
        " server's own /proc/PID/status (0 = the server had THP disabled for itself).",
        label_columns(run)
        + ["THP in force", "process THP"]
        + [f"{t} thr" for t in threads]
        + [f"p99 ms @{top}", "RSS growth (MB)", "AnonHugePages (MB)"],
    )
    for s in series_of(run):
        if s.thp not in modes:
            continue
        if not any((s, t) in pts for t in threads):
            continue
        states = process_thp_states(run, s)
        state = ", ".join("?" if x is None else str(x) for x in sorted(set(states), key=str))
        row = label_cells(run, s) + [text(thp_in_force(run, s)), text(state or "?")]
        for t in threads:
            ci, base = pts.get((s, t)), pts.get((Series(s.server, s.allocator, ref), t))
            r = ci.median / base.median if ci and base and base.median else None
            row.append(Cell(r, ratio_text(r), title=f"{fmt(ci.median) if ci else '–'} {metric}"))
        lat = p99.get((s, top))
        cells = mem.get(s, [])
        row += [
            num(lat.median if lat else None),
            num(_mb(_med(_growth(c.rss_end_kb, c.rss_start_kb) for c in cells))),
            num(_mb(_med(c.anon_huge_kb for c in cells))),
        ]
        table.rows.append(row)
    return table


def thp_self_disabled(run: Run) -> list[str]:
    """Cells where THP was requested (or left to the system) but the server disabled it for itself."""
    out = []
    for cid, cell in run.cells.items():
        thp = cell.get("thp") or {}
        if thp.get("requested") != "never" and thp.get("process_thp_enabled") == 0:
            out.append(cid)
    return out


# -- cells: proof, failures, reconciliation ------------------------------------------------------
def _mapped_text(v) -> str:
    if isinstance(v, list):
        return ", ".join(str(x) for x in v) if v else "not mapped"
    if isinstance(v, bool):
        return "yes" if v else "no"
    return "" if v is None else str(v)


def proof_table(run: Run) -> Table:
    table = Table(
        "proof",
        "Allocator proof per cell",
        "A cell is one server life under one allocator. Before measuring, mallocsweep checks that the"
        " allocator really serves malloc: its library is mapped into the server process"
        " (/proc/PID/maps) and the server binary does not define malloc itself. The server's own"
        " report (MariaDB @@version_malloc_library) is a cross-check only: it says 'system' for"
        " mimalloc and TBB even when they are loaded. 'agreement' tells whether the evidence agrees.",
        [
            "cell",
            "status",
            "server",
            "allocator",
            "library",
            "mapped",
            "server reports",
            "agreement",
        ],
    )
    for cid, c in run.cells.items():
        server = c.get("server") or {}
        alloc = c.get("allocator") or {}
        ver = c.get("verification") or {}
        srv = " ".join(str(x) for x in (server.get("flavor"), server.get("version")) if x)
        if server.get("standin"):
            srv += f" ({STANDIN_LABEL})"
        name = str(alloc.get("name") or "")
        if alloc.get("version"):
            name += f" {alloc['version']}"
        table.rows.append(
            [
                text(cid),
                text(c.get("status")),
                text(srv or server.get("label")),
                text(name),
                text(alloc.get("library") or ("built in / no preload" if name else "")),
                text(_mapped_text(ver.get("mapped"))),
                text(ver.get("server_reported")),
                text(ver.get("agreement")),
            ]
        )
    return table


def failures(run: Run) -> list[dict]:
    """Cells that did not finish and levels that failed, with their reasons."""
    out = []
    for cid, c in run.cells.items():
        if c.get("status") != "ok":
            out.append(
                {
                    "cell": cid,
                    "what": f"cell {c.get('status') or 'unknown'}",
                    "error": c.get("error") or "(no reason recorded)",
                }
            )
    for r in run.rows:
        if (r.get("status") or "ok") != "ok":
            out.append(
                {
                    "cell": r["cell"],
                    "what": f"level {r['workload']}@{r['threads']}",
                    "error": r.get("error") or "(no reason recorded)",
                }
            )
    return out


def reconciliation_table(run: Run) -> Table:
    table = Table(
        "reconciliation",
        "Collectors: do the per-level figures add up?",
        "Context switches per level come from counters that follow every server thread. At exit,"
        " the kernel's exact whole-life totals (wait4 rusage) are compared with the sum of what the"
        " collectors saw: 'passed' means they agree within tolerance, so per-level figures can be"
        " trusted. The sampler's own CPU cost is shown so you can judge the measurement overhead.",
        ["cell", "check", "difference", "context-switch source", "sampler CPU (s)"],
    )
    for cid, c in run.cells.items():
        coll = c.get("collectors") or {}
        rec = coll.get("reconciliation") or {}
        diff = rec.get("diff_pct")
        table.rows.append(
            [
                text(cid),
                text(
                    rec.get("check")
                    or ("error: " + coll["error"] if coll.get("error") else "not recorded")
                ),
                Cell(diff, "–" if diff is None else f"{diff:.2f}%"),
                text(coll.get("ctxsw_source")),
                num(coll.get("sampler_cpu_s")),
            ]
        )
    return table


def reconciliation_failed(run: Run) -> list[str]:
    return [
        cid
        for cid, c in run.cells.items()
        if ((c.get("collectors") or {}).get("reconciliation") or {}).get("check") == "failed"
    ]


# -- metadata ------------------------------------------------------------------------------------
def metadata(run: Run) -> list[tuple[str, str]]:
    h = run.host
    thp = h.get("thp") or {}
    info = run.suite.get("suite") if isinstance(run.suite.get("suite"), dict) else run.suite
    ds = run.dataset
    rows = [
        ("run", run.run_id),
        ("status", run.status),
        (
            "started / finished",
            f"{run.manifest.get('started_at') or '?'} / {run.manifest.get('finished_at') or 'not finished'}",
        ),
        (
            "suite",
            f"{info.get('name', '?')} ({run.kind}) — {info.get('description', '')}".rstrip(" —"),
        ),
        (
            "suite file",
            f"{run.manifest.get('suite_file', '?')} (sha256 {str(run.manifest.get('suite_sha256', ''))[:12]})",
        ),
        ("dataset", ", ".join(f"{k}={v}" for k, v in ds.items()) or "–"),
        (
            "host",
            f"{h.get('hostname', '?')}: {h.get('cpu_model', '?')}, {h.get('cores', '?')} cores, "
            f"{fmt(h['memory_kb'] / 1048576 if h.get('memory_kb') else None)} GB",
        ),
        (
            "kernel / glibc / python",
            f"{h.get('kernel', '?')} / {h.get('glibc', '?')} / {h.get('python', '?')}",
        ),
        ("THP (system)", f"enabled={thp.get('enabled', '?')}, defrag={thp.get('defrag', '?')}"),
        ("CPU governor", str(h.get("governor") or "unknown")),
        ("repeats", str(run.repeats)),
        (
            "tool",
            f"{(run.manifest.get('tool') or {}).get('name', 'mallocsweep')} "
            f"{(run.manifest.get('tool') or {}).get('version', '?')}",
        ),
    ]
    return rows


def servers_table(run: Run) -> Table:
    table = Table(
        "servers",
        "Servers",
        "Each server binary the run started, as it identified itself.",
        ["server", "flavor", "version", "binary", "note"],
    )
    seen = set()
    for c in run.cells.values():
        s = c.get("server") or {}
        key = (s.get("flavor"), s.get("version"), s.get("binary"))
        if not s.get("flavor") or key in seen:
            continue
        seen.add(key)
        table.rows.append(
            [
                text(s.get("label") or f"{s.get('flavor')}-{s.get('version')}"),
                text(s.get("flavor")),
                text(s.get("version")),
                text(s.get("binary")),
                text(STANDIN_LABEL if s.get("standin") else ""),
            ]
        )
    return table


def allocators_table(run: Run) -> Table:
    table = Table(
        "allocators",
        "Allocators",
        "Each allocator as loaded: the library preloaded by absolute path (none for glibc"
        " or a server's built-in allocator), its package version, and any environment or"
        " GLIBC_TUNABLES the variant sets.",
        ["allocator", "version", "library", "package", "environment / tunables"],
    )
    seen = set()
    for c in run.cells.values():
        a = c.get("allocator") or {}
        if not a.get("name") or a["name"] in seen or "library" not in a and "kind" not in a:
            continue
        seen.add(a["name"])
        env = [f"{k}={v}" for k, v in (a.get("env") or {}).items()] + list(a.get("tunables") or [])
        table.rows.append(
            [
                text(a["name"]),
                text(a.get("version")),
                text(a.get("library") or "(no preload)"),
                text(a.get("package")),
                text(" ".join(env)),
            ]
        )
    return table
