"""A cell's results rows and measured-window records, derived from its raw record alone.

The one derivation of per-level figures: the runner calls `derive_cell` at the end of each cell on
the raw record it has just written (raw/<cell>.json), and `mallocsweep report --rederive` calls it
again on any run directory, so a fix here reaches runs already on disk. Pure: no I/O, no clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rundir.derive.alloc import level_columns as alloc_level_columns
from rundir.derive.blocks import blocks_columns
from rundir.derive.exposure import level_columns as exposure_columns
from rundir.derive.phases import FIGURE_KEYS, mark_times, phase_figures, window_figures
from rundir.derive.scenario import cycle_end_s, scenario_columns
from rundir.derive.steady import mser_truncation, steady_columns
from rundir.derive.window import (
    Interval,
    Window,
    connected_in_window,
    load_rates,
    measured_window,
    window_rates,
)
from rundir.format import CELL_IDENTITY_COLUMNS, CPU_CTXSW_COLUMNS, RESULTS_COLUMNS
from rundir.records import RawLevel
from rundir.schema import RAW_REPORT

# The row's identity, from the raw record's `identity` (the cell's plan and resolved server);
# engine is absent in raw records written before engines existed: read as empty.
IDENTITY_FIELDS = (*CELL_IDENTITY_COLUMNS, "repeat")


@dataclass
class DerivedCell:
    """One results.csv row and one window record per recorded level, in level order."""

    rows: list[dict] = field(default_factory=list)
    windows: list[dict] = field(default_factory=list)


def _sum_or_none(a, b):
    return None if a is None or b is None else round(a + b, 3)


def level_row(
    identity: dict,
    level: dict,
    fig: dict,
    win: dict | None,
    window: Window | None,
    ctxsw_source: str | None,
) -> dict:
    """One results.csv row. Which window each figure covers:

    - the workload's own figures (duration, events, tps, qps, latencies, errors): its report;
    - memory (rss_*, vsz_*, anon_huge_kb), server status deltas (threads_created, bp_*), THP
      counters: the whole level phase (boundary to boundary, clients' start and end included);
    - threads_connected: read from the first window mark on (all clients connected), kept only
      when the server answered before the window closed;
    - cpu_user_s, cpu_sys_s, ctxsw_voluntary, ctxsw_involuntary, and every per-op figure
      (cpu_us_per_op, ctxsw_per_op, cpu_s_per_1m_ops, ctxsw_per_1m_ops, cpu_overhead): the
      measured window only (window_s, window_ops), so that numerator and operation count cover
      the same time. Full-phase CPU and context switches stay in the manifest (collectors.phases),
      where their sum over the phases is reconciled with wait4.
    """
    row = {k: identity.get(k) for k in IDENTITY_FIELDS}
    row["allocator_version"] = row["allocator_version"] or ""
    row["engine"] = row["engine"] or ""
    row["status"] = level["status"]
    row["error"] = level.get("error") or ""
    # The workload's own figures (rundir.schema.RAW_REPORT: the report's declared figures)
    report = level["report"]
    row.update({k: report.get(k) for k in RAW_REPORT.columns()})
    # What the level's typed records add (a client host's load, read-while-writing's figures, a
    # churn level's cycle): each record says which results columns it holds.
    for k, v in RawLevel.model_validate(level).result_columns().items():
        if k in RESULTS_COLUMNS:
            row[k] = v
    for k in FIGURE_KEYS:  # the phase figures that are results columns
        if k in RESULTS_COLUMNS:
            row[k] = fig.get(k)
    row["ctxsw_source"] = ctxsw_source or ""
    row["threads_connected"] = connected_in_window(fig, window)
    for k in CPU_CTXSW_COLUMNS:
        row[k] = win.get(k) if win else None
    row.update(window_rates(win, window, ctxsw_source))
    return row


def window_record(
    intervals: list[Interval], marks: int, fig: dict, win, window: Window | None, row: dict
) -> dict:
    """What the cell record says about a level's measured window (and why there is none).

    `reports` pairs each interval report's time in the workload's clock with the time our mark
    was taken (seconds since the collectors started; None: no mark): their difference moving from
    report to report shows how late a mark came after its report (see window.measured_window).
    """
    reports = [
        [round(iv.t_s, 3), None if iv.mark_t is None else round(iv.mark_t, 3)] for iv in intervals
    ]
    if window is None or win is None:
        return {
            "measured": False,
            "reason": (
                f"{len(intervals)} interval report(s): no two marks inside the load "
                "(too short a level, or marks too late)"
            ),
            "reports": reports,
        }
    return {
        "measured": True,
        "workload_first_t_s": round(window.first_t_s, 3),
        "workload_last_t_s": round(window.last_t_s, 3),
        "marks": marks,
        "workload_s": round(window.workload_s, 3),
        "workload_ops": round(window.ops, 1),
        "window_s": row["window_s"],
        "window_ops": row["window_ops"],
        "phase_wall_s": fig.get("wall_s"),
        "phase_cpu_s": _sum_or_none(fig.get("cpu_user_s"), fig.get("cpu_sys_s")),
        "window_cpu_s": _sum_or_none(win.get("cpu_user_s"), win.get("cpu_sys_s")),
        "reports": reports,
    }


def in_use_split(heap_kb, in_use_kb) -> tuple[int | None, int | None]:
    """The allocator's in use split into (resident, never touched), kB. In use counts memory the
    server malloc'ed and never wrote (jemalloc on MySQL 9.7: 256 MB in use against a heap of
    229 MB resident); the kernel backs no page of it, so in use can exceed the heap's resident
    part. Resident in use is at most the heap's resident part; the rest of in use was never
    touched. Both are bounds, not a page-by-page account: pages of in use that were never
    touched while the allocator also holds resident free pages are counted as resident in use
    (smaps cannot tell whose page is whose). Empty where either figure is unknown."""
    if heap_kb is None or in_use_kb is None:
        return None, None
    resident = min(max(in_use_kb, 0), max(heap_kb, 0))
    return round(resident), round(in_use_kb - resident)


def held_resident(heap_kb, in_use_kb):
    """What the allocator holds resident and the server does not: the heap's resident part
    minus what of the allocator's in use is resident (in_use_split; read right before the level's
    end boundary). Never negative. Empty where either is unknown."""
    resident, _ = in_use_split(heap_kb, in_use_kb)
    if resident is None:
        return None
    return round(heap_kb - resident)


def derive_level(raw: dict, level: dict, previous: str | None = None) -> tuple[dict, dict]:
    """One level's row and window record from the cell's raw record (rundir.records.CellRaw);
    `previous` is the phase of the level before it (None: the first)."""
    clock = raw.get("clock") or {}
    source = raw.get("ctxsw_source")
    ph = (raw.get("phases") or {}).get(level["phase"])
    # A phase that never closed (the cell failed inside it) has no figures.
    fig = (
        phase_figures(ph, raw.get("counters"))
        if ph is not None and ph.get("end") is not None
        else {}
    )
    times = mark_times(ph) if fig else []
    intervals = [Interval(float(t), float(r), m) for t, r, m in level.get("intervals") or ()]
    # the planned length (rundir.records.RawClock; records before it say duration_s)
    planned = clock.get("planned_s", clock.get("duration_s"))
    load = (planned, clock.get("interval_s"), bool(clock.get("last_ends_load")))
    stop = ((level.get("sysbench") or {}).get("settled_stop_s")) if load[0] is not None else None
    if stop is not None:
        # Ended early once its ramp was over (suites/workloads/sysbench/settle.py): full load ran
        # up to the report at which it was told to stop, as if that were its planned end.
        load = (stop + (load[1] or 0.0) / 2, *load[1:])
    # The ramp: reports the steady-state rule leaves out before the window opens. Only a level
    # of planned length is judged (sysbench's): one that ends when its work is done (an insert
    # load, a fragmentation scenario's cycle) has no steady rate to wait for.
    timed = load[0] is not None and not load[2]
    steady = mser_truncation(load_rates(intervals, *load)) if timed else None
    window = measured_window(intervals, times, *load, start_report=steady.drop if steady else 0)
    win = None
    if window is not None and fig:
        win = window_figures(ph, window.first_mark, window.last_mark, source)
    row = level_row(raw["identity"], level, fig, win, window, source)
    row.update(alloc_level_columns(raw.get("alloc_readings"), level["phase"]))
    row["alloc_held_resident_kb"] = held_resident(
        row.get("heap_resident_kb"), row.get("alloc_in_use_kb")
    )
    row["alloc_in_use_resident_kb"], row["alloc_untouched_kb"] = in_use_split(
        row.get("heap_resident_kb"), row.get("alloc_in_use_kb")
    )
    row.update(scenario_columns(level))
    row.update(steady_columns(steady, [iv.t_s for iv in intervals]))
    # The steady rate only where the rule judged the level (else the window is the old one and
    # the level's qps stands; a re-derived older run keeps its figures unchanged)
    judged = steady is not None and window is not None and window.workload_s > 0
    row["steady_qps"] = round(window.ops_per_s, 1) if judged else None
    row.update(exposure_columns(raw.get("alloc_readings"), level["phase"], previous, row))
    row["scenario_end_s"] = cycle_end_s(raw, level)
    record = window_record(intervals, len(times), fig, win, window, row)
    blocks = level.get("blocks")
    if blocks is not None:
        # The alternate design: the level is its blocks (rundir.derive.blocks). Its phase spans
        # the other arms' blocks too, when this server idled: no per-op window; its steady rate
        # and its CPU per query are the blocks' (context switches per op are a solo run's).
        row.update(blocks_columns(blocks))
        record = {
            "measured": False,
            "reason": f"alternate design: {len(blocks)} block(s) with idle time between them; "
            "CPU per query from the blocks, other per-op figures are a solo run's",
            "blocks": len(blocks),
        }
    return row, record


def derive_cell(raw: dict) -> DerivedCell:
    """Every level's row and window record, from a raw record of the current raw_version
    (rundir.records.check_raw upgrades an older one). Raises on a record it cannot derive from;
    the caller records the error against this cell only."""
    out = DerivedCell()
    previous = None
    for level in raw.get("levels") or ():
        row, win = derive_level(raw, level, previous)
        previous = level["phase"]
        out.rows.append(row)
        out.windows.append(win)
    return out
