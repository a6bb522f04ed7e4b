"""Memory tables: RSS/VSZ at server start and stop (older runs: at the start and end of the measured
levels) and their growth (Percona's table), peak RSS and AnonHugePages, and the hugepage-impact table (THP modes side by side per
allocator, with the THP state each server process really had).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from analysis.study_tables import (
    Series,
    growth,
    kb_to_mb,
    label_cells,
    label_columns,
    med_or_none,
    metric_of,
    points,
    series_of,
)
from analysis.table_model import Cell, Table, count, fmt, num, ratio_text, text
from rundir.read import Run

# -- memory --------------------------------------------------------------------------------------
# Where a cell's start/end memory comes from:
SERVER = (
    "server"  # the manifest's cells[].memory: server_start (it answers), server_stop (last live)
)
LEVELS = "levels"  # results.csv: start of the first measured level, end of the last (older runs)


@dataclass(frozen=True)
class CellMemory:
    basis: str  # SERVER or LEVELS
    rss_start_kb: float | None
    rss_end_kb: float | None
    vsz_start_kb: float | None
    vsz_end_kb: float | None
    rss_peak_kb: float | None
    anon_huge_kb: float | None
    # the allocator's own figures at the end of the load (cells[].alloc_memory; None before them)
    alloc_in_use_kb: float | None = None
    alloc_cached_kb: float | None = None

    @property
    def rss_growth_kb(self) -> float | None:
        return growth(self.rss_end_kb, self.rss_start_kb)

    @property
    def vsz_growth_kb(self) -> float | None:
        return growth(self.vsz_end_kb, self.vsz_start_kb)


def server_marks(run: Run, cell_id: str) -> tuple[dict, dict] | None:
    """The cell's memory at server start and stop (manifest cells[].memory), when both carry RSS
    and VSZ; None for runs recorded before them (or a cell that never reached its start)."""
    mem = run.cell(cell_id).get("memory") or {}
    start, stop = mem.get("server_start"), mem.get("server_stop")
    ok = all(isinstance(m, dict) and m.get("rss_kb") is not None for m in (start, stop))
    if not ok or start.get("vsz_kb") is None or stop.get("vsz_kb") is None:
        return None
    return start, stop


def cell_memory(run: Run, cell_id: str, rows: list[dict], basis: str | None = None) -> CellMemory:
    """Memory of one cell. With `basis` SERVER (or None, when the run recorded it): from server
    start to the last reading before shutdown, peak = VmHWM then (the high-water mark over the
    whole life). With LEVELS: start of the first measured level, end of the last, peak of all.
    AnonHugePages: the largest value seen at any of those readings."""

    def first(col):
        return next((r[col] for r in rows if r.get(col) is not None), None)

    def last(col):
        return next((r[col] for r in reversed(rows) if r.get(col) is not None), None)

    def most(values):
        vals = [v for v in values if v is not None]
        return max(vals) if vals else None

    level_peak = most(r.get("rss_peak_kb") for r in rows)
    level_huge = [r.get("anon_huge_kb") for r in rows]
    load = end_of_load(alloc_readings(run, cell_id))
    alloc = (load.get("alloc_in_use_kb"), load.get("alloc_cached_kb")) if load else (None, None)
    marks = server_marks(run, cell_id) if basis != LEVELS else None
    if marks is not None:
        start, stop = marks
        return CellMemory(
            SERVER,
            start["rss_kb"],
            stop["rss_kb"],
            start["vsz_kb"],
            stop["vsz_kb"],
            stop.get("hwm_kb") if stop.get("hwm_kb") is not None else level_peak,
            most(level_huge + [start.get("anon_huge_kb"), stop.get("anon_huge_kb")]),
            *alloc,
        )
    return CellMemory(
        LEVELS,
        first("rss_start_kb"),
        last("rss_end_kb"),
        first("vsz_start_kb"),
        last("vsz_end_kb"),
        level_peak,
        most(level_huge),
        *alloc,
    )


def complete_cells(run: Run) -> dict[str, list[dict]]:
    """Rows of each cell that finished ok with every level ok, in run order.

    Memory is a whole-cell figure: a cell that failed or skipped a level covers a different
    stretch of the server's life, so it is left out rather than mixed in."""
    by_cell: dict[str, list[dict]] = defaultdict(list)
    for r in run.rows:
        by_cell[r["cell"]].append(r)
    return {
        cid: rows
        for cid, rows in by_cell.items()
        if run.cell(cid).get("status", "ok") == "ok"
        and all((r.get("status") or "ok") == "ok" for r in rows)
    }


