"""Typed records of manifest.json: its top level, the figures' meaning, and one cell's entry.

Only the keys every reader relies on are declared; the rest (host, suite, collectors' evidence)
stays free-form and passes through unchanged (`extra="allow"`). The writer validates the manifest
through `Manifest` before each write and the reader after migrating, so both sides agree on the
same declaration.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError

from rundir import schema
from rundir.errors import RunDirError
from rundir.format import CELL_STATUSES, FORMAT_VERSION, RAW_VERSION, SPAN_WINDOW
from rundir.migrations import upgrade_raw


class _Record(BaseModel):
    model_config = ConfigDict(extra="allow")


class Tool(_Record):
    name: str = "mallocsweep"
    version: str | None = None

    @classmethod
    def installed(cls) -> Tool:
        """This mallocsweep, as the installed package says (pyproject's version), so a run names
        the code that wrote it. None when running from a source tree that was never installed."""
        try:
            return cls(version=version("mallocsweep"))
        except PackageNotFoundError:
            return cls(version=None)


class Figures(_Record):
    """What readers once had to guess, recorded (format 2)."""

    # What cpu_user_s, cpu_sys_s, ctxsw_voluntary/involuntary and the per-op rates of results.csv
    # cover: "window" (the level's measured window: window_s, window_ops) or "level" (the whole
    # level, clients' start-up and teardown included; format-1 runs before 2026-11-22).
    cpu_ctxsw_span: Literal["window", "level"] = SPAN_WINDOW
    # Format 3: raw/<cell>.json holds what each cell observed and its rows are derived from it
    # (rundir.derive), so `report --rederive` can derive them again. False for older runs: their
    # figures are as recorded.
    raw_records: bool = True


class Cell(_Record):
    """One cell's entry in manifest cells[] (and cells/<id>.json's "cell")."""

    id: str
    index: int
    # "running" only while its server lives; a resumed run turns it back into "pending".
    status: Literal[CELL_STATUSES + ("running",)]  # type: ignore[valid-type]
    error: str | None = None
    repeat: int | None = None
    allocator: dict[str, Any] = Field(default_factory=dict)
    server: dict[str, Any] = Field(default_factory=dict)
    thp: dict[str, Any] = Field(default_factory=dict)
    # Why this cell's figures could not be derived from its raw record (one line; format 3)
    derive_error: str | None = None


class ServerRecord(_Record):
    """One server of the run (manifest servers[], format 5): a run with several servers (an
    upgrade check) names each; a run of one has one entry without a name."""

    name: str = ""  # "" for a run of one server (older runs: every entry)
    label: str  # the server label its cells' results rows carry (NAME:LABEL with several)
    flavor: str | None = None
    version: str | None = None


class KitRecord(_Record):
    """The kit a run was made with (manifest "kit": its kit.json, written by `mallocsweep kit
    build`): each component's path, version and sha256. Absent from runs made outside a kit, and
    from every run older than kits; no reader requires it."""

    name: str
    tool_version: str
    components: list[dict[str, Any]] = Field(default_factory=list)


class Manifest(_Record):
    """manifest.json's top level, in the current format."""

    format_version: int = FORMAT_VERSION
    tool: Tool = Field(default_factory=Tool)
    run_id: str | None = None
    status: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    figures: Figures = Field(default_factory=Figures)
    host: dict[str, Any] = Field(default_factory=dict)
    suite: dict[str, Any] = Field(default_factory=dict)
    cells: list[Cell] = Field(default_factory=list)
    servers: list[ServerRecord] = Field(default_factory=list)
    kit: KitRecord | None = None  # optional: only runs made by a kit's launcher have it


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RawPart(_Strict):
    """One part of the server's memory by mapping (collectors.smaps.Part), kB."""

    rss_kb: int = 0
    anon_huge_kb: int = 0
    swap_kb: int = 0
    hugetlb_kb: int = 0
    size_kb: int = 0
    mappings: int = 0


class RawParts(_Strict):
    """RSS taken apart by mapping at a phase boundary (collectors.smaps.Decomposition; format 5):
    the parts' rss_kb add up to the process's RSS."""

    bufpool: RawPart
    stacks: RawPart
    file: RawPart
    heap: RawPart
    marked: bool = False  # the buffer pool was found (its don't-dump mark, or its size)
    threads: int = 0  # threads whose stack pointer located their stack
    read_ms: float | None = None
    rss_after_kb: int | None = None  # the kernel's VmRSS right after the read


