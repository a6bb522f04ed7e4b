"""Every recorded figure, declared once: its name, unit, type, the reader's words, and how it derives.

A figure is one number (or text) a run records: a results.csv column, a timeline column, a field
of a level's raw record. Each belongs to one `Record`, a group declared by what fills it (the
workload's own report, the collectors' phase boundaries, the read-while-writing workload, a client
host's /proc...). Everything else is derived from these declarations and never written again:

- rundir/format.py: the results and timeline column lists, the columns each format added (and so
  the integrity check's and the migrations' column sets), which columns are text and which whole
  numbers;
- rundir/records.py: the typed raw records whose fields are results columns (`Record.model`:
  RwwFigures, ClientLoad, ChurnLevel, the level's `report`);
- suites/workloads/level_result.py: LevelResult's figures (`Record.dataclass_fields`), and so
  the row a level's report adds to results.csv;
- analysis/: the words a table or plot names a figure by (`words(name)`), and docs/columns.md,
  the reader's glossary (`python -m rundir.schema` writes it; a test keeps it current).

The declarations live here, in the run-directory package, and not beside each workload or
collector: analysis reads run directories without importing the runner's plugins, and the
format's column lists must be known to every reader. Each record says which module fills it.

The order of figures inside a record and of the records in RESULT_RECORDS is results.csv's column
order, and each figure's `added_in` (its record's, unless it says otherwise) the run format that
added it: rundir/format.py derives RESULTS_COLUMNS, COLUMNS_ADDED_IN and the FORMATn_ADDED_COLUMNS
groups from them. Finished runs are read against these (tests/unit/format6_frozen.py holds format
6's lists as they were written out by hand; tests/unit/test_rundir_schema.py compares). Adding a
figure: declare it in its record (or a new record, placed where its columns go), with the format
that adds it, then follow docs/architecture.md "Changing the format".

Imports nothing of ours (rundir imports only the standard library and pydantic).
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, create_model

# How a figure derives: the source of its value (the glossary says it per record).
REPORT = "the workload's own report of the level (its clients' clock)"
PLAN = "the cell's plan and its resolved server"
PHASE = "the level's phase: the phase boundary before its clients start to the one after they end"
WINDOW = (
    "the level's measured window: from its first interval report to the last one the load outlasted"
)
END = "the boundary at the level's end"
RECORD = "the level's typed record in raw/<cell>.json"
DERIVED = "computed from other columns of the same row (rundir/derive)"
SAMPLE = "one timeline sample (the 1 Hz sampler, and every phase boundary)"


@dataclass(frozen=True)
class Range:
    """The values a figure can take (issue 35): a recorded value outside is damaged or was
    edited, and rundir/admissible.py refuses the point it belongs to, naming the column and the
    value. `low`/`high`: None is unbounded; `above`: `low` itself is outside too (a throughput of
    0 is not one). `what` is what an outside value is not, in the refusal's words ("qps 0 is not
    a throughput (it must be above 0)"); a value below a bound `low` may take is "below" it."""

    low: float | None = None
    high: float | None = None
    above: bool = False
    what: str = "in range"

    def problem(self, value: float) -> str | None:
        """Why `value` (finite) is outside, as the end of a sentence that starts with the
        column and the value ("is below 0"), or None."""
        low, high = self.low, self.high
        if low is not None and self.above and value <= low:
            return f"is not {self.what} (it must be above {low:g})"
        if low is not None and value < low:
            return f"is below {low:g}"
        if high is not None and value > high:
            return f"is not {self.what} (it must be at most {high:g})"
        return None

    def text(self) -> str:
        """The range as the glossary says it: "> 0", ">= 0", "0 to 100"; "" when unbounded."""
        if self.low is not None and self.high is not None:
            if self.above:
                return f"above {self.low:g}, at most {self.high:g}"
            return f"{self.low:g} to {self.high:g}"
        if self.low is not None:
            return f"{'>' if self.above else '>='} {self.low:g}"
        return f"<= {self.high:g}" if self.high is not None else ""


