"""The run-directory contract: file names, format version, column sets and shared vocabulary.

The column sets are derived from the figures declared once in rundir/schema.py (name, unit, type,
the reader's words, how each derives): this module only orders the records into columns.
Writers (suites/, collectors/, servers/) and readers (analysis/) all import this module, so the
format is declared once. A change to any column set or to what a column means bumps FORMAT_VERSION
and comes with a migration in rundir/migrations.py (and a line in HISTORY); a finished run
directory is never rewritten.
"""

from rundir import schema

FORMAT_VERSION = 6

# What each format added or changed, newest last (docs/architecture.md tells the same story).
HISTORY = {
    1: "first format; cpu_*/ctxsw_* first whole-level figures, later (same version number) "
    "measured-window figures told apart only by the presence of the window_s column",
    2: "manifest records what the cpu_*/ctxsw_* columns cover (figures.cpu_ctxsw_span) and the "
    "tool version from the installed package; every results.csv has every RESULTS_COLUMNS column",
    3: "raw/<cell>.json keeps what was observed (phase boundaries, window marks, status reads, the "
    "workload's reports, wait4 at exit) and results rows are derived from it (rundir.derive); "
    "`report --rederive` writes derived/<cell>.json; figures.raw_records and cells[].derive_error. "
    "Also new in format 3 (absent in older runs, read as empty): results columns engine and the "
    "read-while-writing write_*/read_*/table_rows/reads_min (manifest cells[].engine, datasets, "
    "server.engines, [rww]); the allocator's own accounting alloc_in_use_kb/alloc_cached_kb/"
    "alloc_mapped_kb/alloc_committed_kb/alloc_overhead and churn_cycle/thread_cache_size "
    "(cells[].alloc_memory, raw alloc_readings, the idle phase, [memory]); a client host's "
    "client_* figures (manifest clients, cells[].server.bind_address); shards and merges "
    "(manifest shard, merged); manifest dataset.stale_removed; status failed when every cell failed",
    4: "server families as plugins: raw records (raw_version 2) name the server's status counters "
    "by meaning (CellRaw.counters, declared by the family), keep each level's workload figures in "
    "typed records (RawLevel.sysbench/iibench/rww/churn/client_load instead of an untyped extra) "
    "and call the context-switch counters ctxsw_* as results.csv does; the suite's [server] "
    "section records only its family's settings (format 3 recorded every family's defaults)",
    5: "hugepages as a study: results columns HUGEPAGE_COLUMNS (the server's ShmemPmdMapped and "
    "hugetlb pages, the buffer pool's and the heap's huge pages from smaps, HugePages_Total/Free/"
    "Rsvd, compaction's and khugepaged's cost over the level); raw boundaries keep a `hugepages` "
    "reading and /proc/vmstat's compact_* counters beside thp_*; a cell's thp record says the "
    "hugepage setting it ran under (defrag, max_ptes_none, large pages) and its restore; "
    "who holds the memory: RSS taken apart by mapping at every phase boundary (raw boundary "
    "snapshots' `parts`, collectors/smaps.py) into results and timeline columns "
    "MEMORY_PART_COLUMNS (heap, buffer pool, stacks, file, swap, hugetlb, the heap's huge pages), "
    "alloc_held_resident_kb (heap resident minus the allocator's in use); the fragmentation "
    "scenarios' cycles (SCENARIO_COLUMNS: scenario_cycle, burst_returned, burst_return_s; raw "
    "levels' `scenario` record). update_to_5 gives older runs these columns, empty; "
    "several servers in one run (an upgrade check): the manifest's servers[] records each "
    "server (name, label, flavor, version, binary, root, glibc, allocator builds) and "
    "design.baseline_server the one the others are compared with; cells[].server.name names a "
    "cell's server and its label is NAME:LABEL; manifest allocators[].server names the server "
    "of a build; cells[].server.variables keeps the server's own settings that matter to "
    "throughput and memory",
    6: "decisive comparisons and memory in a reader's unit: results columns FORMAT6_ADDED_COLUMNS "
    "(EXPOSURE_COLUMNS: the allocator's calls and bytes per query and per transaction counted "
    "in the server; STEADY_COLUMNS: the ramp each level's measurement skipped; "
    "GROWTH_PART_COLUMNS: when a scenario's cycle ended, and the allocator's in-use memory split "
    "into resident and never touched); a raw level's blocks (design alternate) may carry cpu_s, "
    "the server's CPU over each block, from which a blocked level's cpu_us_per_op is derived; "
    "update_to_6 gives older runs these columns, empty",
}

