"""The run-directory contract: file names, format version and column sets.

Writers (suites/) and readers (analysis/) both import this module, so the format is declared once.
A change to any column set bumps FORMAT_VERSION and comes with a migration in analysis/rundir.py;
a finished run directory is never rewritten.
"""

FORMAT_VERSION = 1

MANIFEST = "manifest.json"
RESULTS = "results.csv"
SAMPLES_DIR = "samples"
LOGS_DIR = "logs"
CELLS_DIR = (
    "cells"  # one immutable JSON per finished cell, written atomically; results.csv is derived
)
OWNER_MARKER = (
    ".mallocsweep-owned"  # proves a directory was created by mallocsweep (never delete without it)
)

# One row per (cell, workload, threads, repeat). Per-level figures are deltas over that level.
RESULTS_COLUMNS = [
    # identity
    "cell",
    "server",
    "server_flavor",
    "server_version",
    "allocator",
    "allocator_version",
    "thp",
    "workload",
    "threads",
    "repeat",
    "status",
    "error",
    # throughput and latency (from the workload's own report)
    "duration_s",
    "events",
    "tps",
    "qps",
    "lat_avg_ms",
    "lat_p50_ms",
    "lat_p95_ms",
    "lat_p99_ms",
    "lat_p999_ms",
    "lat_max_ms",
    "errors",
    "reconnects",
    # memory of the server process (kB) over the level
    "rss_start_kb",
    "rss_end_kb",
    "rss_peak_kb",
    "vsz_start_kb",
    "vsz_end_kb",
    "anon_huge_kb",
    # CPU and context switches of the whole server process over the level
    "cpu_user_s",
    "cpu_sys_s",
    "ctxsw_voluntary",
    "ctxsw_involuntary",
    "cpu_us_per_op",
    "ctxsw_per_op",
    "cpu_overhead",
    # server internals over the level (SHOW GLOBAL STATUS deltas; empty where not applicable)
    "threads_created",
    "bp_reads",
    "bp_read_requests",
    "server_memory_used_kb",
    # hugepages: system counters over the level and the server's own THP state read back
    "thp_fault_alloc",
    "thp_collapse_alloc",
    "thp_split",
    "process_thp_enabled",
]

# The per-cell timeline, samples/<cell>.csv. Cumulative counters are whole-process totals since start.
SAMPLE_COLUMNS = [
    "t_s",
    "phase",
    "rss_kb",
    "vsz_kb",
    "hwm_kb",
    "rss_anon_kb",
    "anon_huge_kb",
    "threads",
    "cpu_user_s",
    "cpu_sys_s",
    "ctxsw_voluntary",
    "ctxsw_involuntary",
    "workload_tps",
    "workload_qps",
]

CELL_STATUSES = ("ok", "failed", "skipped", "interrupted", "pending")