# No server answers a billion operations a second (the fastest level recorded here: about 1.3e5
# queries/s on 2 cores): a rate above it is a damaged record (a 1e300 interval once made a
# steady rate of 1e152 and a verdict of 9e48x), not a measurement.
MAX_RATE = 1e9
ANY = Range()  # differences between two readings (alloc_held_resident_kb), shares that may pass 1
NON_NEGATIVE = Range(0)  # sizes, counts, times, latencies
LENGTH = Range(0, above=True, what="a level's length")  # an ok level ran for some time
THROUGHPUT = Range(0, MAX_RATE, above=True, what="a throughput")  # an ok level served work
RATE = Range(0, MAX_RATE, what="a rate")  # a rate that may be 0 (an interval, a reader's)
PERCENT = Range(0, 100, what="a percentage")
FLAG = Range(0, 1, what="0 or 1")


@dataclass(frozen=True)
class Figure:
    """One figure. `unit` is what a value counts ("" for text and plain counts); `type` is its
    Python type in the raw record (int, float or str; a results.csv cell is text or a number);
    `words` are the reader's short words for it (tables, plots); `meaning` says what it is when
    the words are not enough. `required`: a raw record without it is refused (else it may be
    None). `default`: what a workload's LevelResult starts with."""

    name: str
    unit: str
    type: type
    words: str
    meaning: str = ""
    required: bool = False
    default: Any = None
    source: str | None = None  # None: the record's
    added_in: int | None = None  # the format that added it as a results column; None: the record's
    range: Range | None = None  # the values it can take; None: the record's


@dataclass(frozen=True)
class Record:
    """A group of figures filled by one owner, in column order."""

    name: str
    owner: str  # the module (or kind of module) that fills it
    source: str  # how its figures derive, unless a figure says otherwise
    figures: tuple[Figure, ...]
    # The run format that added these results columns (1: the first). A format that adds columns
    # declares them in records (or figures) with its number, and rundir/format.py's
    # COLUMNS_ADDED_IN, FORMATn_ADDED_COLUMNS and the migrations' empty columns follow.
    added_in: int = 1
    # The values its figures can take, unless a figure says otherwise (rundir/admissible.py)
    range: Range = ANY
    # Figures of one distribution, in the order their values keep (p50 <= p95 <= ... <= max): a
    # p95 above the p99 is no distribution but an edited or damaged record
    ordered: tuple[tuple[str, ...], ...] = ()

    def columns(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.figures)

    def figure(self, name: str) -> Figure:
        return next(f for f in self.figures if f.name == name)

    def model(
        self, name: str, doc: str, extra: str = "forbid", module: str = "rundir.records"
    ) -> type[BaseModel]:
        """A pydantic model of this record (a raw record's typed part): each figure a field of
        its type, None where not required; other keys refused (`extra="allow"`: kept)."""
        spec: dict[str, Any] = {
            f.name: (f.type, ...) if f.required else (f.type | None, None) for f in self.figures
        }
        model = create_model(
            name,
            __config__=ConfigDict(extra=extra),
            __doc__=doc,
            __module__=module,
            **spec,
        )
        _MODELS[model] = self
        return model

    def dataclass_fields(self) -> list[tuple[str, type, dataclasses.Field]]:
        """Fields for dataclasses.make_dataclass: each figure with its LevelResult default."""
        return [
            (
                f.name,
                f.type if f.default is not None else f.type | None,
                dataclasses.field(default=f.default),
            )
            for f in self.figures
        ]


# The models Record.model made, and the record each declares (holds_result_columns).
_MODELS: dict[type[BaseModel], Record] = {}


def holds_result_columns(obj: Any) -> bool:
    """True for a record (an instance of a Record.model) whose figures are results columns."""
    return _MODELS.get(type(obj)) in RESULT_RECORDS


def _fig(name, unit, type_, words, meaning="", **kw) -> Figure:
    return Figure(name, unit, type_, words, meaning, **kw)