MANIFEST = "manifest.json"
RESULTS = "results.csv"
SAMPLES_DIR = "samples"
LOGS_DIR = "logs"
CELLS_DIR = (
    "cells"  # one immutable JSON per finished cell, written atomically; results.csv is derived
)
# What each cell observed (rundir.records.CellRaw), written once before its cells/ record (format 3)
RAW_DIR = "raw"
# The raw record's own schema version (CellRaw.raw_version): 2 since format 4; a version-1 record
# is upgraded in memory when read (rundir.migrations.upgrade_raw).
RAW_VERSION = 2
# Rows and window records re-derived by `report --rederive` from raw/; results.csv prefers them
DERIVED_DIR = "derived"
# A soak's running cells, each as far as it got (checkpoints/<cell>/: a journal of pieces, each
# the cycles since the one before, and a head counting them; every file written atomically): what
# --resume turns into the cell's record when the runner was killed (suites/runner/soak.py).
CHECKPOINTS_DIR = "checkpoints"
# Derived, rewritten by `report`: every allocator against the baseline per point (analysis/verdicts.py)
VERDICTS = "verdicts.csv"
# The verdicts' design as runs record it (manifest "design"): the minimum effect a run that did not
# record one is judged with, and the A/A arm's name (the baseline again, under this suffix). Both
# the suite's settings (suites/config) and the verdicts (analysis/) read them here.
DEFAULT_MIN_EFFECT_PCT = 5.0
AA_SUFFIX = "-aa"
OWNER_MARKER = (
    ".mallocsweep-owned"  # proves a directory was created by mallocsweep (never delete without it)
)
MARKER_TEXT = "created by mallocsweep; safe for mallocsweep to delete\n"  # its content

# A client host's figures per level (suites/remote/hostload.py fills them; see RESULTS_COLUMNS).
CLIENT_COLUMNS = schema.CLIENT_LOAD.columns()

ADDED_RWW_COLUMNS = schema.RWW.columns()
# Columns added to format 2 after its first runs: absent in those, read back as empty.
ADDED_COLUMNS = ("engine", *ADDED_RWW_COLUMNS)

# Column groups of RESULTS_COLUMNS that other modules fill or read as a group: declared once here.
# The row's identity as the cell's plan and its resolved server give it (rundir.derive.levels).
CELL_IDENTITY_COLUMNS = schema.CELL_IDENTITY.columns()
# The server process's memory over a level's phase (a phase figure, rundir.derive.phases).
LEVEL_MEMORY_COLUMNS = schema.LEVEL_MEMORY.columns()
# Whole-process CPU and context switches: phase figures, and a measured window's deltas.
CPU_CTXSW_COLUMNS = schema.CPU_CTXSW.columns()
# Rates over the measured window (rundir.derive.window.window_rates).
WINDOW_RATE_COLUMNS = schema.WINDOW_RATES.columns()
# SHOW GLOBAL STATUS figures of a phase (rundir.derive.phases).
STATUS_COLUMNS = schema.SERVER_STATUS.columns()
# /proc/vmstat thp_* deltas of a phase (rundir.derive.phases.THP_COUNTERS names their sources).
THP_COUNTER_COLUMNS = schema.THP_COUNTERS.columns()
# Huge pages over a level (rundir.derive.phases, from the boundary readings of
# collectors.hugepages): at the level's end, the server's ShmemPmdMapped and hugetlb pages (not in
# RSS), the buffer pool's THP and hugetlb pages and its page size, the heap's THP pages (outside the
# pool), the system's HugePages_Total/Free/Rsvd; over the level, compaction stalls and failures
# (system-wide /proc/vmstat deltas) and khugepaged's CPU seconds. Added in format 5.
HUGEPAGE_GAUGES = schema.HUGEPAGE_GAUGES.columns()  # read at the level's end
HUGEPAGE_DELTAS = schema.HUGEPAGE_DELTAS.columns()  # over the level
HUGEPAGE_COLUMNS = (*HUGEPAGE_GAUGES, *HUGEPAGE_DELTAS)
# The allocator's own accounting at the end of a level (rundir.derive.alloc).
ALLOC_COLUMNS = schema.ALLOC_ACCOUNT.columns()