class RawSnap(_Strict):
    """The server process at one moment; t_s in seconds since the collectors started. Counters
    (CPU, context switches) are whole-process totals; ctxsw_* from the cell's ctxsw_source (named
    as results.csv names them; raw_version 1 said ctx_*)."""

    t_s: float
    rss_kb: int | None = None
    vsz_kb: int | None = None
    hwm_kb: int | None = None
    rss_anon_kb: int | None = None
    threads: int | None = None
    cpu_user_s: float | None = None
    cpu_sys_s: float | None = None
    ctxsw_voluntary: int | None = None
    ctxsw_involuntary: int | None = None
    thp_enabled: int | None = None
    anon_huge_kb: int | None = None
    live: bool = True  # False: the process was gone, these are its last known values
    pre_exec: bool = False  # still the launch gate: counters valid, memory the shell's
    parts: RawParts | None = None  # at phase boundaries with [memory] parts (format 5)


class RawHugepages(_Strict):
    """Huge pages at a boundary (collectors.hugepages.HugepageReading): the process's from
    smaps (None where only the system's were read: the server gone or not yet exec'd), the
    system's HugePages_* counts, khugepaged's CPU seconds since boot. Format 5."""

    anon_huge_kb: int | None = None
    shmem_pmd_kb: int | None = None
    hugetlb_kb: int | None = None
    pool_mappings: int = 0
    pool_kb: int | None = None
    pool_page_kb: int | None = None
    pool_hugetlb_kb: int | None = None
    pool_anon_huge_kb: int | None = None
    heap_anon_huge_kb: int | None = None
    hugepages_total: int | None = None
    hugepages_free: int | None = None
    hugepages_rsvd: int | None = None
    hugepages_surp: int | None = None
    hugepage_size_kb: int | None = None
    khugepaged_cpu_s: float | None = None
    read_ms: float | None = None


class RawBoundary(_Strict):
    """A phase boundary: the process, /proc/vmstat's thp_* and compact_* counters (compact_*
    from format 5), the server's status, and its huge pages (format 5)."""

    snap: RawSnap
    vmstat: dict[str, int] = Field(default_factory=dict)
    status: dict[str, float] | None = None
    hugepages: RawHugepages | None = None


class RawPhase(_Strict):
    """What the collectors observed over one phase (boundary to boundary)."""

    name: str
    start: RawBoundary
    end: RawBoundary | None = None
    first_server: RawSnap | None = None  # the first snapshot of the server itself (after exec)
    # What the timeline sampler saw over the phase (its rows are in samples/<cell>.csv)
    peak_rss_kb: int | None = None
    last_anon_huge_kb: int | None = None
    last_thp_enabled: int | None = None
    samples: int = 0
    # The server's status read once while the level ran, and when the answer came
    mid_status: dict[str, float] | None = None
    mid_status_t_s: float | None = None
    marks: list[RawSnap] = Field(default_factory=list)  # measured-window marks, in time order


class LatencyHistogram(_Strict):
    """A level's whole latency distribution (sysbench's 1024 log buckets), as counts per bucket."""

    array_size: int
    range_min_ms: float
    range_max_ms: float
    buckets: list[tuple[int, int]] = Field(default_factory=list)  # [bucket index, count]


class SysbenchPercentile(_Strict):
    """sysbench's own single --percentile figure, kept as a cross-check of the histogram's."""

    p: float | None = None
    ms: float | None = None


class SysbenchLevel(_Strict):
    """What a sysbench level (a stock script or the user's own) recorded besides its figures."""

    latency_histogram: LatencyHistogram | None = None
    lat_min_ms: float | None = None
    sysbench_percentile: SysbenchPercentile | None = None
    problems: list[str] = Field(default_factory=list)  # malformed records, histogram mismatches
    partial: str | None = None  # the level failed: its figures are from its interval reports
    stopped_early: bool = False  # stopped on purpose (a warmup that got warm)
    # A level of a suite with [sysbench] settle_cap_s, ended once duration_s steady seconds
    # followed its ramp: sysbench's elapsed seconds when it was told to end (its planned --time
    # was duration_s + settle_cap_s). None: it ran its planned --time (format 6).
    settled_stop_s: float | None = None
    argv: list[str] = Field(default_factory=list)  # the command line, passwords masked
    records: str | None = None  # the wrapper's JSON records file
    wall_s: float | None = None
    exit: dict[str, Any] | None = None  # sysbench's exit (servers.launch ExitInfo)
    nofile: dict[str, Any] | None = None  # the open-file limit it was given
    priority: dict[str, Any] | None = None  # which threads ran boosted (collectors.priority)
    follow: str | None = None  # how its records were followed (inotify+pidfd or polling)
    # Split over several client hosts (suites.workloads.sysbench.split): each host's own figures, how they
    # started together, and the intervals every host wrote (the rates' common window).
    client_hosts: list[dict[str, Any]] | None = None
    split: dict[str, Any] | None = None
    common_window: dict[str, Any] | None = None


