"""Typed records of manifest.json: its top level, the figures' meaning, and one cell's entry.

Only the keys every reader relies on are declared; the rest (host, suite, collectors' evidence)
stays free-form and passes through unchanged (`extra="allow"`). The writer validates the manifest
through `Manifest` before each write and the reader after migrating, so both sides agree on the
same declaration.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rundir.errors import RunDirError
from rundir.format import CELL_STATUSES, FORMAT_VERSION, RAW_VERSION, SPAN_WINDOW


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


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RawSnap(_Strict):
    """The server process at one moment; t_s in seconds since the collectors started. Counters
    (CPU, context switches) are whole-process totals; ctx_* from the cell's ctxsw_source."""

    t_s: float
    rss_kb: int | None = None
    vsz_kb: int | None = None
    hwm_kb: int | None = None
    rss_anon_kb: int | None = None
    threads: int | None = None
    cpu_user_s: float | None = None
    cpu_sys_s: float | None = None
    ctx_voluntary: int | None = None
    ctx_involuntary: int | None = None
    thp_enabled: int | None = None
    anon_huge_kb: int | None = None
    live: bool = True  # False: the process was gone, these are its last known values
    pre_exec: bool = False  # still the launch gate: counters valid, memory the shell's


class RawBoundary(_Strict):
    """A phase boundary: the process, /proc/vmstat's thp_* counters, the server's status."""

    snap: RawSnap
    vmstat: dict[str, int] = Field(default_factory=dict)
    status: dict[str, float] | None = None


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


class RawLevel(_Strict):
    """One level as the workload reported it."""

    phase: str
    workload: str
    threads: int
    status: str
    error: str | None = None
    report: dict[str, Any]  # the workload's figures (suites.workload.LevelResult.row())
    # [t_s in the workload's clock, operations/s over the interval, our mark's t_s or None]
    intervals: list[tuple[float, float, float | None]] = Field(default_factory=list)
    extra: dict[str, Any] = Field(default_factory=dict)  # e.g. sysbench's latency histogram


class RawClock(_Strict):
    """What the workload said about its level's clock (rundir.derive.window.measured_window)."""

    duration_s: float | None = None
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
    # The allocator's own accounting, one reading per phase boundary and idle sample
    # (suites.alloc_memory); absent when [memory] alloc_stats is off or the family cannot preload.
    alloc_readings: list[dict[str, Any]] | None = None


def check_raw(raw: dict, where: str) -> None:
    """RunDirError naming the first field of a raw record that does not fit CellRaw."""
    if raw.get("raw_version") != RAW_VERSION:
        raise RunDirError(
            f"{where}: raw_version {raw.get('raw_version')!r} (this mallocsweep reads "
            f"{RAW_VERSION}); upgrade mallocsweep to read it"
        )
    _validate(CellRaw, raw, where)


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
    "Cell",
    "CellRaw",
    "Figures",
    "Manifest",
    "RawBoundary",
    "RawClock",
    "RawLevel",
    "RawPhase",
    "RawSnap",
    "Tool",
    "check_manifest",
    "check_raw",
]
