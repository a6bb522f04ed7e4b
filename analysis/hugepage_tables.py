"""Hugepage tables: per cell, the THP mode asked for, how it was applied and what the server
process really had (with the system's thp_* counters), and per workload the THP modes side by side
for each allocator (the hugepage-impact table).
"""

from __future__ import annotations

from collections import defaultdict

from analysis.memory import SERVER, memory_basis, memory_by_series
from analysis.point_tables import (
    Series,
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