# Who holds the resident memory at a phase boundary (collectors/smaps.py), kB: the parts of RSS
# by mapping. heap + bufpool + stacks + file = RSS (the kernel's figure, read at the same
# boundary: within 1%); swap and hugetlb pages are not in RSS. heap_anon_huge_kb: anonymous
# transparent huge pages outside the buffer pool's mapping. Results columns (at the level's end
# boundary) and timeline columns (filled on the boundaries' rows only). Added in format 5.
MEMORY_PART_COLUMNS = schema.MEMORY_PARTS.columns()
# The fragmentation scenarios (suites/workloads/fragmentation): each level is one cycle of a
# scenario (its number), and a spike-and-idle cycle's release: the share of the burst's RSS
# returned after the idle time, and the seconds until RSS was within 10% of the pre-burst level.
SCENARIO_COLUMNS = schema.SCENARIO.columns()
# What format 5 added to results.csv, in one tuple (the lead merges format bumps by these).
FORMAT5_RESULT_COLUMNS = (
    *MEMORY_PART_COLUMNS,
    *schema.HELD_RESIDENT.columns(),
    *SCENARIO_COLUMNS,
)
# Everything format 5 added to results.csv: the hugepage study's columns and who holds the
# memory. Two names are in both (hugetlb_kb, heap_anon_huge_kb: the same smaps quantities, from
# the hugepage reading or from the parts, whichever the boundary has): they are one column each.
FORMAT5_ADDED_COLUMNS = schema.added_in(5)

# Format 6 (one bump shared by the work of one wave; each group names what fills it).
# The allocator's exposure per level (rundir/derive/exposure.py): calls into the allocator and the
# bytes asked, counted inside the server by the counting shim preloaded ahead of the allocator
# (servers/shims/alloc_count.c). An allocation call is any of malloc, calloc, realloc, memalign,
# posix_memalign, aligned_alloc, valloc, pvalloc and C++ operator new/new[] (every overload); a
# free call is free or operator delete/delete[]. The counts span the level from the reading before
# it (warmup end or the previous level's end) to its own end reading, so they include the clients'
# connects and disconnects; queries and transactions are the workload's own count over its run
# (qps and tps x duration_s). Connecting adds calls no query makes: the figures err high, never
# low. Empty where the counter was off ([memory] count_calls) or not loaded (format < 6).
EXPOSURE_COLUMNS: tuple[str, ...] = schema.EXPOSURE.columns()
# Steady state: the seconds of a level's start that were a ramp and are left out of its window.
# ramp_s: seconds from the level's first interval report to its measured window's start, where
# the steady-state rule (rundir/derive/steady.py, MSER) put the ramp's end; settled: 1, or 0 when
# the rule found the level still moving (its window is then the later half, flagged); both empty
# where a level has too few reports to judge, or is not of planned length (an insert load, a
# scenario's cycle). steady_qps: the workload's rate over that window, in qps's unit, where the rule
# judged the level (else empty): the throughput the verdicts judge when every row has it.
STEADY_COLUMNS: tuple[str, ...] = schema.STEADY.columns()
# Growth and who holds the memory, format 6: scenario_end_s, when a fragmentation scenario's cycle
# ended (seconds since the server's life began; growth per hour is fitted against it,
# analysis/growth_rate.py); the allocator's in use split into what is resident
# (alloc_in_use_resident_kb, at most the heap's resident part) and what it counts in use but the
# kernel never backed (alloc_untouched_kb: malloc'ed, never written), so that no part of RSS is
# negative (rundir/derive/levels.py in_use_split).
GROWTH_PART_COLUMNS: tuple[str, ...] = schema.GROWTH_PARTS.columns()
FORMAT6_ADDED_COLUMNS = schema.added_in(6)