# The declarations are a table, one figure a line:
# fmt: off
# -- results.csv, in column order ---------------------------------------------------------------
CELL_IDENTITY = Record(
    "cell identity",
    "suites/runner (the plan), rundir.derive.levels",
    PLAN,
    (
        _fig("cell", "", str, "cell", "the cell's id: server, allocator, THP mode and round"),
        _fig("server", "", str, "server", "the server's label (NAME:LABEL in a run of several servers; '+ENGINE' for a non-InnoDB engine)"),
        _fig("server_flavor", "", str, "flavor", "mariadb, mysql (Oracle's build), percona or mongodb"),
        _fig("server_version", "", str, "server version"),
        _fig("allocator", "", str, "allocator", "the allocator arm's name (glibc: no preload)"),
        _fig("allocator_version", "", str, "allocator version"),
        _fig("thp", "", str, "THP mode", "the cell's transparent hugepage setting"),
        _fig("engine", "", str, "storage engine", "the workload tables' storage engine (innodb, rocksdb); empty in runs before engines existed (InnoDB)", added_in=3),
    ),
)
LEVEL_IDENTITY = Record(
    "level identity",
    "the workload (suites/workloads) and the plan",
    PLAN,
    (
        _fig("workload", "", str, "workload", "the recorded workload name (oltp_ro, point_select, iibench, rww_run, ...)", source=REPORT),
        _fig("threads", "", int, "threads", "client threads (or clients) of the level", source=REPORT),
        _fig("repeat", "", int, "round", "the round (a server life per cell; repeats alternate allocator order)"),
        _fig("status", "", str, "status", "ok or failed", source=REPORT),
        _fig("error", "", str, "error", "why the level failed (one line)", source=REPORT),
    ),
)
# The figures every workload's level reports (suites.workloads.level_result.LevelResult).
WORKLOAD_REPORT = Record(
    "the workload's report",
    "every workload (suites/workloads/*: LevelResult)",
    REPORT,
    (
        _fig("duration_s", "s", float, "measured length (s)", "how long the level's load ran, as its clients measured it (the MEASURED length; the raw record's clock.planned_s is the planned one)", default=0.0, range=LENGTH),
        _fig("events", "", int, "events", "operations the level completed: transactions (sysbench), rows inserted (iibench), reads + writes (rww)", default=0),
        _fig("tps", "/s", float, "transactions/s", "events per second over duration_s", default=0.0, range=THROUGHPUT),
        _fig("qps", "/s", float, "queries/s", "queries per second over duration_s (rows/s for iibench)", default=0.0, range=THROUGHPUT),
        _fig("lat_avg_ms", "ms", float, "average latency (ms)"),
        _fig("lat_p50_ms", "ms", float, "p50 latency (ms)"),
        _fig("lat_p95_ms", "ms", float, "p95 latency (ms)"),
        _fig("lat_p99_ms", "ms", float, "p99 latency (ms)"),
        _fig("lat_p999_ms", "ms", float, "p99.9 latency (ms)"),
        _fig("lat_max_ms", "ms", float, "max latency (ms)"),
        _fig("errors", "", int, "errors", "operations that failed (the workload's count)", default=0),
        _fig("reconnects", "", int, "reconnects", "client reconnections", default=0),
    ),
    range=NON_NEGATIVE,
    ordered=(("lat_p50_ms", "lat_p95_ms", "lat_p99_ms", "lat_p999_ms", "lat_max_ms"),),
)
# A level's report as the raw record keeps it (RawLevel.report): which level, and its figures.
RAW_REPORT = Record(
    "a raw level's report",
    WORKLOAD_REPORT.owner,
    REPORT,
    (LEVEL_IDENTITY.figure("workload"), LEVEL_IDENTITY.figure("threads"), *WORKLOAD_REPORT.figures),
)
LATENCY_NAMES = tuple(f.name for f in WORKLOAD_REPORT.figures if f.name.startswith("lat_"))
LEVEL_MEMORY = Record(
    "the server's memory over the level",
    "collectors (phase boundaries, the sampler)",
    PHASE,
    (
        _fig("rss_start_kb", "kB", int, "RSS at start (kB)", "the server's resident memory at the level's first boundary"),
        _fig("rss_end_kb", "kB", int, "RSS at end (kB)", "resident memory at the level's end boundary"),
        _fig("rss_peak_kb", "kB", int, "peak RSS (kB)", "the highest resident memory the sampler saw over the phase"),
        _fig("vsz_start_kb", "kB", int, "VSZ at start (kB)"),
        _fig("vsz_end_kb", "kB", int, "VSZ at end (kB)"),
        _fig("anon_huge_kb", "kB", int, "AnonHugePages (kB)", "the server's anonymous transparent huge pages (smaps), last read of the phase"),
    ),
    range=NON_NEGATIVE,
)
MEASURED_WINDOW = Record(
    "the measured window",
    "rundir.derive.window",
    WINDOW,
    (
        _fig("window_s", "s", float, "window (s)", "the measured window's wall time"),
        _fig("window_ops", "", float, "window operations", "operations served in the window (a query for sysbench, a row or document for iibench)"),
    ),
    range=NON_NEGATIVE,
    added_in=2,
)
CPU_CTXSW = Record(
    "whole-process CPU and context switches",
    "collectors (window marks)",
    WINDOW,
    (
        _fig("cpu_user_s", "s", float, "user CPU (s)", "the whole server process's user CPU over the window"),
        _fig("cpu_sys_s", "s", float, "system CPU (s)"),
        _fig("ctxsw_voluntary", "", int, "voluntary context switches", "every thread's, exited ones too (empty with the procfs fallback)"),
        _fig("ctxsw_involuntary", "", int, "involuntary context switches"),
    ),
    range=NON_NEGATIVE,
)
CTXSW_SOURCE = Record(
    "context-switch source",
    "collectors.ctxsw",
    "the cell's collectors",
    (
        _fig("ctxsw_source", "", str, "context-switch source", "taskstats or perf (whole process, reconciled with wait4) or procfs-task-sum (live threads only: its window figures are left empty)"),
    ),
    added_in=2,
)
WINDOW_RATES = Record(
    "per-operation rates over the window",
    "rundir.derive.window",
    WINDOW,
    (
        _fig("cpu_us_per_op", "us", float, "CPU microseconds per operation", "(cpu_user_s + cpu_sys_s) x 1e6 / window_ops; a level in blocks (design alternate): the server's CPU over its blocks / their queries"),
        _fig("ctxsw_per_op", "", float, "context switches per operation"),
        _fig("cpu_overhead", "", float, "CPU / wall", "(cpu_user_s + cpu_sys_s) / window_s: cores the server kept busy"),
        _fig("cpu_s_per_1m_ops", "s", float, "CPU seconds per 1M operations", "iibench's customary unit", added_in=2),
        _fig("ctxsw_per_1m_ops", "", float, "context switches per 1M operations", added_in=2),
    ),
    range=NON_NEGATIVE,
)
SERVER_STATUS = Record(
    "the server's status counters",
    "the family's status read at boundaries (counters by meaning)",
    PHASE,
    (
        _fig("threads_created", "", int, "threads created", "server threads created over the phase (thread churn)"),
        _fig("threads_connected", "", int, "clients connected", "a gauge read during the measured window (counts the collectors' own connection too)", source=WINDOW, added_in=2),
        _fig("bp_reads", "", int, "pages read from disk", "cache misses of the server's buffer pool over the phase"),
        _fig("bp_read_requests", "", int, "page read requests"),
        _fig("server_memory_used_kb", "kB", float, "server's own memory account (kB)", "the memory the server accounts for itself (MariaDB Memory_used, MySQL's performance_schema)", source=END),
    ),
    range=NON_NEGATIVE,
)
THP_COUNTERS = Record(
    "system THP counters",
    "collectors (/proc/vmstat at boundaries)",
    PHASE,
    (
        _fig("thp_fault_alloc", "", int, "THP faults", "system-wide /proc/vmstat delta"),
        _fig("thp_fault_fallback", "", int, "THP fallbacks", "a huge page was wanted and a small one used (system-wide)", added_in=2),
        _fig("thp_collapse_alloc", "", int, "THP collapses", "khugepaged collapses (system-wide)"),
        _fig("thp_split", "", int, "THP splits"),
    ),
    range=NON_NEGATIVE,
)
PROCESS_THP = Record(
    "the server's THP state",
    "collectors (/proc/PID/status THP_enabled)",
    PHASE,
    (
        _fig("process_thp_enabled", "", int, "THP on for the server", "1: the process may get huge pages; 0: it turned THP off for itself (MariaDB does)", range=FLAG),
    ),
)
HUGEPAGE_GAUGES = Record(
    "huge pages at the level's end",
    "collectors/hugepages.py",
    END,
    (
        _fig("shmem_pmd_kb", "kB", int, "ShmemPmdMapped (kB)"),
        _fig("hugetlb_kb", "kB", int, "hugetlb pages (kB)", "explicit huge pages mapped by the server (not in RSS)"),
        _fig("heap_anon_huge_kb", "kB", int, "heap THP (kB)", "anonymous huge pages outside the buffer pool's mapping"),
        _fig("pool_anon_huge_kb", "kB", int, "buffer pool THP (kB)"),
        _fig("pool_hugetlb_kb", "kB", int, "buffer pool hugetlb (kB)"),
        _fig("pool_page_kb", "kB", int, "buffer pool page size (kB)"),
        _fig("hugepages_total", "", int, "HugePages_Total"),
        _fig("hugepages_free", "", int, "HugePages_Free"),
        _fig("hugepages_rsvd", "", int, "HugePages_Rsvd"),
    ),
    range=NON_NEGATIVE,
    added_in=5,
)
HUGEPAGE_DELTAS = Record(
    "huge pages' cost over the level",
    "collectors/hugepages.py",
    PHASE,
    (
        _fig("compact_stall", "", int, "compaction stalls", "system-wide /proc/vmstat delta"),
        _fig("compact_fail", "", int, "compaction failures"),
        # runs derived before the fix in rundir/derive/phases.py recorded a khugepaged restarted
        # mid-phase as a negative CPU time: no point's figure, so older runs still read
        _fig("khugepaged_cpu_s", "s", float, "khugepaged CPU (s)", range=ANY),
    ),
    range=NON_NEGATIVE,
    added_in=5,
)
CLIENT_LOAD = Record(
    "the client host's load",
    "suites/remote/hostload.py (raw RawLevel.client_load)",
    PHASE,
    (
        _fig("client_host", "", str, "client host", "where sysbench ran ([clients] hosts; empty: this machine)", required=True),
        _fig("client_wall_s", "s", float, "client wall time (s)", "the level's wall time on the client host's clock"),
        _fig("client_cpu_user_s", "s", float, "client user CPU (s)", "the whole client host's user+nice CPU"),
        _fig("client_cpu_sys_s", "s", float, "client system CPU (s)", "system+irq+softirq"),
        _fig("client_cpu_busy_pct", "%", float, "client CPU busy (%)", "of all the host's CPUs", range=PERCENT),
        _fig("client_ctxsw", "", int, "client context switches"),
        _fig("client_net_rx_kb", "kB", float, "client received (kB)", "on its non-loopback interfaces"),
        _fig("client_net_tx_kb", "kB", float, "client sent (kB)"),
        _fig("client_sysbench_user_s", "s", float, "sysbench user CPU (s)", "sysbench's own CPU there (the remote shell's `times`)"),
        _fig("client_sysbench_sys_s", "s", float, "sysbench system CPU (s)"),
    ),
    range=NON_NEGATIVE,
    added_in=3,
)
ALLOC_ACCOUNT = Record(
    "the allocator's own accounting",
    "servers/allocstats.py (read inside the server), rundir/derive/alloc.py",
    END,
    (
        _fig("alloc_in_use_kb", "kB", float, "allocator in use (kB)", "what the server holds, as its allocator counts it"),
        _fig("alloc_cached_kb", "kB", float, "allocator cached (kB)", "committed and not in use"),
        _fig("alloc_mapped_kb", "kB", float, "allocator mapped (kB)", "address space it obtained (not resident memory)"),
        _fig("alloc_committed_kb", "kB", float, "allocator committed (kB)", "what it has not given back (can exceed RSS)"),
        _fig("alloc_overhead", "", float, "RSS / in use", "RSS divided by the allocator's in use, both read at that moment"),
    ),
    range=NON_NEGATIVE,
    added_in=3,
)
CHURN = Record(
    "thread churn",
    "suites/workloads/sysbench/churn.py (raw RawLevel.churn)",
    RECORD,
    (
        _fig("churn_cycle", "", int, "churn cycle", "the cycle the level belongs to ([memory] churn_cycles; the closing level is churn_cycles + 1)", required=True),
        _fig("thread_cache_size", "", int, "thread_cache_size", "the server's thread cache it ran under"),
    ),
    range=NON_NEGATIVE,
    added_in=3,
)
MEMORY_PARTS = Record(
    "who holds the memory",
    "collectors/smaps.py (raw boundary parts)",
    END,
    (
        _fig("heap_resident_kb", "kB", int, "heap resident (kB)", "anonymous memory outside the buffer pool and stacks: what the allocator holds"),
        _fig("bufpool_resident_kb", "kB", int, "buffer pool resident (kB)"),
        _fig("stacks_kb", "kB", int, "thread stacks (kB)"),
        _fig("file_kb", "kB", int, "file-backed (kB)", "mapped files and .bss"),
        _fig("swap_kb", "kB", int, "swapped (kB)", "not in RSS"),
        _fig("hugetlb_kb", "kB", int, "hugetlb pages (kB)", "not in RSS"),
        _fig("heap_anon_huge_kb", "kB", int, "heap THP (kB)"),
    ),
    range=NON_NEGATIVE,
    added_in=5,
)
HELD_RESIDENT = Record(
    "held resident",
    "rundir/derive/levels.py",
    DERIVED,
    (
        _fig("alloc_held_resident_kb", "kB", int, "held by the allocator (kB)", "heap_resident_kb - alloc_in_use_resident_kb: what the allocator holds resident and the server does not", range=ANY),
    ),
    added_in=5,
)
SCENARIO = Record(
    "a fragmentation scenario's cycle",
    "suites/workloads/fragmentation (raw RawLevel.scenario), rundir/derive/scenario.py",
    RECORD,
    (
        _fig("scenario_cycle", "", int, "scenario cycle"),
        _fig("burst_returned", "", float, "burst returned", "share of a spike's RSS given back after the idle time (below 0: RSS grew on)", range=ANY),
        _fig("burst_return_s", "s", float, "return time (s)", "seconds until RSS was within 10% of the pre-burst level"),
    ),
    range=NON_NEGATIVE,
    added_in=5,
)
RWW = Record(
    "read-while-writing",
    "suites/workloads/rww (raw RawLevel.rww.figures)",
    RECORD,
    (
        _fig("write_ops_s", "/s", float, "writes/s", "the writer's rate over the level's duration_s", range=RATE),
        _fig("read_ops_s", "/s", float, "reads/s", "the readers' rate", range=RATE),
        _fig("write_lat_p50_ms", "ms", float, "write p50 latency (ms)"),
        _fig("write_lat_p95_ms", "ms", float, "write p95 latency (ms)"),
        _fig("write_lat_p99_ms", "ms", float, "write p99 latency (ms)"),
        _fig("write_lat_max_ms", "ms", float, "write max latency (ms)"),
        _fig("read_lat_p50_ms", "ms", float, "read p50 latency (ms)"),
        _fig("read_lat_p95_ms", "ms", float, "read p95 latency (ms)"),
        _fig("read_lat_p99_ms", "ms", float, "read p99 latency (ms)"),
        _fig("read_lat_max_ms", "ms", float, "read max latency (ms)"),
        _fig("table_rows", "", int, "table rows"),
        _fig("reads_min", "", int, "fewest rows one reader read", "the stop rule is reads_min >= table_rows"),
    ),
    range=NON_NEGATIVE,
    ordered=tuple(
        tuple(f"{who}_lat_{p}_ms" for p in ("p50", "p95", "p99", "max")) for who in ("write", "read")
    ),
    added_in=3,
)
EXPOSURE = Record(
    "the allocator's exposure",
    "servers/shims/alloc_count.c (counted in the server), rundir/derive/exposure.py",
    PHASE,
    (
        _fig("malloc_calls_per_query", "", float, "allocation calls per query", "malloc, calloc, realloc, memalign and operator new calls over the level, per query (connects included: errs high)"),
        _fig("malloc_bytes_per_query", "B", float, "bytes asked per query"),
        _fig("free_calls_per_query", "", float, "free calls per query"),
        _fig("malloc_calls_per_txn", "", float, "allocation calls per transaction"),
    ),
    range=NON_NEGATIVE,
    added_in=6,
)
STEADY = Record(
    "steady state",
    "rundir/derive/steady.py (MSER over the interval reports)",
    REPORT,
    (
        _fig("ramp_s", "s", float, "ramp (s)", "seconds from the first interval report to the measured window's start"),
        _fig("settled", "", int, "settled", "1, or 0 when the rule found the level still moving", range=FLAG),
        _fig("steady_qps", "/s", float, "steady queries/s", "the rate over the window after the ramp, in qps's unit", range=RATE),
    ),
    range=NON_NEGATIVE,
    added_in=6,
)
GROWTH_PARTS = Record(
    "growth and the allocator's in use split",
    "rundir/derive/levels.py, rundir/derive/scenario.py",
    DERIVED,
    (
        _fig("scenario_end_s", "s", float, "cycle end (s)", "when a scenario's cycle ended, seconds since the server's life began"),
        _fig("alloc_in_use_resident_kb", "kB", int, "in use, resident (kB)", "the allocator's in use that is resident (at most the heap's resident part)"),
        _fig("alloc_untouched_kb", "kB", int, "in use, never touched (kB)", "malloc'ed, never written: the kernel backs none of it"),
    ),
    range=NON_NEGATIVE,
    added_in=6,
)