IIBenchQuery = schema.IIBENCH_QUERY.model(
    "IIBenchQuery", "iibench's query clients over their own run time (rundir.schema.IIBENCH_QUERY)."
)


class IIBenchLevel(_Strict):
    """What an iibench level recorded besides its figures (suites.workloads.iibench.run_level)."""

    rows: int | None = None
    duration_s: float | None = None
    per_client: list[dict[str, Any]] = Field(default_factory=list)  # rows, batches, rate, CPU
    client_cpu_s: float | None = None
    client_life_cpu_s: float | None = None  # whole lives of the client processes (wait4)
    client_mode: str | None = None  # processes (measurements) or threads (the bench's baseline)
    startup_s: float | None = None
    batch_rows: int | None = None
    secondary_indexes: int | None = None
    latency_unit: str | None = None
    query: IIBenchQuery | None = None
    wall_s: float | None = None  # a level that failed on its client host: how long it ran


RwwFigures = schema.RWW.model(
    "RwwFigures", "Read-while-writing's results columns (rundir.schema.RWW)."
)


class RwwLevel(_Strict):
    """What a read-while-writing level recorded besides its figures (suites.workloads.rww.run_level)."""

    figures: RwwFigures
    engine: str | None = None
    client_cpu_s: float | None = None
    client_life_cpu_s: float | None = None
    per_reader_reads: list[int] = Field(default_factory=list)
    misses: int | None = None
    capped: bool = False  # cut by max_seconds before the stop rule was met
    latency_unit: str | None = None


ChurnLevel = schema.CHURN.model(
    "ChurnLevel",
    "A thread-churn level's place (suites.workloads.sysbench.churn): results columns churn_cycle and "
    "thread_cache_size (rundir.schema.CHURN).",
)


class ScenarioLevel(_Strict):
    """One cycle of a fragmentation scenario (suites.workloads.fragmentation): which scenario
    and cycle, and what the scenario itself observed. results column scenario_cycle; a spike's
    readings give burst_returned and burst_return_s (rundir.derive.scenario)."""

    scenario: str
    cycle: int
    report: str = ""  # the report it reproduces (MDEV-30889, ...)
    # a dump cycle: the dump client's exit, seconds and output size
    dump: dict[str, Any] | None = None
    # a spike-and-idle cycle: RSS before the burst, at its end, then [t_s since the burst ended,
    # RSS kB] through the idle time
    pre_burst_kb: int | None = None
    burst_end_kb: int | None = None
    idle: list[tuple[float, int | None]] = Field(default_factory=list)
    idle_s: float | None = None
    # settings of the cycle worth keeping (thread_cache_size, table caches, sizes)
    settings: dict[str, Any] = Field(default_factory=dict)


ClientLoad = schema.CLIENT_LOAD.model(
    "ClientLoad", "The client host's own figures over a level (rundir.schema.CLIENT_LOAD)."
)


class AgentLevel(_Strict):
    """A level run by our agent on a client host (suites.remote.pylevel): where its records are."""

    records: str
    tag: str


# What a level's workload reported (suites.workloads.level_result.LevelResult.row()): the figures
# of rundir.schema.RAW_REPORT; keys no longer declared are kept (older records), never read.
RawReport = schema.RAW_REPORT.model(
    "RawReport", "A level's report: rundir.schema.RAW_REPORT's figures.", extra="allow"
)


class RawBlock(_Strict):
    """One block of a level run in the alternate design ([run] design = "alternate"): a slice
    of `seconds` of the level's load on this cell's server while the round's other arms idled
    (rundir/derive/blocks.py derives its rate; suites/runner/alternate.py runs it)."""

    index: int  # 0-based: the index-th block of this arm at this level (pair `index`)
    position: int  # this arm's place in its cycle of the rotation (0: it went first)
    start_s: float  # on the cell's collectors' clock (seconds since its server was spawned)
    end_s: float
    # the same moments on the wall clock (Unix seconds): blocks of the round's cells in one order
    started_at: float | None = None
    ended_at: float | None = None
    status: str  # "ok" or "failed"
    error: str | None = None
    qps: float = 0.0  # the workload's own figure over the whole block
    events: int = 0
    duration_s: float = 0.0
    # [t_s in the block's own clock, operations/s over the interval]
    intervals: list[tuple[float, float]] = Field(default_factory=list)
    # the server's CPU over the block (utime + stime, whole process; None: not read, or a block
    # recorded before it was)
    cpu_s: float | None = None