# One row per (cell, workload, threads, repeat): the figures of rundir.schema.RESULT_RECORDS in
# declaration order (docs/columns.md lists them with their units and meaning). Per-level figures
# are deltas over that level, not since server start. What the groups cover, beyond each
# figure's own meaning:
#   identity (engine: see CELL_IDENTITY_COLUMNS)
#   throughput and latency (from the workload's own report; duration_s is the MEASURED length)
#   memory of the server process (kB) over the level's phase (from the boundary before the
#   client starts to the boundary after it ended)
#   CPU and context switches of the whole server process over the level's MEASURED WINDOW:
#   from the workload's first interval report to its last report the load outlasted, so the
#   clients' start-up (connecting N threads, preparing statements) and teardown are outside,
#   as they are outside the workload's own operation count. window_s is the window's wall time,
#   window_ops the operations served in it (an op is a query for sysbench, a row/document for
#   iibench). Every per-op figure and cpu_overhead ((user+sys)/wall) uses exactly these, e.g.
#   cpu_us_per_op = (cpu_user_s + cpu_sys_s) * 1e6 / window_ops. Full-phase CPU and context
#   switches are in the manifest (cells[].collectors.phases), reconciled with wait4.
#   Format-1 runs recorded before window_s existed hold full-phase figures in these columns
#   (after migration their manifest says figures.cpu_ctxsw_span = "level").
#   ctxsw_source: "taskstats" or, its fallback, "perf" (whole process, exited threads included, reconciled
#   with wait4; runs before taskstats existed name only "perf") or the last fallback
#   "procfs-task-sum" (live threads only: counts can be too low). With the fallback the window's
#   ctxsw_voluntary/involuntary, ctxsw_per_op and ctxsw_per_1m_ops are empty: it walks every
#   thread (~80 ms at 1536 threads), too dear to read at window marks; its counts are in the
#   timeline and the manifest's phase figures. Text.
#   server internals (SHOW GLOBAL STATUS; empty where not applicable): deltas over the level's
#   phase, except threads_connected, a gauge read during the measured window (clients
#   connected; it counts the collectors' own status connection too), empty when the server
#   answered only after the window closed
#   hugepages: system counters over the level's phase (thp_fault_fallback: a huge page was
#   wanted and a small one used) and the server's own THP state read back. Every thp_* counter
#   is in the manifest, per phase and per cell.
#   huge pages over the level (HUGEPAGE_COLUMNS says which; format 5, empty in older runs)
#   the client host's own figures when sysbench ran there ([clients] hosts; empty otherwise),
#   read from its /proc at the level's boundaries (the whole level phase, like the memory
#   columns), for the whole client host: its name, the level's wall time on its clock, CPU
#   seconds (user+nice / system+irq+softirq) and busy share of all its CPUs, context switches,
#   and kB received/sent on its non-loopback interfaces; then sysbench's own CPU seconds there
#   (the remote shell's `times` after waiting for it) (suites/remote/hostload.py)
#   the allocator's own accounting at the end of the level (servers/allocstats.py: read inside
#   the server by a library preloaded after the allocator, right after the level's clients
#   left), kB: what the server holds, what the allocator keeps committed and not in use, the
#   address space it obtained, what it has not given back (committed: can exceed RSS, the
#   kernel backs only touched pages); empty where the allocator does not say (mimalloc release
#   builds, TBB malloc) or [memory] alloc_stats is off. alloc_overhead = RSS / in use, both
#   read at that moment. Added 2026-11-24 (absent in older runs).
#   thread churn ([memory] churn_cycles): which cycle this level belongs to (the closing level
#   after the last cycle is churn_cycles + 1) and the thread_cache_size it ran under; empty
#   outside churn runs. Added 2026-11-24.
#   who holds the memory at the level's end (format 5; empty in older runs and where the
#   decomposition is off, [memory] parts): RSS by mapping (MEMORY_PART_COLUMNS) and
#   alloc_held_resident_kb = heap_resident_kb - alloc_in_use_resident_kb (what the allocator
#   holds resident and the server does not; never negative since format 6: in use the kernel
#   never backed is alloc_untouched_kb); a fragmentation scenario's cycle and a spike's release (SCENARIO_COLUMNS). The
#   parts hugetlb_kb and heap_anon_huge_kb are the huge-page columns' above, not repeated.
#   read-while-writing (suites/workloads/rww; added in format 2, issue 15; empty for other workloads and
#   in older runs): the writer's and the readers' rates and latencies apart, over the level's
#   own clock (duration_s). In the load level only the write side is filled. table_rows: rows
#   in the table; reads_min: the fewest rows any one reader read (the stop rule is
#   reads_min >= table_rows).
#   format 6 (FORMAT6_ADDED_COLUMNS says which; empty in older runs)
RESULTS_COLUMNS = schema.results_columns()

