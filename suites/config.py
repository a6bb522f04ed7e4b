"""Suite files: every setting declared once, with its help and default; bad values stop the run.

A suite is a TOML file (see configs/suites/template.toml, which lists every setting). Validation is
strict: unknown keys are errors (with a "did you mean"), wrong types and out-of-range values are
errors, nothing is silently clamped. Every error names the file, the line where it can be found, the
field, and the expected form — as one line, via SuiteError.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PositiveFloat,
    PositiveInt,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from analysis.sequential import MIN_EFFECT_PCT
from servers.allocators import custom_allocator, load_registry
from servers.errors import AllocatorError, ServerError
from servers.mysql_config import extra_lines
from suites.config_errors import (
    LINE_BREAKS,
    FieldError,
    did_you_mean,
    first_error,
    format_loc,
    one_line,
    reason,
)
from suites.config_errors import describe as describe_error
from suites.errors import SuiteError
from suites.iibench.spec import (
    DEFAULT_MAX_ALLOWED_PACKET,
    IIBenchSettingError,
    IIBenchSpec,
    insert_statement_bytes,
)

WORKLOAD_NAMES = ("oltp_ro", "point_select")
THP_MODES = ("system", "always", "madvise", "never")
FLAVORS = ("mariadb", "mysql", "percona", "mongodb")
MAX_THREADS = 100_000
# A sysbench level of a week is surely a typo; sysbench's --time is a C int anyway.
MAX_LEVEL_S = 7 * 24 * 3600
# A sysbench level lasts at least this many report intervals (see SysbenchSection._interval).
MIN_INTERVALS_PER_LEVEL = 3
# Each round runs the whole matrix again; the plan lists every cell up front.
MAX_REPEAT = 1000
# Our own connections beside the clients (status collector, control connection, warmup scans)
# when a suite sets max_connections itself; sized automatically, the margin is larger.
OWN_CONNECTIONS = 10

NonNegFloat = Annotated[float, Field(ge=0)]


class _Section(BaseModel):
    # strict: a value of the wrong type is an error, never converted ("30" is not 30, true is not
    # 1, "yes" is not true); the one widening allowed is a whole number where a number is expected
    # (duration_s = 30). inf and nan are not numbers a setting can take.
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


def _base_dir(info: ValidationInfo) -> Path:
    """The directory relative paths are taken from: the suite file's (the CLI's cwd for options)."""
    base = (info.context or {}).get("base_dir")
    return Path(base) if base else Path(".")


def _resolve(value: str, info: ValidationInfo) -> Path:
    p = Path(value)
    if value.startswith("~"):
        try:
            p = p.expanduser()
        except RuntimeError:
            raise ValueError(f"cannot expand {value!r}: no home directory") from None
    if not p.is_absolute():
        p = _base_dir(info).absolute() / p
    return Path(os.path.normpath(p))  # no symlink resolution: mysqld's name may tell its flavor


def _where_relative(value: str, info: ValidationInfo) -> str:
    if value.startswith(("/", "~")):
        return ""
    base = (info.context or {}).get("base_name", "the suite file's directory")
    return f" (a relative path is taken from {base})"


def _existing(value: str, info: ValidationInfo, kind: str) -> str:
    p = _resolve(value, info)
    ok = p.is_dir() if kind == "directory" else p.is_file()
    if not ok:
        what = "no such file" if kind == "file" else "no such directory"
        if p.exists():
            what = f"not a {kind}"
        raise ValueError(f"{what}: {p}{_where_relative(value, info)}")
    return str(p)


def mycnf_int(value: Any) -> int | None:
    """A whole number as my.cnf writes it (2000, "2000", "16M"); None when it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else None
    m = re.fullmatch(r"\s*(\d{1,18})\s*([kKmMgG]?)\s*", str(value))
    if not m:
        return None
    return int(m.group(1)) * 1024 ** " kmg".index((m.group(2) or " ").lower())


class SuiteInfo(_Section):
    name: str = Field("suite", description="Names the run directory; letters, digits, - and _.")
    description: str = Field("", description="One line shown in the report.")
    kind: Literal["sysbench", "iibench", "rww"] = Field(
        "sysbench",
        description="sysbench: thread sweep of OLTP_RO/POINT_SELECT; iibench: insert load; "
        "rww: read-while-writing (a measured load, then 1 writer + N readers; [rww]).",
    )

    @field_validator("description")
    @classmethod
    def _description(cls, v: str) -> str:
        if LINE_BREAKS.search(v):
            raise ValueError("expected one line")
        return v

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", v):
            raise ValueError(
                "expected 1-64 letters, digits, '.', '-' or '_', starting with a letter or digit"
            )
        return v