# -- raw records only (not results columns) -----------------------------------------------------
# iibench's query clients over their own run time (rundir.records.IIBenchQuery, a level's
# RawLevel.iibench.query): their latencies are the workload report's figures.
IIBENCH_QUERY = Record(
    "iibench's query clients",
    "suites/workloads/iibench/run_level.py",
    RECORD,
    (
        _fig("clients", "", int, "query clients", required=True),
        _fig("queries", "", int, "queries", required=True),
        _fig(
            "duration_s",
            "s",
            float,
            "query time (s)",
            "the query clients' own MEASURED run time (from go to the last one's end)",
            required=True,
        ),
        _fig("queries_per_s", "/s", float, "queries/s", "queries / duration_s", required=True),
        *(WORKLOAD_REPORT.figure(name) for name in LATENCY_NAMES),
    ),
)


# -- samples/<cell>.csv -------------------------------------------------------------------------
TIMELINE = Record(
    "the timeline",
    "collectors/sampler.py (and every phase boundary)",
    SAMPLE,
    (
        _fig("t_s", "s", float, "time (s)", "seconds since the collectors started"),
        _fig("phase", "", str, "phase"),
        _fig("rss_kb", "kB", int, "RSS (kB)"),
        _fig("vsz_kb", "kB", int, "VSZ (kB)"),
        _fig("hwm_kb", "kB", int, "peak RSS so far (kB)"),
        _fig("rss_anon_kb", "kB", int, "anonymous RSS (kB)"),
        _fig("anon_huge_kb", "kB", int, "AnonHugePages (kB)"),
        _fig("threads", "", int, "server threads"),
        _fig("cpu_user_s", "s", float, "user CPU since start (s)"),
        _fig("cpu_sys_s", "s", float, "system CPU since start (s)"),
        _fig("ctxsw_voluntary", "", int, "voluntary context switches since start"),
        _fig("ctxsw_involuntary", "", int, "involuntary context switches since start"),
        _fig("workload_tps", "/s", float, "workload transactions/s", "over the last interval"),
        _fig("workload_qps", "/s", float, "workload queries/s"),
    ),
)
# fmt: on