# The per-cell timeline, samples/<cell>.csv. Cumulative counters are whole-process totals since start.
SAMPLE_COLUMNS = [
    *schema.TIMELINE.columns(),
    # format 5: RSS by mapping, on the rows written at phase boundaries (empty on the others)
    *MEMORY_PART_COLUMNS,
]

CELL_STATUSES = ("ok", "failed", "skipped", "interrupted", "pending")

# Columns added to results.csv by the format-1 writer on 2026-11-22 (measured windows and what
# came with them); a format-1 run recorded before that has none of them.
WINDOW_ERA_COLUMNS = schema.added_in(2)

# What the cpu_user_s, cpu_sys_s, ctxsw_* and per-op columns of results.csv cover
# (manifest figures.cpu_ctxsw_span): the level's measured window, or the whole level (a format-1
# run recorded before measured windows existed).
SPAN_WINDOW = "window"
SPAN_LEVEL = "level"

# A server's status counters by what they mean. A server family names its own counter for each
# meaning it has (suites' family plugins), each cell records that mapping in its raw record
# (CellRaw.counters), and rundir.derive reads a boundary's status through it: this layer knows no
# server's names. Workloads read a counter by its meaning too (suites.workloads.context).
COUNTER_MEANINGS = {
    "threads_created": "server threads created (a counter; its delta is thread churn)",
    "clients_connected": "client connections open now (a gauge)",
    "pages_read_from_disk": "data pages read from disk because the server's cache missed them",
    "page_read_requests": "data page reads asked of the server's cache",
    "memory_used_bytes": "memory the server accounts for itself, in bytes (a gauge)",
    "cache_misses": "reads that missed the cache of the tables' storage engine (warmup)",
    "cache_fill": "what that cache holds, or has added: levelled off means warm (warmup)",
}

# The results columns each run format added, by format number (what `results_columns(N)` leaves out
# of an older format), from each figure's declared `added_in` (rundir/schema.py): 2, the measured
# windows (written by format-1 runs from 2026-11-22 on, by every format-2 run); 3, engine and the
# read-while-writing columns (written by format-2 runs after their first ones), the client host's,
# the allocator's own accounting and thread churn; 5 and 6 as HISTORY says. rundir.integrity reads
# a run's results.csv against its own format's set: a format that adds results columns declares
# them with its number (a format-N fixture then still passes), else every older run reads as one
# that lost those columns.
COLUMNS_ADDED_IN = {v: schema.added_in(v) for v in schema.versions_adding_columns()}


def results_columns(version: int) -> list[str]:
    """The results.csv columns every run of format `version` holds, in the writer's order. An
    older run may hold some later ones too (format-1 runs of the window era, format-2 runs with
    engine); a missing one means the file lost it."""
    later = {c for v, cols in COLUMNS_ADDED_IN.items() if v > version for c in cols}
    return [c for c in RESULTS_COLUMNS if c not in later]


# Columns kept as text; every other column of results.csv and samples/*.csv is a number or empty.
# Declared by each figure's type (rundir/schema.py); a whole number is read as int only where
# the row's identity needs one (threads, repeat): every other number is read as a float.
TEXT_COLUMNS = frozenset(
    f.name
    for rec in (*schema.RESULT_RECORDS, schema.TIMELINE)
    for f in rec.figures
    if f.type is str
)
INT_COLUMNS = frozenset(f.name for f in schema.LEVEL_IDENTITY.figures if f.type is int)
REQUIRED_RESULT_COLUMNS = ("cell", "server", "allocator", "thp", "workload", "threads", "repeat")

# Context-switch sources (results.csv ctxsw_source, cells[].ctxsw_source). The first two count
# every thread the process ever had (exited ones too) and reconcile with wait4, so per-op figures
# from them are trusted; runs recorded before taskstats existed name only "perf".
CTXSW_TASKSTATS = "taskstats"
CTXSW_PERF = "perf"
CTXSW_PROCFS = "procfs-task-sum"
WHOLE_PROCESS_SOURCES = (CTXSW_TASKSTATS, CTXSW_PERF)
