"""Upgrading a run directory read from disk to the current format, one version at a time.

Modelled on asv's results.py (`api_version` + `update_to_N`) and pyperf's format history: each
format N+1 has one function `update_to_<N+1>` that takes what a format-N reader would see and
returns what the format-(N+1) writer would have written, saying in its doc what changed. The
upgrade happens in memory only; a run directory on disk is never rewritten.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from rundir.errors import RunDirError
from rundir.format import FORMAT_VERSION, RESULTS_COLUMNS, SPAN_LEVEL, SPAN_WINDOW


@dataclass
class RawRun:
    """manifest.json and results.csv as read (rows typed), before the reader builds a Run."""

    manifest: dict
    columns: list[str] = field(default_factory=list)
    rows: list[dict] = field(default_factory=list)


def update_to_2(raw: RawRun) -> RawRun:
    """Format 1 -> 2.

    Format 1 changed meaning without changing its number: runs recorded before 2026-11-22 hold
    whole-level CPU and context switches in cpu_user_s/cpu_sys_s/ctxsw_*/cpu_us_per_op/
    ctxsw_per_op, later ones the same figures over the level's measured window (and the columns
    window_s, window_ops, ctxsw_source, cpu_s_per_1m_ops, ctxsw_per_1m_ops, threads_connected,
    thp_fault_fallback with them). Readers told the two apart by looking for window_s. Format 2
    records it: figures.cpu_ctxsw_span is "window" or "level".

    Also: ctxsw_source per row is filled from the cell's record where the row lacks it (the
    oldest runs kept it in cells[].collectors only); every current results column exists in every
    row (None where the run did not record it); tool.version is kept as written (format-1 runs say
    "0.1.0", a constant that never followed the package).
    """
    manifest = dict(raw.manifest)
    span = SPAN_WINDOW if "window_s" in raw.columns else SPAN_LEVEL
    manifest["figures"] = {**(manifest.get("figures") or {}), "cpu_ctxsw_span": span}
    cells = {str(c.get("id")): c for c in manifest.get("cells") or [] if isinstance(c, dict)}
    rows = []
    for row in raw.rows:
        row = dict(row)
        if not row.get("ctxsw_source"):
            cell = cells.get(str(row.get("cell")), {})
            src = cell.get("ctxsw_source") or (cell.get("collectors") or {}).get("ctxsw_source")
            row["ctxsw_source"] = str(src) if src else ""
        for col in RESULTS_COLUMNS:
            row.setdefault(col, "" if col == "ctxsw_source" else None)
        rows.append(row)
    columns = list(raw.columns) + [c for c in RESULTS_COLUMNS if c not in raw.columns]
    # A format-1 run directory with no results.csv yet (no cell finished) has no columns at all.
    if not raw.columns:
        columns = []
    return RawRun(manifest=manifest, columns=columns, rows=rows)


def update_to_3(raw: RawRun) -> RawRun:
    """Format 2 -> 3.

    Format 3 keeps what each cell observed in raw/<cell>.json and derives its results rows from
    it (rundir.derive), so `report --rederive` can derive them again after a fix. Runs of format
    1 and 2 have no raw records: figures.raw_records is False (their figures are as recorded, and
    --rederive keeps them), and every cell gets derive_error None (their figures were computed
    during the run; an error there had aborted the run instead). Results columns are unchanged.
    """
    manifest = dict(raw.manifest)
    manifest["figures"] = {**(manifest.get("figures") or {}), "raw_records": False}
    manifest["cells"] = [
        {**c, "derive_error": c.get("derive_error")} if isinstance(c, dict) else c
        for c in manifest.get("cells") or []
    ]
    return RawRun(manifest=manifest, columns=list(raw.columns), rows=list(raw.rows))


# format N -> the function upgrading a format-N run to N+1
MIGRATIONS: dict[int, Callable[[RawRun], RawRun]] = {1: update_to_2, 2: update_to_3}


def check_version(manifest: dict, where: str) -> int:
    """The manifest's format version, if this mallocsweep can read it; else RunDirError (a newer
    format says to upgrade mallocsweep). Checked before anything else of the run is read."""
    version = manifest.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise RunDirError(
            f"{where}: format_version {version!r} is not a mallocsweep run format "
            f"(expected 1..{FORMAT_VERSION})"
        )
    if version > FORMAT_VERSION:
        raise RunDirError(
            f"{where}: written by a newer mallocsweep (run format {version}, this one reads up to "
            f"{FORMAT_VERSION}); upgrade mallocsweep to read it"
        )
    return version


def migrate(raw: RawRun, where: str) -> RawRun:
    """The run in the current format. RunDirError for an unknown or newer format."""
    version = on_disk = check_version(raw.manifest, where)
    while version < FORMAT_VERSION:
        step = MIGRATIONS.get(version)
        if step is None:  # a bug of ours: every version below the current one has a step
            raise RunDirError(f"{where}: no migration from run format {version}")
        raw = step(raw)
        version += 1
        raw.manifest["format_version"] = version
    # Said in the report's metadata: figures of an upgraded run are as its format recorded them.
    raw.manifest["format_version_on_disk"] = on_disk
    return raw