class ServerSection(_Section):
    flavor: Literal["mariadb", "mysql", "percona", "mongodb"] = Field(
        "mariadb", description="Server family; MySQL-family flavors are detected from --version."
    )
    root: str = Field(
        "",
        description="A server root: a directory holding another release's files (debootstrap, "
        "a container's filesystem); the server runs in it under chroot, on its libraries and "
        "allocators. `binary` is then a path inside it (default /usr/sbin/mariadbd or mysqld).",
    )
    binary: str = Field(
        "",
        description="Server binary (mariadbd, mysqld, mongod); empty = default. A path is taken "
        "relative to the suite file's directory and must exist; a bare name is looked up on PATH.",
    )
    basedir: str = Field(
        "",
        description="A MySQL/Percona install directory with bin/mysqld inside (relative to the "
        "suite file's directory).",
    )
    fetched: str = Field(
        "",
        description='A server of `mallocsweep servers fetch`, by its SPEC (e.g. "mariadb-10.11.18"); '
        "instead of binary/basedir.",
    )
    buffer_pool_mb: PositiveInt = Field(256, description="innodb_buffer_pool_size in MiB.")
    engines: list[Literal["innodb", "rocksdb"]] = Field(
        default_factory=lambda: ["innodb"],
        description="Storage engines of the workload's tables, a matrix dimension (--engines): "
        "innodb, rocksdb (MyRocks: MariaDB's ha_rocksdb.so plugin, Debian package "
        "mariadb-plugin-rocksdb). The dataset is prepared once per engine.",
    )
    rocksdb_block_cache_mb: PositiveInt = Field(
        256, description="MyRocks rocksdb_block_cache_size in MiB (its buffer pool)."
    )
    rocksdb_write_buffer_mb: PositiveInt = Field(
        64,
        description="MyRocks memtable size in MiB (write_buffer_size of the default column "
        "family); with the block cache, the engine's own memory.",
    )
    cache_gb: PositiveFloat = Field(1.0, description="MongoDB WiredTiger cache size in GiB.")
    settings: dict[str, str | int | float | bool] = Field(
        default_factory=dict,
        description="Extra my.cnf [mysqld] settings, as written in my.cnf (MySQL family only); "
        "the port, socket, directories and bind address are ours.",
    )
    startup_timeout_s: PositiveFloat = Field(
        180, description="How long a server may take to accept connections."
    )

    @field_validator("engines")
    @classmethod
    def _engines(cls, v: list[str]) -> list[str]:
        if not v:
            raise ValueError("expected at least one engine")
        if len(set(v)) != len(v):
            raise ValueError(f"duplicate engines in {v}")
        return v

    @field_validator("binary")
    @classmethod
    def _binary(cls, v: str, info: ValidationInfo) -> str:
        if info.data.get("root"):
            if v and not v.startswith("/"):
                raise ValueError("with server.root, expected an absolute path inside the root")
            return v  # checked inside the root when the server is resolved
        if not v or ("/" not in v and not v.startswith("~")):
            return v  # default, or a name to look up on PATH
        return _existing(v, info, "file")

    @field_validator("root")
    @classmethod
    def _root(cls, v: str, info: ValidationInfo) -> str:
        return _existing(v, info, "directory") if v else v

    @field_validator("basedir")
    @classmethod
    def _basedir(cls, v: str, info: ValidationInfo) -> str:
        return _existing(v, info, "directory") if v else v

    @field_validator("fetched")
    @classmethod
    def _fetched(cls, v: str) -> str:
        # Only the shape here: whether it is fetched is the runner's question (servers.fetch.lookup).
        if v:
            from servers.archive import parse_spec

            try:
                parse_spec(v)
            except ServerError as e:
                raise ValueError(str(e)) from None
        return v

    @model_validator(mode="after")
    def _one_server(self) -> ServerSection:
        if self.fetched and (self.binary or self.basedir or self.root):
            raise ValueError("give either fetched or binary/basedir/root, not both")
        return self

    @field_validator("settings", mode="before")
    @classmethod
    def _settings(cls, v: Any) -> Any:
        # Checked here, not when my.cnf is rendered in the first cell: a bad key must stop the run
        # before a run directory exists, with the file and line.
        if not isinstance(v, dict):
            return v  # the type check says what is expected
        for key, value in v.items():
            if isinstance(value, float) and not math.isfinite(value):
                raise ValueError(f"the value of {key!r} is not a finite number")
            if not isinstance(value, str | int | float | bool):
                raise ValueError(
                    f"the value of {key!r} must be a string, a number or true/false (a my.cnf value)"
                )
        try:
            extra_lines({str(k): str(x) for k, x in v.items()})
        except ServerError as e:
            raise ValueError(str(e).removeprefix("server.settings: ")) from None
        for key in ("max_connections", "max_allowed_packet"):
            if key in v and mycnf_int(v[key]) is None:
                raise ValueError(
                    f'{key} = {v[key]!r}: expected a whole number (e.g. 2000 or "64M")'
                )
        return v


class CustomAllocator(_Section):
    name: str = Field(description="Name used in tables and --allocators.")
    library: str = Field(
        description="The allocator's shared object, preloaded: an absolute path or one relative "
        "to the suite file's directory; it must exist."
    )
    env: dict[str, str] = Field(
        default_factory=dict, description="Extra environment for the server."
    )
    tunables: list[str] = Field(default_factory=list, description="GLIBC_TUNABLES items, appended.")
    description: str = Field("", description="One line shown by `mallocsweep allocators`.")
    companions: list[str] = Field(
        default_factory=list,
        description="Allocator libraries that `library` loads itself (a proxy like TBB's), which "
        "may be mapped beside it: absolute paths or relative to the suite file's directory; they "
        "must exist. Any other allocator library in the server fails verification.",
    )

    @field_validator("library")
    @classmethod
    def _library(cls, v: str, info: ValidationInfo) -> str:
        # Preloading is always by absolute path (never resolved by the loader's search path).
        if not v:
            raise ValueError("expected the path of a shared object")
        return _existing(v, info, "file")

    @field_validator("companions")
    @classmethod
    def _companions(cls, v: list[str], info: ValidationInfo) -> list[str]:
        out = []
        for item in v:
            if not item:
                raise ValueError("expected paths of shared objects, got an empty string")
            out.append(_existing(item, info, "file"))
        return out


