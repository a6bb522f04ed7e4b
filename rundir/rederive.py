"""`mallocsweep report RUN --rederive`: derive every cell's rows again from its raw record.

For each finished cell with raw/<cell>.json, the rows and window records are derived with today's
rundir.derive and written to derived/<cell>.json; results.csv is rebuilt from them. Nothing under
cells/ or raw/ is touched, so running it again (after another fix) starts from the same records.
A cell without a usable raw record (a format-1/2 run, a damaged record, a special file, the record
of another life, one that lost the phases its levels need) keeps its recorded figures, named;
a cell whose derivation fails gets no rows and the error, and the others go on.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from rundir.derive.levels import derive_cell
from rundir.errors import RunDirError
from rundir.format import MANIFEST, RAW_DIR
from rundir.migrations import check_version
from rundir.raw_identity import identity_problem, phases_problem
from rundir.records import Tool, check_raw
from rundir.regular import kind_of, read_regular
from rundir.write import RunDir, now_iso

DERIVED = "derived"  # rows derived again from the raw record
KEPT = "kept"  # no usable raw record: the recorded figures stay
FAILED = "failed"  # the derivation raised: no rows, derive_error says why


@dataclass
class Rederived:
    cell: str
    outcome: str  # DERIVED, KEPT or FAILED
    note: str  # one line for the user
    rows: int = 0
    changed: int = 0  # rows that differ from what the cell had before

    def line(self) -> str:
        return f"{self.cell}: {self.outcome}: {self.note}"


def _differs(a: dict, b: dict) -> bool:
    keys = set(a) | set(b)
    return any(a.get(k) != b.get(k) for k in keys)


def rederive_run(path: Path) -> list[Rederived]:
    """Derive every finished cell of the run at `path` again; one Rederived per cell, in order.
    RunDirError (one line, naming the file) when the run cannot be read or written."""
    try:
        return _rederive(Path(path))
    except OSError as e:
        where = e.filename or path
        raise RunDirError(
            f"{where}: cannot write the re-derived figures: {e.strerror or e}; nothing recorded "
            "was changed"
        ) from None


def _rederive(path: Path) -> list[Rederived]:
    rd = RunDir(path)
    version = check_version(rd.read_manifest(), str(path / MANIFEST))
    out: list[Rederived] = []
    for rec in sorted(rd.finished_cells().values(), key=lambda r: r["cell"]["index"]):
        cid = rec["cell"]["id"]
        raw_path = rd.raw_file(cid)
        if raw_path.exists() and not raw_path.is_file():
            kind = kind_of(raw_path.stat().st_mode)
            out.append(
                Rederived(
                    cid,
                    KEPT,
                    f"raw record unusable ({RAW_DIR}/{raw_path.name} is {kind}, not a regular "
                    "file: refused); keeps its recorded figures",
                )
            )
            continue
        if not raw_path.is_file():
            why = (
                f"a format-{version} run records no raw data"
                if version < 3
                else f"no raw record ({raw_path.name} missing)"
            )
            out.append(Rederived(cid, KEPT, f"{why}; keeps its recorded figures"))
            continue
        try:
            raw = json.loads(read_regular(raw_path))
            if not isinstance(raw, dict):
                raise RunDirError(f"{raw_path}: not a JSON object; the file is damaged")
            raw = check_raw(raw, str(raw_path))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, RunDirError) as e:
            first = str(e).splitlines()[0]
            out.append(Rederived(cid, KEPT, f"raw record unusable ({first}); keeps its figures"))
            continue
        # Never derive one life's figures under another's name, nor rows from a record that
        # lost what they are derived from (rundir/raw_identity.py)
        problem = identity_problem(raw, rec["cell"]) or phases_problem(raw, rec["cell"])
        if problem:
            out.append(
                Rederived(
                    cid,
                    KEPT,
                    f"raw record unusable ({RAW_DIR}/{raw_path.name}: {problem}); keeps its "
                    "recorded figures",
                )
            )
            continue
        try:
            before = rd.rows_of(rec)
        except RunDirError:  # an unreadable derived/ file: this derivation replaces it
            before = rec["rows"]
        try:
            derived = derive_cell(raw)
        except Exception as e:  # noqa: BLE001 - one cell's derivation never stops the others
            first = str(e).splitlines()[0] if str(e) else ""
            why = f"{type(e).__name__}: {first}"[:300]
            rd.write_derived(cid, _payload(cid, [], [], why))
            out.append(Rederived(cid, FAILED, f"figures could not be derived: {why}"))
            continue
        rd.write_derived(cid, _payload(cid, derived.rows, derived.windows, None))
        changed = sum(
            1 for i, row in enumerate(derived.rows) if i >= len(before) or _differs(row, before[i])
        ) + max(0, len(before) - len(derived.rows))
        note = f"{len(derived.rows)} row(s), {changed} changed"
        out.append(Rederived(cid, DERIVED, note, len(derived.rows), changed))
    if any(r.outcome != KEPT for r in out):
        rd.rebuild_results()
    return out


def _payload(cell: str, rows: list, windows: list, error: str | None) -> dict:
    return {
        "cell": cell,
        "derived_at": now_iso(),
        "tool": Tool.installed().model_dump(),
        "derive_error": error,
        "rows": rows,
        "windows": windows,
    }