RESULT_RECORDS = (
    CELL_IDENTITY,
    LEVEL_IDENTITY,
    WORKLOAD_REPORT,
    LEVEL_MEMORY,
    MEASURED_WINDOW,
    CPU_CTXSW,
    CTXSW_SOURCE,
    WINDOW_RATES,
    SERVER_STATUS,
    THP_COUNTERS,
    PROCESS_THP,
    HUGEPAGE_GAUGES,
    HUGEPAGE_DELTAS,
    CLIENT_LOAD,
    ALLOC_ACCOUNT,
    CHURN,
    MEMORY_PARTS,
    HELD_RESIDENT,
    SCENARIO,
    RWW,
    EXPOSURE,
    STEADY,
    GROWTH_PARTS,
)


def result_figures() -> dict[str, Figure]:
    """Every results column's figure by name (a name two records share, hugetlb_kb and
    heap_anon_huge_kb, is one column: its first declaration)."""
    out: dict[str, Figure] = {}
    for rec in RESULT_RECORDS:
        for f in rec.figures:
            out.setdefault(f.name, f)
    return out


def results_columns() -> list[str]:
    """results.csv's columns in the writer's order: the records' figures in declaration order, a
    name two records share written once."""
    return list(result_figures())


def added_in(version: int) -> tuple[str, ...]:
    """The results columns run format `version` added, in column order."""
    out = []
    for name in result_figures():
        rec = record_of(name)
        fig = rec.figure(name)
        if (fig.added_in or rec.added_in) == version:
            out.append(name)
    return tuple(out)