class AllocatorsSection(_Section):
    use: list[str] = Field(
        default_factory=lambda: ["all"],
        description='Allocator names from configs/allocators.toml, "all" for every usable core one.',
    )
    custom: list[CustomAllocator] = Field(default_factory=list, description="Your own allocators.")

    @field_validator("use")
    @classmethod
    def _use(cls, v: list[str]) -> list[str]:
        if not v:
            raise ValueError("expected at least one allocator name")
        if not all(str(x).strip() for x in v):
            raise ValueError(f"an empty allocator name in {v}")
        if len(set(v)) != len(v):
            raise ValueError(f"duplicate allocator names in {v}")
        return v


class ThpSection(_Section):
    modes: list[Literal["system", "always", "madvise", "never"]] = Field(
        default_factory=lambda: ["system"],
        description="THP modes as a matrix dimension; system = leave the machine's setting alone.",
    )

    defrag: Literal["system", "always", "defer", "defer+madvise", "madvise", "never"] = Field(
        "system",
        description="THP defrag policy while a non-system mode is in force (MongoDB 8 wants defer+madvise).",
    )

    keep_server_thp: bool = Field(
        False,
        description="EXPERIMENT: preload a shim that ignores the server's prctl(PR_SET_THP_DISABLE), "
        "so the system THP mode reaches its heap (MariaDB turns THP off for itself).",
    )

    @field_validator("modes")
    @classmethod
    def _modes(cls, v: list[str]) -> list[str]:
        if not v:
            raise ValueError("expected at least one mode")
        if len(set(v)) != len(v):
            raise ValueError(f"duplicate modes in {v}")
        return v


class DatasetSection(_Section):
    tables: PositiveInt = Field(4, description="sysbench tables (sbtest1..N).")
    table_size: PositiveInt = Field(10000, description="Rows per table.")


class WarmupSection(_Section):
    scan: bool = Field(
        True, description="SELECT AVG(id) ... FORCE KEY (PRIMARY) over each table first."
    )
    min_s: NonNegFloat = Field(5, description="OLTP_RO warmup runs at least this long.")
    cap_s: NonNegFloat = Field(
        120, description="...and at most this long, warm or not (0 = scan only)."
    )
    threads: Annotated[int, Field(ge=1, le=MAX_THREADS)] = Field(
        8, description="Client threads during the OLTP_RO warmup."
    )

    @model_validator(mode="after")
    def _order(self):
        if self.cap_s and self.min_s > self.cap_s:
            raise FieldError(
                ("warmup", "min_s"), f"min_s ({self.min_s}) is larger than cap_s ({self.cap_s})"
            )
        return self


class SysbenchSection(_Section):
    workloads: list[str] = Field(
        default_factory=lambda: ["oltp_ro", "point_select"],
        description="oltp_ro (sysbench oltp_read_only) and/or point_select (oltp_point_select).",
    )
    threads: list[int] = Field(
        default_factory=lambda: [8, 64, 128, 256, 512, 1024, 1536],
        description="Client thread levels, one measured phase each.",
    )
    duration_s: float = Field(
        30,
        description="Seconds per level: whole seconds (sysbench 1.0.20 takes an integer --time), "
        "at least 3 x report_interval_s (the per-op figures need a measured window).",
    )
    report_interval_s: float = Field(
        1,
        description="sysbench interval reports (timeline): whole seconds, at most duration_s / 3 "
        "(sysbench 1.0.20 takes an integer --report-interval).",
    )
    rate: Annotated[int, Field(ge=0)] = Field(
        0, description="Target tps (0 = closed loop, as fast as possible)."
    )
    ps_mode: Literal["auto", "disable"] = Field("auto", description="sysbench --db-ps-mode.")

    @field_validator("workloads")
    @classmethod
    def _workloads(cls, v: list[str]) -> list[str]:
        if not v:
            raise ValueError("expected at least one workload")
        for w in v:
            if w not in WORKLOAD_NAMES:
                hint = did_you_mean(w, WORKLOAD_NAMES)
                raise ValueError(
                    f"unknown workload {w!r}{hint}; expected one of {', '.join(WORKLOAD_NAMES)}"
                )
        if len(set(v)) != len(v):
            raise ValueError(f"duplicate workloads in {v}")
        return v

    @field_validator("duration_s", "report_interval_s")
    @classmethod
    def _whole_seconds(cls, v: float, info: ValidationInfo) -> float:
        flag = "--time" if info.field_name == "duration_s" else "--report-interval"
        if not 1 <= v <= MAX_LEVEL_S or v != int(v):
            raise ValueError(
                f"expected whole seconds, 1 to {MAX_LEVEL_S} (sysbench 1.0.20 takes an integer {flag})"
            )
        return v

    @model_validator(mode="after")
    def _interval(self):
        # The per-op columns (CPU and context switches per query) come from the measured window:
        # from the first interval report (every client connected) to half an interval before the
        # planned end (rundir.derive.window.measured_window). It lasts duration - 1.5 x interval, and below
        # 3 intervals no report mark is left to close it.
        if self.duration_s < MIN_INTERVALS_PER_LEVEL * self.report_interval_s:
            raise FieldError(
                ("sysbench", "duration_s"),
                f"duration_s ({self.duration_s:g}) is shorter than {MIN_INTERVALS_PER_LEVEL} x "
                f"report_interval_s ({MIN_INTERVALS_PER_LEVEL * self.report_interval_s:g} s): "
                "per-op figures are measured between interval reports, from the first (all "
                "clients connected) to half an interval before the level ends, so a shorter level "
                "has no measured window and leaves them empty",
            )
        return self

    @field_validator("threads")
    @classmethod
    def _threads(cls, v: list[int]) -> list[int]:
        if not v:
            raise ValueError("expected at least one thread level")
        for t in v:
            if t <= 0 or t > MAX_THREADS:
                raise ValueError(f"thread level {t} is out of range; expected 1..{MAX_THREADS}")
        if len(set(v)) != len(v):
            raise ValueError(f"duplicate thread levels in {v}")
        return v