def memory_basis(run: Run) -> str:
    """SERVER when every complete cell recorded its server start/stop memory, else LEVELS: one
    basis for the whole run, so rows of a table (and two runs compared) mean the same thing."""
    cells = complete_cells(run)
    if cells and all(server_marks(run, cid) is not None for cid in cells):
        return SERVER
    return LEVELS


def memory_by_series(run: Run, basis: str | None = None) -> dict[Series, list[CellMemory]]:
    """One CellMemory per complete repeat (cell) of each series, all on one basis (the run's own,
    memory_basis(), unless given); see complete_cells()."""
    basis = basis or memory_basis(run)
    out: dict[Series, list[CellMemory]] = defaultdict(list)
    for cid, rows in complete_cells(run).items():
        s = Series(rows[0]["server"], rows[0]["allocator"], rows[0]["thp"])
        out[s].append(cell_memory(run, cid, rows, basis))
    return out


BASIS_TEXT = {
    SERVER: (
        "Start = when the server first answered (before warmup), end = the last reading before it"
        " was asked to shut down; growth = end − start, over the server's whole measured life"
        " (warmup and every level). Peak RSS is the kernel's high-water mark (VmHWM) at the end."
    ),
    LEVELS: (
        "This run predates the server start/stop readings: start = when the first measured level"
        " began (after warmup), end = when the last one ended; growth = end − start. Peak RSS is"
        " the highest seen at a level."
    ),
}