class RawLevel(_Strict):
    """One level as the workload reported it. `report` holds the figures every workload has;
    what is particular to one workload is in its own typed record (at most one of sysbench,
    iibench, rww), and what any workload may add beside (churn, a client host's load, the agent
    that ran it) in theirs."""

    phase: str
    workload: str
    threads: int
    status: str
    error: str | None = None
    report: RawReport  # the workload's figures (LevelResult.row())
    # [t_s in the workload's clock, operations/s over the interval, our mark's t_s or None]
    intervals: list[tuple[float, float, float | None]] = Field(default_factory=list)
    sysbench: SysbenchLevel | None = None
    iibench: IIBenchLevel | None = None
    rww: RwwLevel | None = None
    churn: ChurnLevel | None = None
    client_load: ClientLoad | None = None
    agent: AgentLevel | None = None
    scenario: ScenarioLevel | None = None  # a fragmentation scenario's cycle (format 5)
    # The alternate design: the level ran as these blocks (None: one whole level, solo)
    blocks: list[RawBlock] | None = None
    # Only in records upgraded from raw_version 1: keys of its untyped `extra` that no typed
    # record holds (kept, never read by a derivation).
    legacy_extra: dict[str, Any] | None = None

    def result_columns(self) -> dict[str, Any]:
        """The results columns its typed records add to the level's row (rww's figures, churn's
        place, the client host's load): every typed record, or its `figures`, that is a record of
        results columns declared in rundir/schema.py (Record.model) adds them, so neither a
        derivation nor this method names a workload."""
        out: dict[str, Any] = {}
        for name in type(self).model_fields:
            rec = getattr(self, name)
            for part in (rec, getattr(rec, "figures", None)):
                if schema.holds_result_columns(part):
                    out.update(part.model_dump())
        return out


class RawClock(_Strict):
    """What the workload said about its level's clock (rundir.derive.window.measured_window).

    `planned_s` is the level's PLANNED length (the suite's duration), which the measured window
    ends before; results.csv's `duration_s` is the MEASURED length. Records written before the
    two were named apart call the planned one `duration_s`: read as planned_s, never rewritten."""

    planned_s: float | None = Field(None, validation_alias=AliasChoices("planned_s", "duration_s"))
    interval_s: float | None = None
    last_ends_load: bool = False


class CellRaw(_Strict):
    """raw/<cell>.json: what one cell observed; its results rows are derived from this alone."""

    raw_version: int = RAW_VERSION
    cell: str
    identity: dict[str, Any]  # rundir.derive.levels.IDENTITY_FIELDS
    clock: RawClock
    ctxsw_source: str | None = None
    phases: dict[str, RawPhase] = Field(default_factory=dict)
    levels: list[RawLevel] = Field(default_factory=list)
    exit: dict[str, Any] | None = None  # wait4's whole-life reading (servers.life exit record)
    # The server's status counters by meaning (rundir.format.COUNTER_MEANINGS -> the name its
    # family gives it): how rundir.derive reads the boundaries' status (raw_version 2).
    counters: dict[str, str] = Field(default_factory=dict)
    # The allocator's own accounting, one reading per phase boundary and idle sample
    # (suites.runner.alloc_memory); absent when [memory] alloc_stats is off or the family cannot preload.
    alloc_readings: list[dict[str, Any]] | None = None


def check_raw(raw: dict, where: str) -> dict:
    """The raw record in the current raw_version (a version-1 record upgraded in memory), or a
    RunDirError naming the first field that does not fit CellRaw."""
    raw = upgrade_raw(raw, where)
    _validate(CellRaw, raw, where)
    return raw


def check_manifest(manifest: dict, where: str) -> None:
    """RunDirError naming the first field that does not fit the declared records."""
    _validate(Manifest, manifest, where)


def _validate(model, data: dict, where: str) -> None:
    try:
        model.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        field = ".".join(str(p) for p in err["loc"])
        raise RunDirError(
            f"{where}: field {field}: {err['msg']} (got {err.get('input')!r:.60}); the file is damaged"
        ) from None


__all__ = [
    "AgentLevel",
    "Cell",
    "CellRaw",
    "ChurnLevel",
    "ClientLoad",
    "Figures",
    "KitRecord",
    "IIBenchLevel",
    "IIBenchQuery",
    "LatencyHistogram",
    "Manifest",
    "RawBoundary",
    "RawClock",
    "RawHugepages",
    "RawLevel",
    "RawPart",
    "RawParts",
    "RawPhase",
    "RawReport",
    "RawSnap",
    "RwwFigures",
    "RwwLevel",
    "ScenarioLevel",
    "SysbenchLevel",
    "ServerRecord",
    "SysbenchPercentile",
    "Tool",
    "check_manifest",
    "check_raw",
]