class IIBenchSection(_Section):
    # Types here; the ranges and the rules across fields live once, in IIBenchSpec.
    clients: int = Field(10, description="Concurrent insert clients (separate processes).")
    max_rows: int = Field(
        1_000_000,
        description="Stop after this many rows in all (>= 1; a time-only run sets max_seconds and "
        "a large max_rows).",
    )
    max_seconds: float = Field(0, description="...or after this long (0 = no time limit).")
    batch_rows: int = Field(1000, description="Rows per insert statement / insert_many.")
    secondary_indexes: int = Field(3, description="0-3 secondary indexes.")
    data_length: int = Field(10, description="Length of the data column (0-16000 characters).")
    query_clients: int = Field(
        0, description="Concurrent query clients (they query the first secondary index)."
    )

    def to_spec(self, engine: str = "innodb") -> IIBenchSpec:
        return IIBenchSpec(
            engine=engine,
            clients=self.clients,
            max_rows=self.max_rows,
            max_seconds=self.max_seconds,
            batch_rows=self.batch_rows,
            secondary_indexes=self.secondary_indexes,
            data_length=self.data_length,
            query_clients=self.query_clients,
        )

    @model_validator(mode="after")
    def _spec(self):
        try:
            self.to_spec()
        except IIBenchSettingError as e:
            raise FieldError(("iibench", e.field), e.reason, e.value) from None
        return self


class RwwSection(_Section):
    # Types here; ranges and the rules across fields live once, in RwwSpec.
    records: int = Field(
        20_000,
        description="Rows loaded, then read by every reader (Symas: 2,000,000 of 4,000 bytes).",
    )
    value_bytes: int = Field(
        4000, description="Bytes of each row's value (Symas: 4,000); at most the engine's limit."
    )
    batch_rows: int = Field(100, description="Rows per INSERT (one transaction) in the load.")
    readers: int = Field(
        16, description="Reader clients beside the one writer (Symas: 16); at least 1."
    )
    max_seconds: float = Field(
        300,
        description="Time cap of the read-while-writing level: it stops when every reader has "
        "read `records` rows or after this long (a level cut by the cap is marked in the results).",
    )
    load_max_seconds: float = Field(600, description="Time cap of the load level.")
    report_interval_s: float = Field(1.0, description="Interval reports (timeline, windows).")
    seed: int = Field(1, description="Seed of the random keys and values.")

    def to_spec(self, engine: str | None = "innodb"):
        from suites.rww.spec import RwwSpec

        return RwwSpec(
            records=self.records,
            value_bytes=self.value_bytes,
            batch_rows=self.batch_rows,
            readers=self.readers,
            max_seconds=self.max_seconds,
            load_max_seconds=self.load_max_seconds,
            report_interval_s=self.report_interval_s,
            seed=self.seed,
            engine=engine,
        )

    @model_validator(mode="after")
    def _spec(self):
        from suites.rww.spec import RwwSettingError

        # The engine's own limits are checked for each engine of the suite (Suite._rww_limits);
        # here only what is wrong whatever the engine (engine None).
        try:
            self.to_spec(None)
        except RwwSettingError as e:
            raise FieldError(("rww", e.field), e.reason, e.value) from None
        return self


class CollectSection(_Section):
    sample_interval_s: float = Field(
        1.0,
        ge=0.1,
        description="Timeline sampling period, >= 0.1 s: a sample reads /proc for every server "
        "thread (~40 ms at 1500 threads), so a shorter period measures the sampler, not the server.",
    )
    smaps_interval_s: NonNegFloat = Field(
        30,
        description="smaps_rollup (AnonHugePages) period; 0 = phase boundaries only, else >= 1 s "
        "and >= sample_interval_s: each read walks the server's page tables under its mmap lock "
        "(129 ms on 12 GB of 4 KB pages) and can stall it.",
    )
    perf: bool = Field(
        True,
        description="Allow the perf fallback for whole-process context switches when taskstats "
        "(the default source: kernel counters read over netlink, root only) is unavailable. perf "
        "counters follow every server thread and cost it throughput (15% of POINT_SELECT QPS at "
        "64 threads in one measurement; `make bench` measures it); false falls back straight to "
        "/proc, which loses exited threads.",
    )

    @model_validator(mode="after")
    def _smaps(self):
        floor = max(1.0, self.sample_interval_s)
        if self.smaps_interval_s and self.smaps_interval_s < floor:
            raise FieldError(
                ("collect", "smaps_interval_s"),
                f"expected 0 (phase boundaries only) or at least {floor:g} s (1 s and "
                "sample_interval_s): each read walks the server's page tables",
            )
        return self


