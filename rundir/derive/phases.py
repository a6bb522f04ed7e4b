"""A phase's figures and a measured window's deltas, from the raw phase record alone.

A raw phase (rundir.records.RawPhase, as a dict) is what the collectors observed between two
boundaries: the boundary snapshots (process counters, /proc/vmstat's thp_* counters, the server's
status), the first snapshot of the server itself, what the sampler saw over the phase (peak RSS,
last AnonHugePages, the process THP state), the status read once mid-level, and every window mark.
Times are seconds since the collectors started. No I/O here: the collectors call these while the
server runs (for the manifest's phase figures and the wait4 reconciliation), and the cell's rows
and `report --rederive` call them on the recorded raw/<cell>.json, so all three agree.
"""

from __future__ import annotations

from rundir.format import (
    CPU_CTXSW_COLUMNS,
    HUGEPAGE_COLUMNS,
    HUGEPAGE_GAUGES,
    LEVEL_MEMORY_COLUMNS,
    MEMORY_PART_COLUMNS,
    STATUS_COLUMNS,
    THP_COUNTER_COLUMNS,
)

# /proc/vmstat counters that become per-phase columns (system-wide: one server at a time). Every
# thp_* counter's delta is kept as well, in the phase's "thp_vmstat".
THP_COUNTERS = {
    "thp_fault_alloc": "thp_fault_alloc",
    "thp_fault_fallback": "thp_fault_fallback",  # a huge page was wanted and not obtained
    "thp_collapse_alloc": "thp_collapse_alloc",
    "thp_split": "thp_split_page",
}
# Server status counters that become per-phase columns (deltas), by their meaning
# (rundir.format.COUNTER_MEANINGS): the cell's record says which of the server's counters has
# each meaning (CellRaw.counters, as its family declared them). A server without one leaves its
# column empty.
STATUS_DELTAS = {
    "threads_created": "threads_created",
    "bp_reads": "pages_read_from_disk",
    "bp_read_requests": "page_read_requests",
}

# A phase's figures: results columns (rundir.format's groups) and what only the manifest keeps.
FIGURE_KEYS = (
    *LEVEL_MEMORY_COLUMNS,
    *CPU_CTXSW_COLUMNS,
    "wall_s",
    *STATUS_COLUMNS,
    "threads_connected_t_s",
    *THP_COUNTER_COLUMNS,
    *HUGEPAGE_COLUMNS,
    "thp_vmstat",
    "process_thp_enabled",
    "status_delta",
    "window_marks",
    *(c for c in MEMORY_PART_COLUMNS if c not in HUGEPAGE_COLUMNS),
)

# What window_figures() returns: deltas between two marks of one phase.
WINDOW_KEYS = ("window_s", *CPU_CTXSW_COLUMNS, "ctxsw_source")


