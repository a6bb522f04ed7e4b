"""Suite files: every setting declared once, with its help and default; bad values stop the run.

A suite is a TOML file (see configs/suites/template.toml, which lists every setting). Validation is
strict: unknown keys are errors (with a "did you mean"), wrong types and out-of-range values are
errors, nothing is silently clamped. Every error names the file, the line where it can be found, the
field, and the expected form — as one line, via SuiteError.
"""

from __future__ import annotations

import difflib
import hashlib
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
    field_validator,
    model_validator,
)

from suites.errors import SuiteError

WORKLOAD_NAMES = ("oltp_ro", "point_select")
THP_MODES = ("system", "always", "madvise", "never")
FLAVORS = ("mariadb", "mysql", "percona", "mongodb")
MAX_THREADS = 100_000

NonNegFloat = Annotated[float, Field(ge=0)]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SuiteInfo(_Section):
    name: str = Field("suite", description="Names the run directory; letters, digits, - and _.")
    description: str = Field("", description="One line shown in the report.")
    kind: Literal["sysbench", "iibench"] = Field(
        "sysbench",
        description="sysbench: thread sweep of OLTP_RO/POINT_SELECT; iibench: insert load.",
    )

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
    binary: str = Field(
        "", description="Server binary (mariadbd, mysqld, mongod); empty = default."
    )
    basedir: str = Field(
        "", description="A MySQL/Percona install directory with bin/mysqld inside."
    )
    buffer_pool_mb: PositiveInt = Field(256, description="innodb_buffer_pool_size in MiB.")
    cache_gb: PositiveFloat = Field(1.0, description="MongoDB WiredTiger cache size in GiB.")
    settings: dict[str, str | int | float | bool] = Field(
        default_factory=dict, description="Extra my.cnf [mysqld] settings, as written in my.cnf."
    )
    startup_timeout_s: PositiveFloat = Field(
        180, description="How long a server may take to accept connections."
    )


class CustomAllocator(_Section):
    name: str = Field(description="Name used in tables and --allocators.")
    library: str = Field(description="Absolute path of the allocator's shared object (preloaded).")
    env: dict[str, str] = Field(
        default_factory=dict, description="Extra environment for the server."
    )
    tunables: list[str] = Field(default_factory=list, description="GLIBC_TUNABLES items, appended.")
    description: str = ""

    @field_validator("library")
    @classmethod
    def _library(cls, v: str) -> str:
        if not v.startswith("/"):
            raise ValueError(f"expected an absolute path, got {v!r}")
        if not Path(v).is_file():
            raise ValueError(f"no such file: {v}")
        return v


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
    threads: PositiveInt = Field(8, description="Client threads during the OLTP_RO warmup.")

    @model_validator(mode="after")
    def _order(self):
        if self.cap_s and self.min_s > self.cap_s:
            raise ValueError(f"min_s ({self.min_s}) is larger than cap_s ({self.cap_s})")
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
    duration_s: PositiveFloat = Field(30, description="Seconds per level.")
    report_interval_s: PositiveFloat = Field(1, description="sysbench interval reports (timeline).")
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
                hint = _did_you_mean(w, WORKLOAD_NAMES)
                raise ValueError(
                    f"unknown workload {w!r}{hint}; expected one of {', '.join(WORKLOAD_NAMES)}"
                )
        if len(set(v)) != len(v):
            raise ValueError(f"duplicate workloads in {v}")
        return v

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
    clients: PositiveInt = Field(10, description="Concurrent insert clients (separate processes).")
    max_rows: Annotated[int, Field(ge=0)] = Field(
        1_000_000, description="Stop after this many rows in all (0 = no limit)."
    )
    max_seconds: NonNegFloat = Field(0, description="Stop after this long (0 = no limit).")
    batch_rows: PositiveInt = Field(1000, description="Rows per insert statement / insert_many.")
    secondary_indexes: Annotated[int, Field(ge=0, le=3)] = Field(
        3, description="0-3 secondary indexes."
    )
    data_length: Annotated[int, Field(ge=0)] = Field(10, description="Length of the data column.")
    query_clients: Annotated[int, Field(ge=0)] = Field(0, description="Concurrent query clients.")

    @model_validator(mode="after")
    def _stop(self):
        if self.max_rows == 0 and self.max_seconds == 0:
            raise ValueError("max_rows and max_seconds are both 0: the load would never stop")
        return self