class MemorySection(_Section):
    alloc_stats: bool = Field(
        True,
        description="Read the allocator's own accounting (in use, cached, mapped) at every phase "
        "boundary through a small library preloaded after the allocator (servers/shims/"
        "alloc_stats.c); it waits on a FIFO between readings and costs nothing then. MySQL family.",
    )
    idle_s: NonNegFloat = Field(
        0,
        description="An idle phase after the last level, in seconds (0 = none): no client runs "
        "while RSS and the allocator's figures are sampled, to show what it gives back and how "
        "fast (jemalloc decay, tcmalloc release, glibc trim).",
    )
    idle_sample_s: float = Field(
        2.0,
        ge=0.5,
        description="Allocator readings during the idle phase every this many seconds (>= 0.5).",
    )
    churn_cycles: Annotated[int, Field(ge=0, le=100)] = Field(
        0,
        description="Thread churn (0 = off): run the sysbench thread levels, in the order given "
        "(e.g. [8, 1536]), this many times per thread_cache_size in churn_thread_cache, then one "
        "last level at the first thread count: clients connect and leave in cycles, and RSS per "
        "cycle shows what the allocator keeps of the threads that left.",
    )
    churn_thread_cache: list[Annotated[int, Field(ge=0, le=16384)]] = Field(
        default_factory=list,
        description="thread_cache_size values (SET GLOBAL, in this order) the churn cycles run "
        "under; small lets server threads really exit and start. Empty: the server's own "
        "(thread_cache_size at the top thread level).",
    )

    @model_validator(mode="after")
    def _churn(self):
        if self.churn_thread_cache and not self.churn_cycles:
            raise FieldError(
                ("memory", "churn_thread_cache"),
                "set churn_cycles too: thread cache sizes apply to churn cycles only",
            )
        return self


class RunSection(_Section):
    repeat: Annotated[int, Field(ge=1, le=MAX_REPEAT)] = Field(
        1, description="Rounds of the whole matrix; allocator order alternates."
    )
    out: str = Field("runs", description="Directory under which run directories are created.")
    budget_s: NonNegFloat = Field(
        0,
        description="Time budget in seconds (--budget 20m). 0: exactly `repeat` rounds. Else "
        "`repeat` is the first look: after it, rounds are added while some verdict is undecided "
        "and the budget allows one more round; the 5% is spent over the planned looks "
        "(analysis/sequential.py), so adding rounds does not inflate false positives.",
    )
    baseline: str = Field(
        "glibc", description="The allocator every verdict compares with (--baseline NAME)."
    )
    min_effect_pct: Annotated[float, Field(gt=0, lt=100)] = Field(
        MIN_EFFECT_PCT,
        description="Smallest difference called faster/slower, in % (--min-effect): a "
        "significant but smaller one is 'none'.",
    )
    aa: bool = Field(
        False,
        description="Run the baseline a second time per round under the name <baseline>-aa (same "
        "library and settings): an A/A pair that measures the noise floor of the run. It must "
        "never be called different; if it is, the run says the machine is too noisy.",
    )

    @field_validator("out")
    @classmethod
    def _out(cls, v: str) -> str:
        if not v.strip():
            raise ValueError('expected a directory (e.g. "runs")')
        return v


_CLIENT_HOST = re.compile(r"^(?:[A-Za-z0-9._-]+@)?[A-Za-z0-9_][A-Za-z0-9._-]*$")


class ClientsSection(_Section):
    hosts: list[str] = Field(
        default_factory=list,
        description='Client hosts ("user@host" or an ssh_config Host alias; --client-host): '
        "sysbench levels run there over SSH (key-based, BatchMode, one shared connection) "
        "against the server over TCP at server_address. Empty: clients run on this machine "
        "over the unix socket. One host per run in this version.",
    )
    server_address: str = Field(
        "",
        description="The address of this machine the server binds (only that one) and the "
        "client host connects to; required with hosts.",
    )
    ssh_config: str = Field(
        "",
        description="An ssh_config file for the client hosts (ssh -F; relative to the suite "
        "file's directory); empty: the user's own (~/.ssh/config).",
    )
    connect_timeout_s: PositiveFloat = Field(
        10, description="How long ssh may take to reach a client host before preflight fails."
    )

    @field_validator("hosts")
    @classmethod
    def _hosts(cls, v: list[str]) -> list[str]:
        for h in v:
            if not _CLIENT_HOST.match(h):
                raise ValueError(f'expected "user@host" or a host name, got {h!r}')
        if len(set(v)) != len(v):
            raise ValueError("a client host is named twice")
        if len(v) > 1:
            raise ValueError(
                f"{len(v)} client hosts: this version drives one client host per run "
                "(split levels over hosts is not implemented)"
            )
        return v

    @field_validator("server_address")
    @classmethod
    def _address(cls, v: str) -> str:
        if not v:
            return v
        import ipaddress

        try:
            addr = ipaddress.ip_address(v)
        except ValueError:
            raise ValueError(f"expected an IP address of this machine, got {v!r}") from None
        if addr.is_loopback or addr.is_unspecified:
            raise ValueError(
                f"{v} cannot be reached from another host; name an address of this machine's "
                "network interface"
            )
        return v

    @field_validator("ssh_config")
    @classmethod
    def _ssh_config(cls, v: str, info: ValidationInfo) -> str:
        return _existing(v, info, "file") if v else v

    @model_validator(mode="after")
    def _needs_address(self):
        if self.hosts and not self.server_address:
            raise FieldError(
                ("clients", "server_address"),
                "client hosts need the address of this machine the server binds and they "
                "connect to",
            )
        return self


