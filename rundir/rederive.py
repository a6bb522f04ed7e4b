"""`mallocsweep report RUN --rederive`: derive every cell's rows again from its raw record.

For each finished cell with raw/<cell>.json, the rows and window records are derived with today's
rundir.derive and written to derived/<cell>.json; results.csv is rebuilt from them. Nothing under
cells/ or raw/ is touched, so running it again (after another fix) starts from the same records.
A cell without a usable raw record (a format-1/2 run, a damaged record, a special file, the record
of another life, one that lost the phases its levels need) keeps its recorded figures, named;
a cell whose derivation fails gets no rows and the error, and the others go on.

Check first, write after: every raw record is read, checked and derived in memory before the
first file is written. A raw record that holds a rate no level could have had (NaN, infinity,
below 0, above any server's: rundir.raw_identity.rates_problem), or from which a figure out of
its declared range derives, is refused naming the raw file and the level (block, interval), and
nothing is rewritten: results.csv once took an infinite steady rate before the reader refused
it, naming cells/. With `allow_damaged` (report's --allow-incomplete) such a cell keeps its
recorded figures instead, named like any unusable raw record. A level whose steady rate the
raw record can no longer give (a block failed) is named in `Rederived.lost`.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from rundir.admissible import figure_problem
from rundir.derive.levels import derive_cell
from rundir.errors import RunDirError
from rundir.format import MANIFEST, RAW_DIR, RESULTS_COLUMNS
from rundir.integrity import bad_figure, figure_wanted
from rundir.migrations import check_version
from rundir.raw_identity import identity_problem, phases_problem, rates_problem
from rundir.records import Tool, check_raw
from rundir.regular import kind_of, read_regular
from rundir.write import RunDir, now_iso

DERIVED = "derived"  # rows derived again from the raw record
KEPT = "kept"  # no usable raw record: the recorded figures stay
FAILED = "failed"  # the derivation raised: no rows, derive_error says why
# The figure the throughput verdicts judge (analysis/steady_rate.py): a level that had one and
# derives none any more is named, never left out of its verdict in silence
STEADY = "steady_qps"


@dataclass
class Rederived:
    cell: str
    outcome: str  # DERIVED, KEPT or FAILED
    note: str  # one line for the user
    rows: int = 0
    changed: int = 0  # rows that differ from what the cell had before
    lost: list[str] = field(default_factory=list)  # levels no longer measured, one line each

    def line(self) -> str:
        return f"{self.cell}: {self.outcome}: {self.note}"


@dataclass
class _Derived:
    """One cell derived in memory, written only once every cell was checked."""

    cell: str
    payload: dict
    outcome: Rederived


def _differs(a: dict, b: dict) -> bool:
    keys = set(a) | set(b)
    return any(a.get(k) != b.get(k) for k in keys)


def rederive_run(path: Path, allow_damaged: bool = False) -> list[Rederived]:
    """Derive every finished cell of the run at `path` again; one Rederived per cell, in order.
    RunDirError (one line, naming the file) when the run cannot be read or written, or a raw
    record is damaged (unless `allow_damaged`: that cell keeps its recorded figures)."""
    try:
        return _rederive(Path(path), allow_damaged)
    except OSError as e:
        where = e.filename or path
        raise RunDirError(
            f"{where}: cannot write the re-derived figures: {e.strerror or e}; nothing recorded "
            "was changed"
        ) from None


def _rederive(path: Path, allow_damaged: bool) -> list[Rederived]:
    rd = RunDir(path)
    version = check_version(rd.read_manifest(), str(path / MANIFEST))
    out: list[Rederived] = []
    pending: list[_Derived] = []
    damaged: list[str] = []
    for rec in sorted(rd.finished_cells().values(), key=lambda r: r["cell"]["index"]):
        cid = rec["cell"]["id"]
        raw, kept = _usable_raw(rd, rec, version)
        if kept is not None:
            out.append(kept)
            continue
        done = _derive(rd, rec, raw)
        problem = _damage(raw, done.payload["rows"])
        if problem:
            where = f"{RAW_DIR}/{cid}.json"
            if not allow_damaged:
                damaged.append(f"{rd.raw_file(cid)}: {problem}")
                continue
            out.append(
                Rederived(cid, KEPT, f"raw record unusable ({where}: {problem}); keeps its figures")
            )
            continue
        out.append(done.outcome)
        pending.append(done)
    if damaged:
        more = f" (and {len(damaged) - 1} more damaged raw record(s))" if len(damaged) > 1 else ""
        raise RunDirError(
            f"{damaged[0]}{more}: the raw record is damaged, so nothing was derived again and "
            "nothing was rewritten (--allow-incomplete keeps such a cell's recorded figures)"
        )
    for done in pending:
        rd.write_derived(done.cell, done.payload)
    if pending:
        rd.rebuild_results()
    return out


def _usable_raw(rd: RunDir, rec: dict, version: int) -> tuple[dict | None, Rederived | None]:
    """(the cell's raw record, None), or (None, why it keeps its recorded figures)."""
    cid = rec["cell"]["id"]
    raw_path = rd.raw_file(cid)
    if raw_path.exists() and not raw_path.is_file():
        kind = kind_of(raw_path.stat().st_mode)
        return None, Rederived(
            cid,
            KEPT,
            f"raw record unusable ({RAW_DIR}/{raw_path.name} is {kind}, not a regular "
            "file: refused); keeps its recorded figures",
        )
    if not raw_path.is_file():
        why = (
            f"a format-{version} run records no raw data"
            if version < 3
            else f"no raw record ({raw_path.name} missing)"
        )
        return None, Rederived(cid, KEPT, f"{why}; keeps its recorded figures")
    try:
        raw = json.loads(read_regular(raw_path))
        if not isinstance(raw, dict):
            raise RunDirError(f"{raw_path}: not a JSON object; the file is damaged")
        raw = check_raw(raw, str(raw_path))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RunDirError) as e:
        first = str(e).splitlines()[0]
        return None, Rederived(cid, KEPT, f"raw record unusable ({first}); keeps its figures")
    # Never derive one life's figures under another's name, nor rows from a record that
    # lost what they are derived from (rundir/raw_identity.py)
    problem = identity_problem(raw, rec["cell"]) or phases_problem(raw, rec["cell"])
    if problem:
        return None, Rederived(
            cid,
            KEPT,
            f"raw record unusable ({RAW_DIR}/{raw_path.name}: {problem}); keeps its "
            "recorded figures",
        )
    return raw, None