class CollectSection(_Section):
    sample_interval_s: PositiveFloat = Field(1.0, description="Timeline sampling period.")
    smaps_interval_s: NonNegFloat = Field(
        30,
        description="smaps_rollup (AnonHugePages) period; 0 = phase boundaries only. It is costly.",
    )
    perf: bool = Field(
        True, description="Whole-process context switches from perf software counters."
    )


class RunSection(_Section):
    repeat: PositiveInt = Field(
        1, description="Rounds of the whole matrix; allocator order alternates."
    )
    out: str = Field("runs", description="Directory under which run directories are created.")


class Suite(_Section):
    suite: SuiteInfo = Field(default_factory=SuiteInfo)
    server: ServerSection = Field(default_factory=ServerSection)
    allocators: AllocatorsSection = Field(default_factory=AllocatorsSection)
    thp: ThpSection = Field(default_factory=ThpSection)
    dataset: DatasetSection = Field(default_factory=DatasetSection)
    warmup: WarmupSection = Field(default_factory=WarmupSection)
    sysbench: SysbenchSection = Field(default_factory=SysbenchSection)
    iibench: IIBenchSection = Field(default_factory=IIBenchSection)
    collect: CollectSection = Field(default_factory=CollectSection)
    run: RunSection = Field(default_factory=RunSection)

    @model_validator(mode="after")
    def _connections(self):
        limit = self.server.settings.get("max_connections")
        if limit is not None and self.suite.kind == "sysbench":
            top = max(self.sysbench.threads)
            if not isinstance(limit, int) or top > limit - 10:
                raise ValueError(
                    f"thread level {top} is above the server's connection limit "
                    f"(server.settings.max_connections = {limit}, and a few are kept for our own "
                    "monitoring); raise max_connections or drop the setting to size it automatically"
                )
        return self

    @property
    def max_threads(self) -> int:
        if self.suite.kind == "iibench":
            return self.iibench.clients + self.iibench.query_clients
        return max(self.sysbench.threads)

    def as_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class LoadedSuite(BaseModel):
    """A validated suite with where it came from."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)
    path: str
    sha256: str
    suite: Suite


def _did_you_mean(word: str, choices) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _fields_of(model: type[BaseModel], loc: tuple) -> list[str]:
    """The allowed keys at `loc` (for a "did you mean" on an unknown key)."""
    for part in loc:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(part)
        if field is None:
            return []
        ann = field.annotation
        inner = getattr(ann, "__args__", None)
        candidates = [ann, *(inner or ())]
        nxt = next(
            (c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)), None
        )
        if nxt is None:
            return []
        model = nxt
    return list(model.model_fields)


def _find_line(text: str, loc: tuple) -> int | None:
    """Best-effort line number of a field: the key under its [table] header."""
    keys = [p for p in loc if isinstance(p, str)]
    if not keys:
        return None
    lines = text.splitlines()
    section, key = (keys[0], keys[-1]) if len(keys) > 1 else (None, keys[0])
    in_section = section is None
    for i, line in enumerate(lines, 1):
        s = line.strip()
        header = re.match(r"^\[\[?\s*([A-Za-z0-9_.-]+)\s*\]\]?", s)
        if header:
            name = header.group(1)
            if section is None and name == key:
                return i
            in_section = section is None or name == section or name.startswith(section + ".")
            if section is not None and name == section and len(keys) == 1:
                return i
            continue
        if in_section and re.match(rf"^{re.escape(key)}\s*=", s):
            return i
    if section is not None:
        for i, line in enumerate(lines, 1):
            if re.match(rf"^\[\[?\s*{re.escape(section)}\s*\]\]?", line.strip()):
                return i
    return None


def _format_loc(loc: tuple) -> str:
    out = ""
    for p in loc:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def _describe(err: dict, text: str, path: str) -> str:
    loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
    # Literal errors carry the choices; unknown keys get a suggestion.
    kind = err["type"]
    line = _find_line(text, loc)
    where = f"{path}:{line}" if line else path
    field = _format_loc(loc) or "(top level)"
    if kind == "extra_forbidden":
        allowed = _fields_of(Suite, loc[:-1])
        hint = _did_you_mean(str(loc[-1]), allowed)
        expected = f"; allowed here: {', '.join(allowed)}" if allowed else ""
        return f"{where}: unknown setting {field}{hint}{expected}"
    msg = err["msg"]
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
    value = err.get("input")
    shown = "" if isinstance(value, dict | list) or value is None else f" (got {value!r})"
    return f"{where}: {field}: {msg}{shown}"


def parse_suite(text: str, path: str = "<suite>") -> Suite:
    """Validate suite TOML text; SuiteError with file:line, field and expected form on any error."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise SuiteError(f"{path}: not valid TOML: {e}") from None
    try:
        return Suite.model_validate(data)
    except ValidationError as e:
        errs = e.errors(include_url=False)
        first = _describe(errs[0], text, path)
        more = (
            f" (and {len(errs) - 1} more error{'s' if len(errs) > 2 else ''})"
            if len(errs) > 1
            else ""
        )
        raise SuiteError(first + more) from None