class Suite(_Section):
    suite: SuiteInfo = Field(default_factory=SuiteInfo)
    server: ServerSection = Field(default_factory=ServerSection)
    allocators: AllocatorsSection = Field(default_factory=AllocatorsSection)
    thp: ThpSection = Field(default_factory=ThpSection)
    dataset: DatasetSection = Field(default_factory=DatasetSection)
    warmup: WarmupSection = Field(default_factory=WarmupSection)
    sysbench: SysbenchSection = Field(default_factory=SysbenchSection)
    iibench: IIBenchSection = Field(default_factory=IIBenchSection)
    rww: RwwSection = Field(default_factory=RwwSection)
    collect: CollectSection = Field(default_factory=CollectSection)
    clients: ClientsSection = Field(default_factory=ClientsSection)
    memory: MemorySection = Field(default_factory=MemorySection)
    run: RunSection = Field(default_factory=RunSection)

    @model_validator(mode="after")
    def _churn(self):
        if self.memory.churn_cycles and self.suite.kind != "sysbench":
            raise FieldError(
                ("memory", "churn_cycles"),
                f"thread churn cycles sysbench thread levels; this suite's kind is "
                f"{self.suite.kind!r}",
            )
        return self

    @model_validator(mode="after")
    def _flavor(self):
        if self.server.flavor == "mongodb" and self.suite.kind != "iibench":
            raise FieldError(
                ("server", "flavor"),
                'MongoDB runs the iibench insert load only: set suite.kind = "iibench" '
                "(the sysbench workloads are SQL)",
            )
        if self.server.flavor == "mongodb" and self.suite.kind == "rww":
            raise FieldError(
                ("suite", "kind"), "read-while-writing runs on MySQL-family servers (SQL tables)"
            )
        if self.server.flavor == "mongodb" and self.server.engines != ["innodb"]:
            raise FieldError(
                ("server", "engines"),
                "engines are MySQL-family storage engines; MongoDB runs WiredTiger",
            )
        if self.server.flavor == "mongodb" and self.server.settings:
            raise FieldError(
                ("server", "settings"),
                "these are my.cnf lines for a MySQL-family server; MongoDB does not read them",
            )
        if self.server.flavor == "mongodb" and self.server.root:
            raise FieldError(
                ("server", "root"), "a server root runs MySQL-family servers only (not mongod)"
            )
        if self.server.root and self.server.basedir:
            raise FieldError(
                ("server", "basedir"),
                "with server.root, name the binary inside the root (server.binary), not a basedir",
            )
        return self

    @model_validator(mode="after")
    def _allocators(self):
        # Names and custom entries are checked against configs/allocators.toml here, with the file
        # and line; whether an allocator is installed is the runner's question (it detects them).
        try:
            registry = load_registry()
        except AllocatorError as e:
            raise FieldError(("allocators",), str(e)) from None
        for i, c in enumerate(self.allocators.custom):
            try:
                custom_allocator(c.model_dump(), known=registry)
            except AllocatorError as e:
                raise FieldError(("allocators", "custom", i), str(e)) from None
        names = [c.name for c in self.allocators.custom]
        if len(set(names)) != len(names):
            dup = next(n for n in names if names.count(n) > 1)
            raise FieldError(("allocators", "custom"), f"custom allocator {dup!r} is defined twice")
        known = ["all", *registry, *names]
        if self.run.baseline not in known or self.run.baseline == "all":
            raise FieldError(
                ("run", "baseline"),
                f"unknown allocator {self.run.baseline!r}{did_you_mean(self.run.baseline, known)}",
            )
        for name in self.allocators.use:
            if name not in known:
                raise FieldError(
                    ("allocators", "use"),
                    f"unknown allocator {name!r}{did_you_mean(name, known)}; known: "
                    + ", ".join(known),
                )
        return self

    @model_validator(mode="after")
    def _client_hosts(self):
        if self.clients.hosts and (
            self.suite.kind != "sysbench" or self.server.flavor == "mongodb"
        ):
            raise FieldError(
                ("clients", "hosts"),
                "client hosts run sysbench levels on MySQL-family servers only in this version",
            )
        return self

    @model_validator(mode="after")
    def _connections(self):
        if self.server.flavor == "mongodb" or "max_connections" not in self.server.settings:
            return self
        limit = mycnf_int(self.server.settings["max_connections"])
        loc, what = {
            "iibench": (("iibench", "clients"), "clients + query_clients"),
            "rww": (("rww", "readers"), "readers + 1 writer"),
        }.get(self.suite.kind, (("sysbench", "threads"), "thread level"))
        if limit is not None and self.max_threads > limit - OWN_CONNECTIONS:
            raise FieldError(
                loc,
                f"{what} {self.max_threads} is above the server's connection limit "
                f"(server.settings.max_connections = {limit}, of which {OWN_CONNECTIONS} are kept "
                "for our own monitoring); raise max_connections or drop the setting to size it "
                "automatically",
            )
        return self

    @model_validator(mode="after")
    def _packet(self):
        # A MySQL insert batch is one statement: past max_allowed_packet every batch would fail.
        if self.suite.kind != "iibench" or self.server.flavor == "mongodb":
            return self
        i = self.iibench
        need = insert_statement_bytes(i.batch_rows, i.data_length)
        given = self.server.settings.get("max_allowed_packet")
        limit = mycnf_int(given) if given is not None else DEFAULT_MAX_ALLOWED_PACKET
        if limit is not None and need > limit:
            raise FieldError(
                ("iibench", "batch_rows"),
                f"one insert of {i.batch_rows} rows with data_length {i.data_length} takes up to "
                f"{need:,} bytes, above the server's max_allowed_packet ({limit:,} bytes"
                f"{'' if given is not None else ', the default'}); lower batch_rows or "
                "data_length, or set server.settings.max_allowed_packet",
            )
        return self

    @model_validator(mode="after")
    def _rww_limits(self):
        # Per engine: a row larger than the engine stores, or a load batch above the packet limit,
        # would fail at the first CREATE TABLE or INSERT, after servers had started.
        if self.suite.kind != "rww":
            return self
        from suites.rww.spec import RwwSettingError, load_statement_bytes

        for engine in self.server.engines:
            try:
                self.rww.to_spec(engine)
            except RwwSettingError as e:
                raise FieldError(("rww", e.field), e.reason, e.value) from None
        r = self.rww
        need = load_statement_bytes(r.batch_rows, r.value_bytes)
        given = self.server.settings.get("max_allowed_packet")
        limit = mycnf_int(given) if given is not None else DEFAULT_MAX_ALLOWED_PACKET
        if limit is not None and need > limit:
            raise FieldError(
                ("rww", "batch_rows"),
                f"one load INSERT of {r.batch_rows} rows of {r.value_bytes} bytes takes up to "
                f"{need:,} bytes, above the server's max_allowed_packet ({limit:,} bytes); "
                "lower batch_rows or set server.settings.max_allowed_packet",
            )
        return self

    @property
    def max_threads(self) -> int:
        if self.suite.kind == "rww":
            return self.rww.readers + 1
        if self.suite.kind == "iibench":
            return self.iibench.clients + self.iibench.query_clients
        return max(self.sysbench.threads)

    def as_dict(self) -> dict[str, Any]:
        d = self.model_dump(mode="json")
        if self.clients == ClientsSection():
            # Clients on this machine, as before [clients] existed: recorded as runs always were,
            # so --resume and compare see no difference with runs written before it.
            d.pop("clients")
        return d


