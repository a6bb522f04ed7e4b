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
from rundir.format import CELL_STATUSES, FORMAT_VERSION, SPAN_WINDOW


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


def check_manifest(manifest: dict, where: str) -> None:
    """RunDirError naming the first field that does not fit the declared records."""
    try:
        Manifest.model_validate(manifest)
    except ValidationError as e:
        err = e.errors()[0]
        field = ".".join(str(p) for p in err["loc"])
        raise RunDirError(
            f"{where}: field {field}: {err['msg']} (got {err.get('input')!r:.60}); the file is damaged"
        ) from None


__all__ = ["Cell", "Figures", "Manifest", "Tool", "check_manifest"]