def load_suite(path: str | Path) -> LoadedSuite:
    p = Path(path)
    if not p.exists():
        raise SuiteError(f"{p}: no such suite file (the shipped suites are in configs/suites/)")
    if not p.is_file():
        raise SuiteError(f"{p}: not a file")
    try:
        raw = p.read_bytes()
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise SuiteError(f"{p}: not UTF-8 text") from None
    except OSError as e:
        raise SuiteError(f"{p}: cannot read: {e.strerror}") from None
    return LoadedSuite(
        path=str(p), sha256=hashlib.sha256(raw).hexdigest(), suite=parse_suite(text, str(p))
    )


def apply_overrides(suite: Suite, **opts) -> Suite:
    """CLI options override the file; the result is validated like the file was ("--threads" etc.)."""
    data = suite.as_dict()
    flag = {}
    if opts.get("allocators") is not None:
        data["allocators"]["use"] = opts["allocators"]
        flag["allocators"] = "--allocators"
    if opts.get("threads") is not None:
        if data["suite"]["kind"] == "iibench":
            raise SuiteError("--threads applies to sysbench suites; set [iibench] clients instead")
        data["sysbench"]["threads"] = opts["threads"]
        flag["sysbench"] = "--threads"
    if opts.get("duration") is not None:
        if data["suite"]["kind"] == "iibench":
            data["iibench"]["max_seconds"] = opts["duration"]
        else:
            data["sysbench"]["duration_s"] = opts["duration"]
    if opts.get("warmup") is not None:
        data["warmup"]["cap_s"] = opts["warmup"]
        data["warmup"]["min_s"] = min(data["warmup"]["min_s"], opts["warmup"])
    if opts.get("repeat") is not None:
        data["run"]["repeat"] = opts["repeat"]
    if opts.get("thp") is not None:
        data["thp"]["modes"] = opts["thp"]
    if opts.get("server") is not None:
        data["server"]["binary"] = opts["server"]
    if opts.get("out") is not None:
        data["run"]["out"] = opts["out"]
    try:
        return Suite.model_validate(data)
    except ValidationError as e:
        err = e.errors(include_url=False)[0]
        msg = err["msg"].removeprefix("Value error, ")
        loc = _format_loc(tuple(err["loc"]))
        value = err.get("input")
        shown = "" if isinstance(value, dict | list) else f" (got {value!r})"
        raise SuiteError(f"command-line option for {loc}: {msg}{shown}") from None


def template_settings() -> list[tuple[str, str, Any, str]]:
    """(section, key, default, help) for every setting: the template and --help are built from it."""
    out = []
    for section, field in Suite.model_fields.items():
        model = field.annotation
        for key, f in model.model_fields.items():
            default = f.get_default(call_default_factory=True)
            out.append((section, key, default, f.description or ""))
    return out