class LoadedSuite(BaseModel):
    """A validated suite with where it came from."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)
    path: str
    sha256: str
    suite: Suite


def parse_suite(text: str, path: str = "<suite>", base_dir: str | Path | None = None) -> Suite:
    """Validate suite TOML text; SuiteError with file:line, field and expected form on any error.

    Relative paths in it (server.binary, server.basedir, allocators.custom.library) are taken from
    `base_dir`, by default the directory of `path`.
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise SuiteError(one_line(f"{path}: not valid TOML: {e}")) from None
    except RecursionError:
        raise SuiteError(one_line(f"{path}: not valid TOML: nested too deeply")) from None
    base = Path(base_dir) if base_dir is not None else Path(path).parent
    try:
        return Suite.model_validate(data, context={"base_dir": base})
    except ValidationError as e:
        raise SuiteError(
            first_error(e, lambda err: describe_error(err, text, path, Suite))
        ) from None


def suite_from_dict(data: Any, where: str) -> Suite:
    """A suite recorded as a dict (a run's manifest), validated like a file; `where` names it."""
    try:
        return Suite.model_validate(data)
    except ValidationError as e:
        raise SuiteError(
            first_error(e, lambda err: f"{where}: {format_loc(reason(err)[0])}: {reason(err)[1]}")
        ) from None


def load_suite(path: str | Path) -> LoadedSuite:
    p = Path(path)
    if not p.exists():
        raise SuiteError(
            one_line(f"{p}: no such suite file (the shipped suites are in configs/suites/)")
        )
    if not p.is_file():
        raise SuiteError(one_line(f"{p}: not a file"))
    try:
        raw = p.read_bytes()
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise SuiteError(one_line(f"{p}: not UTF-8 text")) from None
    except OSError as e:
        raise SuiteError(one_line(f"{p}: cannot read: {e.strerror}")) from None
    suite = parse_suite(text, str(p))
    require_workload(tomllib.loads(text), str(p))
    return LoadedSuite(path=str(p), sha256=hashlib.sha256(raw).hexdigest(), suite=suite)