def _derive(rd: RunDir, rec: dict, raw: dict) -> _Derived:
    """The cell derived again, in memory: its derived/ payload and what the user is told."""
    cid = rec["cell"]["id"]
    try:
        before = rd.rows_of(rec)
    except RunDirError:  # an unreadable derived/ file: this derivation replaces it
        before = rec["rows"]
    try:
        derived = derive_cell(raw)
    except Exception as e:  # noqa: BLE001 - one cell's derivation never stops the others
        first = str(e).splitlines()[0] if str(e) else ""
        why = f"{type(e).__name__}: {first}"[:300]
        return _Derived(
            cid,
            _payload(cid, [], [], why),
            Rederived(cid, FAILED, f"figures could not be derived: {why}"),
        )
    changed = sum(
        1 for i, row in enumerate(derived.rows) if i >= len(before) or _differs(row, before[i])
    ) + max(0, len(before) - len(derived.rows))
    note = f"{len(derived.rows)} row(s), {changed} changed"
    outcome = Rederived(
        cid, DERIVED, note, len(derived.rows), changed, _lost(cid, before, derived.rows, raw)
    )
    return _Derived(cid, _payload(cid, derived.rows, derived.windows, None), outcome)


def _damage(raw: dict, rows: list[dict]) -> str | None:
    """Why the figures of `raw` cannot be what they say (module doc), one clause, or None: a
    recorded rate out of range, or a derived figure that is not a finite number or out of its
    declared range (rundir/admissible.py)."""
    problem = rates_problem(raw)
    if problem:
        return problem
    for row in rows:
        level = f"level {row.get('workload')}@{row.get('threads')}"
        for col in RESULTS_COLUMNS:
            if bad_figure(col, row.get(col)):
                v = row.get(col)
                return f"{level}: derives {col} {v!r}, not {figure_wanted(col, v)}"
        if (row.get("status") or "ok") == "ok":
            problem = figure_problem(row)
            if problem:
                return f"{level}: derives {problem}"
    return None


def _lost(cid: str, before: list[dict], rows: list[dict], raw: dict) -> list[str]:
    """The ok levels that had a steady rate and derive none any more, one line each naming why
    (a block that failed or served nothing): the verdicts then judge their point without that
    life, and say so (analysis/steady_rate.py)."""
    had = {
        (r.get("workload"), r.get("threads")): r.get(STEADY)
        for r in before
        if isinstance(r.get(STEADY), int | float) and math.isfinite(r[STEADY])
    }
    levels = {(lv.get("workload"), lv.get("threads")): lv for lv in raw.get("levels") or []}
    out = []
    for row in rows:
        key = (row.get("workload"), row.get("threads"))
        if (row.get("status") or "ok") != "ok" or row.get(STEADY) is not None or key not in had:
            continue
        out.append(
            f"cell {cid}, {key[0]}@{key[1]}: no steady rate any more "
            f"({_why_unmeasured(levels.get(key))} in {RAW_DIR}/{cid}.json; recorded: "
            f"{had[key]:g}/s), so this life is left out of the level's throughput verdict"
        )
    return out


def _why_unmeasured(level: dict | None) -> str:
    blocks = (level or {}).get("blocks")
    if not blocks:
        return "the rule found no steady window"
    bad = [b for b in blocks if b.get("status") != "ok"]
    if bad:
        return ", ".join(f"block {int(b.get('index', 0)) + 1} {b.get('status')}" for b in bad)
    return "a block served nothing"


def _payload(cell: str, rows: list, windows: list, error: str | None) -> dict:
    return {
        "cell": cell,
        "derived_at": now_iso(),
        "tool": Tool.installed().model_dump(),
        "derive_error": error,
        "rows": rows,
        "windows": windows,
    }