def memory_table(run: Run) -> Table:
    basis = memory_basis(run)
    where = "from server start to shutdown" if basis == SERVER else "over the measured levels"
    table = Table(
        "memory",
        f"Server memory (MB) by allocator: start, end and growth {where}",
        "RSS is the server's resident memory, VSZ its mapped address space, both from"
        f" /proc/PID/status. {BASIS_TEXT[basis]} Percona's table: an allocator that fragments or"
        " caches per thread grows more as client threads rise. AnonHugePages is the largest amount"
        " of anonymous memory backed by transparent huge pages seen at a phase boundary. Medians"
        " over the repeats whose cell and levels all completed (a failed cell covers a different"
        " stretch of the server's life and is left out).",
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
    mem = memory_by_series(run, basis)
    for s in series_of(run):
        cells = mem.get(s, [])
        if not cells:
            continue
        rs, re_ = (
            med_or_none(c.rss_start_kb for c in cells),
            med_or_none(c.rss_end_kb for c in cells),
        )
        vs, ve = (
            med_or_none(c.vsz_start_kb for c in cells),
            med_or_none(c.vsz_end_kb for c in cells),
        )
        rg = med_or_none(c.rss_growth_kb for c in cells)
        vg = med_or_none(c.vsz_growth_kb for c in cells)
        table.rows.append(
            label_cells(run, s)
            + [num(kb_to_mb(v)) for v in (rs, re_, rg, vs, ve, vg)]
            + [
                num(kb_to_mb(med_or_none(c.rss_peak_kb for c in cells))),
                num(kb_to_mb(med_or_none(c.anon_huge_kb for c in cells))),
            ]
        )
    return table


# -- hugepages -----------------------------------------------------------------------------------
# Counters of /proc/vmstat kept per level (system-wide deltas), shown first when present; any other
# thp_* key a run recorded is shown after them.
THP_COUNTER_ORDER = ("thp_fault_alloc", "thp_fault_fallback", "thp_collapse_alloc", "thp_split")
NOT_COUNTERS = frozenset({"process_thp_enabled"})
APPLIED_BY = {
    "none": "left as is",
    "sysfs": "sysfs (system-wide)",
    "prctl": "prctl (this server only)",
}
ALIASES = {"thp_split": "thp_split_page"}  # results.csv's short name -> the vmstat name


def cell_process_thp(run: Run, cell_id: str) -> int | None:
    """THP_enabled read back from the cell's server process (1, 0, or None = unknown)."""
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
    return None if state is None else int(state)


def expected_process_thp(run: Run, cell_id: str) -> int:
    """What the THP mode implies for the process flag: 0 only when we set PR_SET_THP_DISABLE.

    /proc/PID/status THP_enabled reflects the process's own opt-out (the prctl), not the system
    mode: under system `never` it still reads 1."""
    return 0 if (run.cell(cell_id).get("thp") or {}).get("method") == "prctl" else 1


def process_thp_states(run: Run, s: Series) -> list:
    """THP_enabled of each server process of the series (1, 0 or None = unknown)."""
    cells = sorted(
        {r["cell"] for r in run.rows if Series(r["server"], r["allocator"], r["thp"]) == s}
    )
    return [cell_process_thp(run, c) for c in cells]


def in_force_text(thp: dict) -> str:
    """The THP setting a cell ran under, as recorded (prctl `never` says so)."""
    force = thp.get("in_force") or {}
    if thp.get("method") == "prctl":
        system = thp.get("system") or {}
        sys_text = f"; system enabled={system['enabled']}" if system.get("enabled") else ""
        return f"never (prctl, per server{sys_text})"
    if not force:
        return "unknown"
    return f"enabled={force.get('enabled', '?')}, defrag={force.get('defrag', '?')}"


def thp_in_force(run: Run, s: Series) -> str:
    texts = []
    for r in run.rows:
        if Series(r["server"], r["allocator"], r["thp"]) == s:
            texts.append(in_force_text(run.cell(r["cell"]).get("thp") or {}))
    known = [t for t in dict.fromkeys(texts) if t != "unknown"]
    return "; ".join(known) or "unknown"


def thp_counters(run: Run, cell_id: str) -> dict[str, float]:
    """System-wide /proc/vmstat thp_* deltas summed over the cell's completed measured levels.

    Read from results.csv columns and from the manifest's per-phase collector figures (any thp_*
    key, also inside a nested dict such as a vmstat section), whichever a run recorded."""
    phases = ((run.cell(cell_id).get("collectors") or {}).get("phases")) or {}
    totals: dict[str, float] = defaultdict(float)
    for r in run.rows:
        if r["cell"] != cell_id or (r.get("status") or "ok") != "ok":
            continue
        found: dict[str, float] = {}
        fig = phases.get(f"{r['workload']}@{r['threads']}") or {}
        for src in [fig] + [v for v in fig.values() if isinstance(v, dict)]:
            for k, v in src.items():
                if k.startswith("thp_") and k not in NOT_COUNTERS and _is_number(v):
                    found[k] = float(v)
        for k, v in r.items():
            if k.startswith("thp_") and k not in NOT_COUNTERS and v is not None:
                found[k] = float(v)
        for k, v in found.items():
            totals[k] += v
    return dict(totals)


def _is_number(v) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _counter_columns(per_cell: dict[str, dict[str, float]]) -> list[str]:
    """The usual counters first, then any other that moved in some cell (a run may record two
    dozen thp_* counters, most of them always 0)."""
    keys = {k for c in per_cell.values() for k in c}
    keys -= {alias for alias, name in ALIASES.items() if name in keys}
    first = [k for k in THP_COUNTER_ORDER if k in keys]
    moved = {k for c in per_cell.values() for k, v in c.items() if v}
    return first + sorted((keys & moved) - set(first))


def what_reached(run: Run, cell_id: str) -> str:
    """In a few words: which of the server's memory could get huge pages."""
    thp = run.cell(cell_id).get("thp") or {}
    state = cell_process_thp(run, cell_id)
    if thp.get("method") == "prctl":
        return "all of it (our prctl did not take)" if state == 1 else "none (our prctl)"
    mode = (thp.get("in_force") or {}).get("enabled")
    if state is None:
        return "unknown (flag not read back)"
    if mode == "never":
        return "none (system never)"
    if state == 0:
        return "buffer pool only (server opted out)"
    return {
        "always": "all anonymous memory",
        "madvise": "advised regions only",
    }.get(str(mode), f"system mode {mode}")


def thp_cells_table(run: Run) -> Table:
    """Per cell: THP asked for, how it was applied, what the server process really had, and the
    system's THP counters over the measured levels."""
    ids = [cid for cid, c in run.cells.items() if c.get("thp")]
    counters = {cid: thp_counters(run, cid) for cid in ids}
    cols = _counter_columns(counters)
    shown = [c.removeprefix("thp_") for c in cols]  # headers narrow enough to read
    table = Table(
        "thp-cells",
        "THP per cell: what was asked, what the server process had",
        "One row per cell (server life). 'in force' is the system setting read back after it was"
        " applied (or the per-server prctl for 'never' without write access). 'process THP' is the"
        " THP_enabled flag read back from the server's own /proc/PID/status: 1 = THP allowed for"
        " the process, 0 = THP disabled for it (by our prctl, or by the server itself — Debian's"
        " MariaDB does that at start-up); ⚠ marks a flag that differs from what the mode implies"
        " (1, unless we set the prctl). 'huge pages could reach' follows from both: under"
        " 'always' all anonymous memory, under 'madvise' only regions the program advised, and"
        " when the server opted out only what it had mapped before (its buffer pool)."
        " AnonHugePages is the largest amount of the server's"
        " anonymous memory backed by huge pages at a level boundary. The columns after it are"
        " /proc/vmstat thp_* counters (shown without the thp_ prefix) summed over the cell's"
        " measured levels (counters that stayed 0"
        " everywhere are left out): system-wide — any process on the machine counts — so read"
        " them as a whole-cell figure, not the server's alone. fault_alloc: huge pages given at"
        " a page fault; fault_fallback: a huge page was wanted and a small one used;"
        " collapse_alloc: small pages merged into a huge one by khugepaged; split_*: huge pages"
        " broken up again.",
        ["cell", "THP asked", "applied by", "in force", "process THP", "huge pages could reach",
         "AnonHugePages (MB)"] + shown,
    )  # fmt: skip
    for cid in ids:
        thp = run.cell(cid).get("thp") or {}
        rows = [r for r in run.rows if r["cell"] == cid]
        huge = [r["anon_huge_kb"] for r in rows if r.get("anon_huge_kb") is not None]
        state = cell_process_thp(run, cid)
        # Under system `never` the flag changes nothing: no ⚠ for a server that opted out of it.
        mismatch = (
            state is not None
            and state != expected_process_thp(run, cid)
            and (thp.get("in_force") or {}).get("enabled") != "never"
        )
        table.rows.append(
            [
                text(cid),
                text(thp.get("requested")),
                text(APPLIED_BY.get(thp.get("method") or "", thp.get("method") or "?")),
                text(in_force_text(thp)),
                Cell(state, "?" if state is None else str(state), warn=mismatch),
                text(what_reached(run, cid)),
                num(kb_to_mb(max(huge)) if huge else None),
            ]
            + [count(counters[cid].get(k)) for k in cols]
        )
    return table


def thp_state_mismatches(run: Run) -> list[str]:
    """Cells whose server process THP flag differs from what the THP mode implies."""
    out = []
    for cid in run.cells:
        state = cell_process_thp(run, cid)
        if state is not None and state != expected_process_thp(run, cid):
            out.append(cid)
    return out


def thp_self_disabled(run: Run) -> list[str]:
    """Cells where the THP mode in force offered huge pages (always/madvise) but the server
    disabled THP for itself (under system `never` there was nothing to refuse)."""
    return [
        c
        for c in thp_state_mismatches(run)
        if cell_process_thp(run, c) == 0
        and ((run.cell(c).get("thp") or {}).get("in_force") or {}).get("enabled") != "never"
    ]


def thp_kept(run: Run) -> list[str]:
    """Cells where the THP mode in force offered huge pages and the server kept THP for itself
    (THP_enabled 1): the mode reached its heap, not only its buffer pool. MySQL does not opt out
    (measured on 9.7: THP_enabled 1), unlike Debian's MariaDB."""
    return [
        cid
        for cid in run.cells
        if cell_process_thp(run, cid) == 1
        and ((run.cell(cid).get("thp") or {}).get("in_force") or {}).get("enabled")
        in ("always", "madvise")
    ]


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
    basis = memory_basis(run)
    mem = memory_by_series(run, basis)
    span = (
        "from server start to the last reading before shutdown"
        if basis == SERVER
        else "from the start of the first measured level to the end of the last"
    )
    table = Table(
        f"hugepages-{workload}",
        f"{workload}: hugepage impact — THP modes side by side",
        f"Each row is one allocator under one transparent-hugepage mode. The per-thread columns give"
        f" throughput as a ratio to the same allocator with THP '{ref}' (above 1.00× = THP helped;"
        " the figures themselves are in the throughput table). p99 is at the highest thread"
        " count. The last two columns are"
        f" whole-cell figures, not per thread level: RSS growth {span} (as in the memory"
        " table), and the largest AnonHugePages (server memory backed by huge pages) seen at a"
        " phase boundary, medians over complete cells. 'process"
        " THP' is the THP_enabled flag read back from the server's own /proc/PID/status (0 = the"
        " server ran with THP disabled for itself).",
        label_columns(run)
        + ["THP in force", "process THP"]
        + [f"{t} thr" for t in threads]
        + [f"p99 ms @{top}", "RSS growth, whole cell (MB)", "AnonHugePages, cell max (MB)"],
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
            num(kb_to_mb(med_or_none(c.rss_growth_kb for c in cells))),
            num(kb_to_mb(med_or_none(c.anon_huge_kb for c in cells))),
        ]
        table.rows.append(row)
    return table


# -- the allocator's own accounting (cells[].alloc_memory, issue 16) ------------------------------
ALLOC_API_NOTE = {
    None: "no statistics (TBB malloc exposes none)",
    "mimalloc mi_process_info": "no totals (mimalloc's release build keeps no in-use counts)",
}


def alloc_readings(run: Run, cell_id: str) -> list[dict]:
    """The cell's allocator readings in time order (empty for runs recorded before them)."""
    am = run.cell(cell_id).get("alloc_memory") or {}
    return [r for r in am.get("readings") or [] if isinstance(r, dict)]


def end_of_load(readings: list[dict]) -> dict | None:
    """The reading after the last level (the load's end), None if no level was read."""
    ends = [r for r in readings if r.get("at") == "level end"]
    return ends[-1] if ends else None


def after_idle(readings: list[dict]) -> dict | None:
    idle = [r for r in readings if r.get("phase") == "idle"]
    return idle[-1] if idle else None


@dataclass(frozen=True)
class AllocEnd:
    """One cell's allocator figures at the end of the load and after the idle phase (kB)."""

    api: str | None
    in_use_kb: float | None
    cached_kb: float | None
    rss_kb: float | None
    idle_in_use_kb: float | None
    idle_cached_kb: float | None
    idle_rss_kb: float | None
    idle_s: float | None


def alloc_end(run: Run, cell_id: str) -> AllocEnd | None:
    readings = alloc_readings(run, cell_id)
    load = end_of_load(readings)
    if load is None:
        return None
    idle = after_idle(readings)
    am = run.cell(cell_id).get("alloc_memory") or {}
    return AllocEnd(
        am.get("api"),
        load.get("alloc_in_use_kb"),
        load.get("alloc_cached_kb"),
        load.get("rss_kb"),
        idle.get("alloc_in_use_kb") if idle else None,
        idle.get("alloc_cached_kb") if idle else None,
        idle.get("rss_kb") if idle else None,
        round(idle["t_s"] - load["t_s"], 1) if idle else None,
    )


def alloc_by_series(run: Run) -> dict[Series, list[AllocEnd]]:
    out: dict[Series, list[AllocEnd]] = defaultdict(list)
    for cid, rows in complete_cells(run).items():
        e = alloc_end(run, cid)
        if e is not None:
            out[Series(rows[0]["server"], rows[0]["allocator"], rows[0]["thp"])].append(e)
    return out


def _ratio(a, b) -> float | None:
    return None if a is None or not b else a / b


def alloc_table(run: Run) -> Table | None:
    """In use / cached / RSS at the end of the load and after the idle phase, per allocator."""
    by = alloc_by_series(run)
    if not by:
        return None
    table = Table(
        "alloc-memory",
        "Memory as the allocator sees it (MB): end of the load and after the idle phase",
        "Read inside the server by a library preloaded after the allocator, right after the last"
        " level's clients left, and again at the end of the idle phase. In use: what the server"
        " holds through malloc; cached: what the allocator keeps committed but not in use (free"
        " lists, thread caches, dirty pages not yet purged, its metadata); RSS from /proc at the same"
        " moment. Cached can exceed what is resident: the allocator counts pages it obtained that"
        " the server never touched."
        " Overhead = RSS / in use: it includes everything not from malloc (a MariaDB buffer pool"
        " is mmap'ed directly, code, stacks), so compare it between allocators, not with 1."
        " Returned = RSS at the end of the load − RSS after idling. Medians over complete repeats.",
        label_columns(run)
        + [
            "in use",
            "cached",
            "RSS",
            "overhead",
            "in use (idle)",
            "cached (idle)",
            "RSS (idle)",
            "RSS returned",
            "idle s",
        ],
    )
    for s in series_of(run):
        ends = by.get(s, [])
        if not ends:
            continue

        def med(f, ends=ends):
            return med_or_none(f(e) for e in ends)

        rss, idle_rss = med(lambda e: e.rss_kb), med(lambda e: e.idle_rss_kb)
        in_use = med(lambda e: e.in_use_kb)
        returned = med(lambda e: growth(e.rss_kb, e.idle_rss_kb))
        api = ends[0].api
        row = label_cells(run, s) + [
            num(kb_to_mb(in_use)),
            num(kb_to_mb(med(lambda e: e.cached_kb))),
            num(kb_to_mb(rss)),
            num(med(lambda e: _ratio(e.rss_kb, e.in_use_kb))),
            num(kb_to_mb(med(lambda e: e.idle_in_use_kb))),
            num(kb_to_mb(med(lambda e: e.idle_cached_kb))),
            num(kb_to_mb(idle_rss)),
            num(kb_to_mb(returned)),
            num(med(lambda e: e.idle_s)),
        ]
        if in_use is None and api in ALLOC_API_NOTE:
            row[len(label_cells(run, s))] = text(ALLOC_API_NOTE[api])
        table.rows.append(row)
    return table


def churn_rows(run: Run) -> dict[Series, list[dict]]:
    """Rows of churn levels (churn_cycle set), per series, in run order."""
    out: dict[Series, list[dict]] = defaultdict(list)
    for rows in complete_cells(run).values():
        for r in rows:
            if r.get("churn_cycle") is not None:
                out[Series(r["server"], r["allocator"], r["thp"])].append(r)
    return out


def churn_table(run: Run) -> Table | None:
    """RSS at the end of each churn cycle's levels, and the growth per cycle (first repeat)."""
    by = churn_rows(run)
    if not by:
        return None
    cycles = sorted({int(r["churn_cycle"]) for rows in by.values() for r in rows})
    table = Table(
        "churn",
        "Thread churn: RSS (MB) at the end of each cycle's top level, and growth per cycle",
        "The client count cycles up and down (e.g. 8 → 1536 → 8); with a small thread_cache_size"
        " the server's threads exit when clients leave and start again in the next cycle. RSS is"
        " read when each level ends; growth per cycle = the slope of RSS at the top level over the"
        " cycles (least squares, MB per cycle). glibc's per-thread arenas are the known case of"
        " growth: arenas are reused, never freed. First repeat of each allocator.",
        label_columns(run)
        + ["thread cache"]
        + [f"cycle {c}" for c in cycles if c <= max(cycles) - 1]
        + ["growth / cycle", "RSS after"],
    )
    for s in series_of(run):
        rows = by.get(s, [])
        if not rows:
            continue
        first_cell = rows[0]["cell"]
        rows = [r for r in rows if r["cell"] == first_cell]
        for tc in dict.fromkeys(r.get("thread_cache_size") for r in rows):
            block = [r for r in rows if r.get("thread_cache_size") == tc]
            top = max(int(r["threads"]) for r in block)
            at_top = {
                int(r["churn_cycle"]): r.get("rss_end_kb")
                for r in block
                if int(r["threads"]) == top
            }
            xs = [c for c in sorted(at_top) if at_top[c] is not None]
            slope = _slope(xs, [at_top[c] for c in xs])
            closing = [r for r in block if int(r["churn_cycle"]) == max(cycles)]
            table.rows.append(
                label_cells(run, s)
                + [count(tc)]
                + [num(kb_to_mb(at_top.get(c))) for c in cycles if c <= max(cycles) - 1]
                + [
                    num(kb_to_mb(slope)),
                    num(kb_to_mb(closing[-1].get("rss_end_kb") if closing else None)),
                ]
            )
    return table


def _slope(xs: list[float], ys: list[float]) -> float | None:
    if len(xs) < 2:
        return None
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den if den else None