def require_workload(data: dict, path: str) -> None:
    """A suite FILE must say what to run: an empty file, or one without the section of its kind
    ([sysbench] or [iibench]), would otherwise run the default matrix (seven 30 s levels per
    allocator: hours) that nobody asked for."""
    if not data:
        raise SuiteError(
            f"{path}: empty suite file; copy one from configs/suites/ (template.toml lists every "
            "setting)"
        )
    info = data.get("suite")
    kind = info.get("kind", "sysbench") if isinstance(info, dict) else "sysbench"
    if not isinstance(data.get(kind), dict):
        raise SuiteError(
            f"{path}: no [{kind}] section: the suite names no workload to run; add one "
            "(configs/suites/template.toml shows its settings)"
        )


def apply_overrides(suite: Suite, **opts) -> Suite:
    """CLI options override the file; the result is validated like the file was, and an error
    names the option ("--duration 2.5: sysbench.duration_s: ...")."""
    data = suite.as_dict()
    kind = data["suite"]["kind"]
    given: dict[str, tuple[str, Any]] = {}  # option -> (shown value, the fields it sets)

    def put(flag: str, value: Any, *fields: tuple[str, str]) -> None:
        shown = ",".join(map(str, value)) if isinstance(value, list) else str(value)
        given[flag] = (shown, fields)

    if opts.get("allocators") is not None:
        data["allocators"]["use"] = opts["allocators"]
        put("--allocators", opts["allocators"], ("allocators", "use"))
    if opts.get("threads") is not None:
        if kind in ("iibench", "rww"):
            what = "[iibench] clients" if kind == "iibench" else "[rww] readers"
            raise SuiteError(f"--threads applies to sysbench suites; set {what} instead")
        data["sysbench"]["threads"] = opts["threads"]
        put("--threads", opts["threads"], ("sysbench", "threads"))
    if opts.get("engines") is not None:
        data["server"]["engines"] = opts["engines"]
        put("--engines", opts["engines"], ("server", "engines"))
    if opts.get("duration") is not None:
        field = {"iibench": ("iibench", "max_seconds"), "rww": ("rww", "max_seconds")}.get(
            kind, ("sysbench", "duration_s")
        )
        data[field[0]][field[1]] = opts["duration"]
        put("--duration", opts["duration"], field)
    if opts.get("warmup") is not None:
        data["warmup"]["cap_s"] = opts["warmup"]
        data["warmup"]["min_s"] = min(data["warmup"]["min_s"], opts["warmup"])
        put("--warmup", opts["warmup"], ("warmup", "cap_s"), ("warmup", "min_s"))
    if opts.get("repeat") is not None:
        data["run"]["repeat"] = opts["repeat"]
        put("--repeat", opts["repeat"], ("run", "repeat"))
    if opts.get("thp") is not None:
        data["thp"]["modes"] = opts["thp"]
        put("--thp", opts["thp"], ("thp", "modes"))
    if opts.get("server") is not None:
        if opts["server"].startswith("fetched:"):  # --server fetched:SPEC
            data["server"]["fetched"] = opts["server"].removeprefix("fetched:")
            data["server"]["binary"] = data["server"]["basedir"] = ""
            put("--server", opts["server"], ("server", "fetched"))
        else:
            data["server"].pop("fetched", None)
            data["server"]["binary"] = opts["server"]
            put("--server", opts["server"], ("server", "binary"))
    for opt, key in (
        ("budget", "budget_s"),
        ("baseline", "baseline"),
        ("min_effect", "min_effect_pct"),
    ):
        if opts.get(opt) is not None:
            data["run"][key] = opts[opt]
            put("--" + opt.replace("_", "-"), opts[opt], ("run", key))
    if opts.get("server_root") is not None:
        data["server"]["root"] = opts["server_root"]
        put("--server-root", opts["server_root"], ("server", "root"))
    if opts.get("client_host") is not None:
        data.setdefault("clients", {})["hosts"] = [opts["client_host"]]
        put("--client-host", opts["client_host"], ("clients", "hosts"))
    if opts.get("out") is not None:
        data["run"]["out"] = opts["out"]
        put("--out", opts["out"], ("run", "out"))

    def describe(err: dict) -> str:
        loc, msg = reason(err)
        field = format_loc(loc)
        for flag, (shown, fields) in given.items():
            if any(tuple(loc[:2]) == f for f in fields):
                if len(fields) > 1:  # e.g. --warmup sets cap_s and min_s: name what was given
                    return f"{flag} {shown}: {msg}"
                return f"{flag} {shown}: {field}: {msg}"
        return f"with {' '.join(f'{k} {v}' for k, (v, _) in given.items())}: {field}: {msg}"

    try:
        # Paths given on the command line are relative to where the command runs; the file's were
        # made absolute when it was loaded.
        return Suite.model_validate(
            data, context={"base_dir": Path.cwd(), "base_name": "the current directory"}
        )
    except ValidationError as e:
        raise SuiteError(first_error(e, describe)) from None


def template_settings() -> list[tuple[str, str, Any, str]]:
    """(section, key, default, help) for every setting: the template and --help are built from it."""
    out = []
    for section, field in Suite.model_fields.items():
        model = field.annotation
        for key, f in model.model_fields.items():
            default = f.get_default(call_default_factory=True)
            out.append((section, key, default, f.description or ""))
    return out