def versions_adding_columns() -> list[int]:
    """Every format after the first that added results columns."""
    return sorted({f.added_in or r.added_in for r in RESULT_RECORDS for f in r.figures} - {1})


def record_of(name: str) -> Record:
    """The first record that declares a results column."""
    return next(r for r in RESULT_RECORDS if name in r.columns())


def figure_range(name: str) -> Range:
    """The values a results column can take: its figure's range, else its record's."""
    rec = record_of(name)
    fig = rec.figure(name)
    return ANY if fig.type is str else fig.range or rec.range


def ordered_columns() -> tuple[tuple[str, ...], ...]:
    """Every group of results columns whose values keep their order (Record.ordered)."""
    return tuple(group for rec in RESULT_RECORDS for group in rec.ordered)


def words(name: str) -> str:
    """The reader's words for a results or timeline column (its name where none is declared)."""
    fig = result_figures().get(name)
    if fig is None and name in TIMELINE.columns():
        fig = TIMELINE.figure(name)
    return fig.words if fig else name


def glossary() -> str:
    """docs/columns.md: every results and timeline column, grouped by record, in column order."""
    lines = [
        "# Columns of results.csv and samples/<cell>.csv",
        "",
        "Generated from rundir/schema.py by `python -m rundir.schema > docs/columns.md` (a test",
        "fails when it is out of date). Each group says what fills it and over which part of the",
        "level its figures are taken; per-level figures are deltas over that part, not since the",
        "server started. An empty cell: not recorded (a run older than the column, a collector",
        "that was off, or a figure that does not apply).",
        "",
        "`duration_s` is the level's MEASURED length (the workload's own clock); the raw record's",
        "`clock.planned_s` is its PLANNED length (records before the two were named apart call it",
        "`duration_s` too, and are read as planned_s).",
        "",
        "`since format`: the run format that first recorded the column; a run of an older format",
        "reads it as empty.",
        "",
        "`range`: the values the column can take in an ok level's row; a value outside (or NaN,",
        "or infinity) is damaged, and the point it belongs to is refused (rundir/admissible.py).",
        "A distribution's figures keep their order too: "
        + "; ".join(" <= ".join(f"`{c}`" for c in group) for group in ordered_columns())
        + ".",
        "",
    ]
    seen: set[str] = set()
    for rec in (*RESULT_RECORDS, TIMELINE):
        where = "samples/<cell>.csv" if rec is TIMELINE else "results.csv"
        lines += [
            f"## {rec.name} ({where})",
            "",
            f"Filled by {rec.owner}. Source: {rec.source}.",
            "",
        ]
        lines += [
            "| column | unit | words | meaning | range | since format |",
            "|---|---|---|---|---|---|",
        ]
        for f in rec.figures:
            again = rec is not TIMELINE and f.name in seen
            seen.add(f.name)
            meaning = f.meaning + (f" (source: {f.source})" if f.source else "")
            if again:
                meaning = (
                    "the same column as above (one column, whichever reading the boundary has)"
                )
            since = "" if rec is TIMELINE else (f.added_in or rec.added_in)
            bounds = "" if rec is TIMELINE else figure_range(f.name).text()
            lines.append(f"| `{f.name}` | {f.unit} | {f.words} | {meaning} | {bounds} | {since} |")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.stdout.write(glossary())