def vmstat_delta(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    return {k: b[k] - a[k] for k in sorted(b) if k in a}


def _delta(a, b, digits: int | None = None):
    if a is None or b is None:
        return None
    d = b - a
    return round(d, digits) if digits is not None else d


def int_if_whole(x: float):
    return int(x) if float(x).is_integer() else x


def phase_figures(ph: dict, counters: dict[str, str] | None = None) -> dict:
    """Deltas over a closed phase: from its start boundary to its end boundary (FIGURE_KEYS).
    `counters`: the server's status counter for each meaning (CellRaw.counters); without it the
    status columns stay empty."""
    s, e = ph["start"], ph["end"]
    if e is None:
        raise ValueError(f"phase {ph.get('name')!r} has no end boundary")
    a, b = s["snap"], e["snap"]
    # Memory at the phase start is the server's: a boundary taken in the launch gate gives way to
    # the first snapshot of the server itself (None if none was taken).
    mem = ph.get("first_server") if a.get("pre_exec") else a
    fig = {
        "rss_start_kb": mem.get("rss_kb") if mem else None,
        "rss_end_kb": b.get("rss_kb"),
        "rss_peak_kb": ph.get("peak_rss_kb"),
        "vsz_start_kb": mem.get("vsz_kb") if mem else None,
        "vsz_end_kb": b.get("vsz_kb"),
        "anon_huge_kb": b["anon_huge_kb"]
        if b.get("anon_huge_kb") is not None
        else ph.get("last_anon_huge_kb"),
        "cpu_user_s": _delta(a.get("cpu_user_s"), b.get("cpu_user_s"), 3),
        "cpu_sys_s": _delta(a.get("cpu_sys_s"), b.get("cpu_sys_s"), 3),
        "ctxsw_voluntary": _delta(a.get("ctxsw_voluntary"), b.get("ctxsw_voluntary")),
        "ctxsw_involuntary": _delta(a.get("ctxsw_involuntary"), b.get("ctxsw_involuntary")),
        "wall_s": round(b["t_s"] - a["t_s"], 3),
        "process_thp_enabled": b["thp_enabled"]
        if b.get("thp_enabled") is not None
        else ph.get("last_thp_enabled"),
    }
    sv, ev = s.get("vmstat") or {}, e.get("vmstat") or {}
    for key, counter in THP_COUNTERS.items():
        fig[key] = _delta(sv.get(counter), ev.get(counter))
    fig["thp_vmstat"] = vmstat_delta(sv, ev)
    fig.update(hugepage_figures(s.get("hugepages"), e.get("hugepages"), sv, ev))
    sd = None
    if s.get("status") is not None and e.get("status") is not None:
        sd = {
            k: int_if_whole(round(e["status"][k] - v, 6))
            for k, v in s["status"].items()
            if k in e["status"]
        }
    fig["status_delta"] = sd
    names = counters or {}
    for key, meaning in STATUS_DELTAS.items():
        fig[key] = sd.get(names[meaning]) if sd and meaning in names else None
    used = _named(e.get("status"), names, "memory_used_bytes")
    fig["server_memory_used_kb"] = round(used / 1024) if used is not None else None
    # A gauge: at a boundary no client is connected, so it is read once while the level runs
    # (the clients are connected). Includes our own status connection.
    tc = _named(ph.get("mid_status"), names, "clients_connected")
    fig["threads_connected"] = int_if_whole(tc) if tc is not None else None
    # The server answers a status query when its thread gets a CPU: under 1536 clients that can be
    # seconds later, even after the clients left. The level's row keeps the figure only if the
    # answer came while its measured window was still open (window.connected_in_window).
    t = ph.get("mid_status_t_s")
    fig["threads_connected_t_s"] = round(t, 3) if t is not None else None
    fig["window_marks"] = len(ph.get("marks") or ())
    # Two part columns are the hugepage reading's too (hugetlb_kb, heap_anon_huge_kb): a boundary
    # that has only one of the two readings keeps that one's figure.
    for key, value in part_figures(b.get("parts")).items():
        if value is not None or fig.get(key) is None:
            fig[key] = value
    return {k: fig[k] for k in FIGURE_KEYS}


# /proc/vmstat counters of compaction that become per-phase columns (system-wide deltas).
COMPACT_COUNTERS = ("compact_stall", "compact_fail")


def hugepage_figures(start: dict | None, end: dict | None, sv: dict, ev: dict) -> dict:
    """A phase's HUGEPAGE_COLUMNS: the end boundary's reading (gauges), compaction's vmstat
    deltas and khugepaged's CPU over the phase. Empty where a run recorded none (before
    format 5, or a reading that failed)."""
    end = end or {}
    fig = {k: end.get(k) for k in HUGEPAGE_GAUGES}
    for counter in COMPACT_COUNTERS:
        fig[counter] = _delta(sv.get(counter), ev.get(counter))
    cpu = _delta((start or {}).get("khugepaged_cpu_s"), end.get("khugepaged_cpu_s"), 3)
    # Below zero: khugepaged was restarted during the phase (writing THP's `enabled` stops and
    # starts the kernel thread, and its CPU count starts again), so its CPU over the phase is
    # unknown, not negative. Seen when another run changed THP mid-phase (-0.02 s).
    fig["khugepaged_cpu_s"] = cpu if cpu is None or cpu >= 0 else None
    return fig


def part_figures(parts: dict | None) -> dict:
    """MEMORY_PART_COLUMNS from a boundary's parts (rundir.records.RawParts; None: all empty).
    The same names and sums as the timeline's (collectors.sampler.part_columns)."""
    if not parts:
        return dict.fromkeys(MEMORY_PART_COLUMNS)
    p = {k: parts[k] for k in ("bufpool", "stacks", "file", "heap")}
    huge = sum(x.get("anon_huge_kb", 0) for x in p.values())
    return {
        "heap_resident_kb": p["heap"]["rss_kb"],
        "bufpool_resident_kb": p["bufpool"]["rss_kb"],
        "stacks_kb": p["stacks"]["rss_kb"],
        "file_kb": p["file"]["rss_kb"],
        "swap_kb": sum(x.get("swap_kb", 0) for x in p.values()),
        "hugetlb_kb": sum(x.get("hugetlb_kb", 0) for x in p.values()),
        "heap_anon_huge_kb": huge - p["bufpool"].get("anon_huge_kb", 0),
    }


def _named(status: dict | None, names: dict[str, str], meaning: str):
    """The status value with `meaning`, or None (no status, or no counter of that meaning)."""
    if not status or meaning not in names:
        return None
    return status.get(names[meaning])


def mark_times(ph: dict) -> list[float]:
    """When each window mark of the phase was taken (seconds since the collectors started), in
    order; window_figures() takes indices into this list."""
    return [m["t_s"] for m in ph.get("marks") or ()]


def window_figures(ph: dict, first: int, last: int, ctxsw_source: str | None) -> dict | None:
    """Deltas between marks `first` and `last` of the phase (list indices), or None when the phase
    has fewer than two marks or the process was gone at either.

    The window's wall time is ours (monotonic), so operations counted in the workload's own clock
    are turned into a rate first (window.window_rates).
    """
    marks = ph.get("marks") or []
    if len(marks) < 2:
        return None
    try:
        a, b = marks[first], marks[last]
    except IndexError:
        return None
    if not (a.get("live") and b.get("live")) or b["t_s"] <= a["t_s"]:
        return None
    return {
        "window_s": round(b["t_s"] - a["t_s"], 4),
        "cpu_user_s": _delta(a.get("cpu_user_s"), b.get("cpu_user_s"), 3),
        "cpu_sys_s": _delta(a.get("cpu_sys_s"), b.get("cpu_sys_s"), 3),
        "ctxsw_voluntary": _delta(a.get("ctxsw_voluntary"), b.get("ctxsw_voluntary")),
        "ctxsw_involuntary": _delta(a.get("ctxsw_involuntary"), b.get("ctxsw_involuntary")),
        "ctxsw_source": ctxsw_source,
    }
