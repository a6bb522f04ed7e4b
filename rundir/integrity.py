"""One integrity check of a run directory: what it says it holds against what is there.

`report`, `compare`, `merge` and `run --resume` trust a run only after this check (through
rundir.read.load_run, or `check_run` itself). It reads files only: no server, nothing written.

Where a run's figures come from (its source of truth):
- cells/<id>.json: one immutable record per finished cell (its manifest entry and its rows; rows
  derived again by `report --rederive`, derived/<id>.json, replace the recorded ones). Every
  format's writer kept them and from format 3 on they are required. results.csv and the
  manifest's cell entries are derived from them: where results.csv disagrees (rows deleted or
  changed, a column dropped, a figure that is not a number), it is rebuilt from the records in
  memory and one line says so; the file on disk stays as it is (it is the user's evidence).
- A format-1 or format-2 run without cells/ (the recorded fixtures dropped them, as do copies
  made by hand): manifest.json (which cells finished, and the levels each one ran) with
  results.csv's figures. Nothing can be rebuilt there: a row, a column or a figure that is not
  there is missing from the truth itself.

What is checked: manifest.json is a run's manifest (a JSON object of a known format with a list
of cell entries, each with an id, index and status, ids unique); every finished cell (ok, failed,
interrupted) has a readable record named by its id, and no record names a cell the manifest does
not list; each ok cell has one row per level it recorded (cells[].levels), no more; every row's
identity (cell, workload, threads) is there and every figure is a number or empty; results.csv
holds the column set of its run's format (rundir.format.results_columns) and, where records
exist, exactly their rows. From format 3 on, each cell's raw record (raw/<id>.json) is looked
for too: without it the figures stand as recorded, but `report --rederive` cannot derive them
again (a notice, not a gap).

A gap (the truth itself is missing or garbage) makes the run incomplete: readers refuse it with
one line naming what is missing, unless the user allows an incomplete run (`--allow-incomplete`):
then what is there is read, and every gap is said first.
"""

from __future__ import annotations

import csv
import errno
import io
import json
import math
import os
import stat
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from rundir.admissible import admit, check_design, identity_mismatch
from rundir.errors import RunDirError
from rundir.format import (
    CELL_STATUSES,
    CELLS_DIR,
    DERIVED_DIR,
    FORMAT_VERSION,
    INT_COLUMNS,
    MANIFEST,
    RAW_DIR,
    REQUIRED_RESULT_COLUMNS,
    RESULTS,
    RESULTS_COLUMNS,
    TEXT_COLUMNS,
    results_columns,
)
from rundir.migrations import check_version
from rundir.regular import kind_of, read_regular
from rundir.write import results_text

# Cell statuses whose cell wrote its record (cells/<id>.json); pending and running cells have none.
FINISHED = ("ok", "failed", "interrupted")
# Where results come from
CELLS_TRUTH = "cells"  # cells/*.json
RESULTS_TRUTH = "results"  # results.csv, checked against the manifest (format 1/2 without cells/)
# How a reader that refuses an incomplete run says what the user can do
ALLOW_HINT = "nothing was read from it; --allow-incomplete reads what is there and lists the gaps"
MAX_SHOWN = 10  # gap lines shown at the top of an output; the rest are counted
GAP_PREFIX = "INCOMPLETE RUN"  # how a gap line begins, wherever it is shown


@dataclass
class Integrity:
    """What the check found. `rows` (typed) and `columns` are the run's trusted results; with gaps,
    what could be read of them."""

    path: Path
    version: int
    manifest: dict  # as read; each cell entry updated from its record where it has one
    truth: str  # CELLS_TRUTH or RESULTS_TRUTH
    columns: list[str] = field(default_factory=list)
    rows: list[dict] = field(default_factory=list)
    repaired: list[str] = field(default_factory=list)  # rebuilt from the truth, one line each
    gaps: list[str] = field(default_factory=list)  # the truth itself lacks these, one line each
    notes: list[str] = field(default_factory=list)  # figures unaffected (raw records missing)
    refused_cells: set[str] = field(default_factory=set)  # cells whose rows are not read (gaps)
    # the file each cell's rows were read from (cells/<id>.json, derived/<id>.json, results.csv):
    # a refusal of one of its figures names it
    sources: dict[str, str] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return not self.gaps

    def refusal(self, hint: str = ALLOW_HINT) -> str:
        """One line: the run, the first gap, how many more, and what the user can do."""
        more = f" (and {len(self.gaps) - 1} more gap(s))" if len(self.gaps) > 1 else ""
        return f"{self.path}: incomplete run: {self.gaps[0]}{more}; {hint}"

    def gap_lines(self) -> list[str]:
        """The gaps as an output's first lines (at most MAX_SHOWN, then a count)."""
        lines = [f"{GAP_PREFIX} {self.path}: {g}" for g in self.gaps[:MAX_SHOWN]]
        if len(self.gaps) > MAX_SHOWN:
            lines.append(f"{GAP_PREFIX} {self.path}: and {len(self.gaps) - MAX_SHOWN} more gap(s)")
        return lines


# -- manifest ---------------------------------------------------------------------------------
def read_manifest(path: Path) -> dict:
    """manifest.json, if it is a run's manifest of a format this mallocsweep reads: a JSON object
    with a list of cell entries (id, index, status; ids unique). RunDirError (one line) else."""
    path = Path(path)
    if not path.is_dir():
        why = why_unreachable(path, "directory") or (
            "is not a directory" if path.exists() else "does not exist"
        )
        raise RunDirError(f"{path}: {why}; give the path of a mallocsweep run directory")
    mpath = path / MANIFEST
    if mpath.exists() and not mpath.is_file():
        raise RunDirError(
            f"{mpath}: {kind_of(mpath.stat().st_mode)}, not a regular file; not a readable run"
        )
    if not mpath.is_file():
        raise RunDirError(
            f"{path}: not a mallocsweep run directory (no {MANIFEST}); "
            "give the directory that `mallocsweep run` printed"
        )
    try:
        manifest = json.loads(read_regular(mpath).decode("utf-8"))
    except OSError as e:
        raise RunDirError(f"{mpath}: cannot read: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise RunDirError(
            f"{mpath}: not UTF-8 text (byte {e.start}); the file is damaged"
        ) from None
    except json.JSONDecodeError as e:
        raise RunDirError(
            f"{mpath}: not valid JSON (line {e.lineno}): the file is damaged"
        ) from None
    except RecursionError:
        raise RunDirError(
            f"{mpath}: nested too deeply to be a manifest; the file is damaged"
        ) from None
    if not isinstance(manifest, dict):
        raise RunDirError(
            f"{mpath}: not a mallocsweep run manifest (a JSON {_json_kind(manifest)} where an "
            "object belongs)"
        )
    check_version(manifest, str(mpath))  # a newer format's files may mean anything
    cells = manifest.get("cells")
    if not isinstance(cells, list):
        got = "no cells" if cells is None else f"cells is a JSON {_json_kind(cells)}"
        raise RunDirError(f"{mpath}: not a mallocsweep run manifest ({got}, not a list of cells)")
    if not cells:
        raise RunDirError(
            f"{mpath}: lists no cells: the run planned nothing, there is nothing to read"
        )
    seen: set[str] = set()
    statuses = (*CELL_STATUSES, "running")
    for i, c in enumerate(cells):
        if not isinstance(c, dict) or not isinstance(c.get("id"), str) or not c["id"]:
            raise RunDirError(
                f"{mpath}: cells[{i}] is not a cell entry (no id); the file is damaged"
            )
        cid = c["id"]
        if cid in seen:
            raise RunDirError(f"{mpath}: cell {cid} is listed twice; the file is damaged")
        seen.add(cid)
        if not isinstance(c.get("index"), int) or isinstance(c.get("index"), bool):
            raise RunDirError(
                f"{mpath}: cell {cid}: index {c.get('index')!r} is not a number; the file is damaged"
            )
        if c.get("status") not in statuses:
            raise RunDirError(
                f"{mpath}: cell {cid}: status {c.get('status')!r} is not one of "
                f"{', '.join(statuses)}; the file is damaged"
            )
    return manifest


def why_unreachable(path: Path, kind: str) -> str | None:
    """Why `path` (a `kind`: "file" or "directory") cannot be opened, in the user's words, when
    it is not simply absent: a link loop or a dangling link is not "no such file" (the name is
    there), nor is a path through a file. None when it is absent, or there."""
    try:
        os.stat(path)
    except OSError as e:
        if e.errno == errno.ELOOP:
            return f"a symbolic link loop (following the links never reaches a {kind})"
        if e.errno == errno.ENOENT and os.path.islink(path):
            return f"a symbolic link to {os.readlink(path)}, which does not exist"
        if e.errno == errno.ENOTDIR:
            return "not reachable: a part of the path before it is a file, not a directory"
        if e.errno == errno.EACCES:
            return "not reachable: permission denied"
        if e.errno != errno.ENOENT:
            return f"cannot be opened: {e.strerror}"
    return None


def _json_kind(value) -> str:
    if value is None:
        return "null"
    return {dict: "object", list: "list", str: "string", bool: "boolean"}.get(type(value), "number")


# -- results as text --------------------------------------------------------------------------
def number(text) -> float | None:
    """A figure of results.csv or a timeline: None for empty, "nan" (not measured) or garbage (the
    integrity check has said so by then)."""
    if text is None or str(text).strip() == "":
        return None
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(value) else value


def typed_row(raw: dict) -> dict:
    row: dict = {}
    for key, text in raw.items():
        if key in TEXT_COLUMNS:
            row[key] = text or ""
        elif key in INT_COLUMNS:
            value = number(text)
            row[key] = int(value) if value is not None else None
        else:
            row[key] = number(text)
    return row


def read_csv_text(path: Path) -> str:
    """A CSV file's text; RunDirError naming the file when it cannot be read as UTF-8 text."""
    try:
        return read_regular(path).decode("utf-8")
    except OSError as e:
        raise RunDirError(f"{path}: cannot read: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise RunDirError(f"{path}: not UTF-8 text (byte {e.start}); the file is damaged") from None


def parse_csv(text: str, where: str, short_ok: bool = False) -> tuple[list[str], list[dict]]:
    """(header, rows as text) of a CSV file; RunDirError for a row of more or fewer fields than
    the header (a torn or hand-edited file) or text that is not CSV. short_ok: a row of fewer
    fields reads them as empty (a timeline's last line, cut by a crash)."""
    try:
        reader = csv.DictReader(io.StringIO(text, newline=""))
        rows = []
        for r in reader:
            if None in r:
                raise RunDirError(
                    f"{where}: line {reader.line_num} has more fields than the header; the file "
                    "is damaged"
                )
            if not short_ok and any(v is None for v in r.values()):
                raise RunDirError(
                    f"{where}: line {reader.line_num} has fewer fields than the header; the file "
                    "is damaged"
                )
            rows.append(r)
        return list(reader.fieldnames or []), rows
    except csv.Error as e:
        raise RunDirError(f"{where}: not a valid CSV file ({e})") from None


def bad_figure(column: str, value) -> bool:
    """A value that cannot stand in `column` (as written to results.csv or a cell record): text in
    a figure's column, a fraction in a count's, a structure anywhere."""
    if column not in RESULTS_COLUMNS:
        return False  # not ours to judge (a column of a later writer, say)
    if value is None or value == "":
        return False
    if isinstance(value, dict | list):
        return True
    if column in TEXT_COLUMNS:
        return False
    if isinstance(value, bool):
        return True
    if isinstance(value, int | float):
        x = float(value)
    else:
        try:
            x = float(str(value))
        except ValueError:
            return True
    # NaN and infinity are never a measurement: a NaN read as "empty" was once left out of a
    # point's median in silence and moved a verdict; an infinity printed "inf×".
    if not math.isfinite(x):
        return True
    return column in INT_COLUMNS and x != int(x)


def figure_wanted(column: str, value) -> str:
    """What a value bad_figure refuses should have been, for its one-line message."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        x = None
    if x is not None and not math.isfinite(x):
        return "a finite number"
    return "a whole number" if column in INT_COLUMNS else "a number"


def _level(row: dict) -> str:
    return f"{row.get('workload')}@{row.get('threads')}"


def _level_key(workload, threads) -> tuple[str, int | str]:
    t = number(threads)
    return str(workload or ""), int(t) if t is not None else str(threads)


def _levels_text(levels) -> str:
    """Levels as "oltp_ro@8, oltp_ro@64", in workload then thread order."""
    return ", ".join(
        f"{w}@{t}" for w, t in sorted(levels, key=lambda k: (k[0], str(type(k[1])), k[1]))
    )


def _levels_problem(entry: dict, rows: list[dict]) -> str | None:
    """What an ok cell's rows lack or repeat of the levels it recorded (cells[].levels), or None."""
    levels = entry.get("levels")
    if not isinstance(levels, list):
        return None  # an entry that does not say which levels ran (a hand-made one)
    want = Counter(
        _level_key(lv.get("workload"), lv.get("threads")) for lv in levels if isinstance(lv, dict)
    )
    have = Counter(_level_key(r.get("workload"), r.get("threads")) for r in rows)
    missing, extra = want - have, have - want
    parts = []
    if missing:
        parts.append(f"no row for level(s) {_levels_text(missing)}")
    if extra:
        parts.append(f"rows it did not record ({_levels_text(extra)})")
    return "; ".join(parts) or None


def identity_problem(row: dict, entry: dict, whose: str) -> str | None:
    """A row whose identity is not its cell's (rundir.admissible.identity_mismatch), as one
    clause naming the column and both values, or None."""
    found = identity_mismatch(row, entry)
    if found is None:
        return None
    col, have, want = found
    return f"{col} {have!r}, but {whose} ran {want!r}"


def _first_bad(rows: list[dict], columns) -> tuple[int, dict, str] | None:
    for i, row in enumerate(rows):
        for c in columns:
            if bad_figure(c, row.get(c)):
                return i, row, c
    return None


# -- the check --------------------------------------------------------------------------------
def check_run(path: Path) -> Integrity:
    """Check the run directory at `path` (see the module doc). RunDirError (one line) when it is
    not a readable run at all (no directory, no or a damaged manifest, a newer format, a design
    out of range). What analysis may not read of it (rundir/admissible.py: the same server life
    twice, a relabelled round, a figure out of range) are gaps, and their rows are left out."""
    out = _check_files(Path(path))
    check_design(out.manifest, str(Path(path) / MANIFEST))
    admission = admit(out.manifest, out.rows, out.sources)
    admission.cells |= out.refused_cells
    if admission.refused:
        out.gaps.extend(admission.refused)
    if admission.refused or out.refused_cells:
        out.rows = [r for r in out.rows if admission.keeps(r)]
    return out


def _check_files(path: Path) -> Integrity:
    manifest = read_manifest(path)
    version = manifest["format_version"]
    folder = path / CELLS_DIR
    files = sorted(folder.glob("*.json")) if folder.is_dir() else []
    if version >= 3 or files:
        return _from_cells(path, manifest, version, files)
    out = Integrity(path, version, manifest, RESULTS_TRUTH)
    entries = {c["id"]: c for c in manifest["cells"]}
    ok = [c for c in entries.values() if c["status"] == "ok"]
    state = _results_file(path)
    if isinstance(state, str):
        if state != "is missing" or ok:
            out.gaps.append(
                f"{RESULTS} {state} and this format-{version} run has no {CELLS_DIR}/ to rebuild "
                f"it from ({len(ok)} cell(s) finished ok)"
            )
        return out
    columns, raw = state
    out.columns, out.rows = _checked_rows(out, version, entries, columns, raw, set(entries))
    return out


def _results_file(path: Path) -> tuple[list[str], list[dict]] | str:
    """(header, rows as text) of results.csv, or what is wrong with it ("is missing", ...)."""
    results = path / RESULTS
    if results.exists() and not results.is_file():
        return f"is {kind_of(results.stat().st_mode)}, not a regular file"
    if not results.is_file():
        return "is missing"
    try:
        columns, raw = parse_csv(read_csv_text(results), str(results))
    except RunDirError as e:
        return f"is damaged ({str(e).removeprefix(f'{results}: ')})"
    lacking = [c for c in REQUIRED_RESULT_COLUMNS if c not in columns]
    if lacking:
        return f"is damaged (no column(s) {', '.join(lacking)})"
    return columns, raw


def _checked_rows(
    out: Integrity,
    version: int,
    entries: dict[str, dict],
    columns: list[str],
    raw: list[dict],
    cells: set[str],
) -> tuple[list[str], list[dict]]:
    """results.csv's rows of `cells`, checked against the manifest with no record to rebuild them
    from: every problem is a gap; returns (columns, the typed rows that can be used)."""
    lacking = [c for c in results_columns(version) if c not in columns]
    if lacking:
        out.gaps.append(
            f"{RESULTS} lacks column(s) {', '.join(lacking[:5])}"
            + (f" (and {len(lacking) - 5} more)" if len(lacking) > 5 else "")
            + f" that a format-{version} run holds"
        )
    rows = []
    for line, r in enumerate(raw, start=2):
        where = f"{RESULTS} line {line}"
        cid = r.get("cell") or ""
        if cid and cid not in entries:
            out.gaps.append(f"{where}: cell {cid} is not one of manifest.json's cells")
            continue
        if cid not in cells:
            continue
        if not cid or not r.get("workload") or number(r.get("threads")) is None:
            out.gaps.append(f"{where}: a row with no cell, workload or threads")
            continue
        entry = entries[cid]
        who = f"{where} (cell {cid}, {_level(r)})"
        for col in columns:
            if bad_figure(col, r[col]):
                out.gaps.append(f"{who}: {col} {r[col]!r} is not {figure_wanted(col, r[col])}")
                r = dict(r, **{col: ""})
        problem = identity_problem(r, entry, "manifest.json's cell")
        if problem:
            out.gaps.append(f"{who}: {problem}")
            continue
        rows.append(typed_row(r))
        out.sources[cid] = RESULTS
    by_cell: dict[str, list[dict]] = {}
    for r in rows:
        by_cell.setdefault(r["cell"], []).append(r)
    for cid in sorted(cells, key=lambda c: entries[c]["index"]):
        entry = entries[cid]
        if entry["status"] != "ok":
            continue
        problem = _levels_problem(entry, by_cell.get(cid, []))
        if problem:
            out.gaps.append(f"{RESULTS}: cell {cid} finished ok but {RESULTS} has {problem}")
    for r in rows:  # a lost column reads as not measured; the gap says so
        for c in lacking:
            r.setdefault(c, "" if c in TEXT_COLUMNS else None)
    return [*columns, *lacking], rows


def _read_record(f: Path, path: Path) -> tuple[dict | None, str | None, str | None]:
    """(record with its rows as the run reads them, gap, notice) of one cells/ file."""
    name = f"{CELLS_DIR}/{f.name}"
    try:
        rec = json.loads(read_regular(f).decode("utf-8"))
    except OSError as e:
        return None, f"{name}: cannot read: {e.strerror}", None
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        return None, f"{name} is not a valid cell record (damaged JSON)", None
    ok = (
        isinstance(rec, dict)
        and isinstance(rec.get("cell"), dict)
        and isinstance(rec["cell"].get("id"), str)
        and isinstance(rec.get("rows"), list)
        and all(isinstance(r, dict) for r in rec["rows"])
    )
    if not ok:
        return (
            None,
            f"{name} is not a cell record (expected {{'cell': {{'id': ...}}, 'rows': [...]}})",
            None,
        )
    cid = rec["cell"]["id"]
    if cid != f.stem:
        return None, f"{name} holds the record of cell {cid!r}, not of {f.stem!r}", None
    stray = next((r.get("cell", "") for r in rec["rows"] if r.get("cell") != cid), None)
    if stray is not None:
        return None, f"{name} holds a row of cell {stray!r}, not of {cid}", None
    # Rows that `report --rederive` derived again replace the recorded ones (the record itself is
    # never rewritten); results.csv is checked against those. `rows_from` names the file they
    # came from, for a refusal of one of them.
    rec = dict(rec, derive_error=rec["cell"].get("derive_error"), rows_from=name)
    derived = path / DERIVED_DIR / f.name
    notice = None
    if derived.exists() and not derived.is_file():  # a FIFO, a device: named, never waited on
        notice = (
            f"{DERIVED_DIR}/{f.name} is {kind_of(derived.stat().st_mode)}, not a regular file: "
            f"cell {cid}'s rows as recorded are used (report --rederive writes it again)"
        )
    elif derived.is_file():
        try:
            d = json.loads(read_regular(derived).decode("utf-8"))
            rows = d["rows"]
            if not isinstance(rows, list) or not all(
                isinstance(r, dict) and r.get("cell") == cid for r in rows
            ):
                raise TypeError
            rec.update(
                rows=rows, derive_error=d.get("derive_error"), rows_from=f"{DERIVED_DIR}/{f.name}"
            )
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError):
            notice = (
                f"{DERIVED_DIR}/{f.name} is unreadable: cell {cid}'s rows as recorded in "
                f"{name} were used (`mallocsweep report --rederive` derives them again)"
            )
    return rec, None, notice


def _from_cells(path: Path, manifest: dict, version: int, files: list[Path]) -> Integrity:
    out = Integrity(path, version, manifest, CELLS_TRUTH)
    records: dict[str, dict] = {}
    named: set[str] = set()  # cells with a file in cells/, readable or not
    for f in files:
        named.add(f.stem)
        rec, gap, notice = _read_record(f, path)
        if gap:
            out.gaps.append(gap)
        if notice:
            out.repaired.append(notice)
        if rec is not None:
            records[rec["cell"]["id"]] = rec
    entries = manifest["cells"]
    plan = {c["id"]: c for c in entries}
    for cid in records:
        if cid not in plan:
            out.gaps.append(
                f"{CELLS_DIR}/{cid}.json is the record of a cell manifest.json does not list"
            )
    missing = [c for c in entries if c["status"] in FINISHED and c["id"] not in named]
    if missing and not files:
        ids = ", ".join(c["id"] for c in missing[:3]) + (", ..." if len(missing) > 3 else "")
        folder = path / CELLS_DIR
        what = (
            "is empty"
            if folder.is_dir()
            else "is not a directory"
            if folder.exists() or folder.is_symlink()
            else "is missing"
        )
        out.gaps.append(
            f"{CELLS_DIR}/ {what}: no record of the {len(missing)} finished cell(s) "
            f"manifest.json lists ({ids})"
        )
    else:
        for c in missing:
            out.gaps.append(
                f"{CELLS_DIR}/{c['id']}.json is missing (manifest.json has cell {c['id']} "
                f"{c['status']})"
            )
    # The runner writes a cell's record first, then its manifest entry: an entry still pending or
    # running beside a record was cut off by a crash, and takes the record's; an entry whose
    # status disagrees with its record's takes the record's status, said in one line.
    cells = []
    finished_run = manifest.get("status") == "finished"
    for c in entries:
        rec = records.get(c["id"])
        was = c.get("status")
        now = rec["cell"].get("status") if rec is not None else was
        if finished_run and was in ("pending", "running"):
            # A finished runner ran every cell to its end and wrote its entry: one still
            # pending or running there was edited (or the manifest is another run's)
            out.gaps.append(
                f"manifest.json: the run is finished but cell {c['id']} is {was}: the manifest is "
                "damaged, so the cell is not used"
            )
            out.refused_cells.add(c["id"])
        if rec is not None and was not in (*FINISHED, "skipped"):
            c = {**c, **rec["cell"]}
        elif was != now:
            out.repaired.append(
                f"manifest.json has cell {c['id']} {was}, its record {CELLS_DIR}/{c['id']}.json "
                f"{now}: the record's status was used"
            )
            c = {**c, "status": now}
        cells.append(c)
    out.manifest = dict(manifest, cells=cells)
    by_id = {c["id"]: c for c in cells}
    trusted = []
    for cid, rec in records.items():
        if cid not in plan:
            continue
        name = rec["rows_from"]
        bad = _first_bad(rec["rows"], RESULTS_COLUMNS)
        if bad is not None:
            _, row, col = bad
            out.gaps.append(
                f"{name}: level {_level(row)}: {col} {row.get(col)!r} is not "
                f"{figure_wanted(col, row.get(col))}"
            )
            continue
        entry = by_id[cid]
        if entry.get("status") == "ok" and not (rec.get("derive_error") and not rec["rows"]):
            problem = _levels_problem(entry, rec["rows"])
            if problem:
                out.gaps.append(f"{name}: cell {cid} is ok but its record has {problem}")
                continue
        # Each row is the cell's: the record's own entry says which server, allocator and THP
        # mode it ran (a row relabelled to another server once added a phantom server)
        mislabelled = next(
            (
                (row, problem)
                for row in rec["rows"]
                if (problem := identity_problem(row, rec["cell"], "the cell record says the cell"))
            ),
            None,
        )
        if mislabelled is not None:
            row, problem = mislabelled
            out.gaps.append(
                f"{name}: level {_level(row)}: {problem}: a relabelled row would count under "
                "another arm, so the cell is not used"
            )
            continue
        out.sources[cid] = name
        trusted.append(rec)
    _raw_notes(out, path, manifest, trusted)
    _results_against(out, path, version, trusted, by_id)
    return out


def _raw_notes(out: Integrity, path: Path, manifest: dict, records: list[dict]) -> None:
    """A format-3 runner keeps what each cell observed in raw/ (figures.raw_records true)."""
    figures = manifest.get("figures")
    if not (isinstance(figures, dict) and figures.get("raw_records") is True):
        return
    lacking = []
    for rec in records:
        cell = rec["cell"]
        if cell.get("status") not in ("ok", "failed") or not (rec["rows"] or cell.get("levels")):
            continue
        raw = path / RAW_DIR / f"{cell['id']}.json"
        try:
            st = raw.stat()
            if not stat.S_ISREG(st.st_mode):  # a FIFO or a device is not "missing": say what
                out.notes.append(
                    f"{RAW_DIR}/{raw.name} is {kind_of(st.st_mode)}, not a regular file: refused; "
                    f"cell {cell['id']}'s figures are as recorded in {CELLS_DIR}/"
                )
                continue
            if st.st_size > 0:
                continue
        except OSError:
            pass
        lacking.append(cell["id"])
    if lacking:
        ids = ", ".join(lacking[:3]) + (", ..." if len(lacking) > 3 else "")
        out.notes.append(
            f"{RAW_DIR}/ lacks the raw record of {len(lacking)} cell(s) ({ids}): their figures "
            f"are as recorded in {CELLS_DIR}/; `report --rederive` keeps them as they are"
        )


def _results_against(
    out: Integrity, path: Path, version: int, records: list[dict], entries: dict[str, dict]
) -> None:
    """results.csv against the records: their rows, rebuilt with a notice where it differs. The
    rows of a cell without a usable record (a gap already) are results.csv's, checked as far as
    the manifest allows: read only when the user allows an incomplete run."""
    results = path / RESULTS
    # An older writer wrote the columns it knew: rebuild with those, so migrations see the run
    # exactly as that writer's results.csv would have shown it.
    cols = RESULTS_COLUMNS
    if version != FORMAT_VERSION:
        present = {k for rec in records for r in rec["rows"] for k in r}
        cols = [c for c in RESULTS_COLUMNS if c in present] or results_columns(version)
    text, _ = results_text(records, cols)
    want_cols, want_raw = parse_csv(text, f"{path / CELLS_DIR}/*.json")
    want = [typed_row(r) for r in want_raw]
    recorded = {rec["cell"]["id"] for rec in records}
    # finished cells without a usable record (each a gap already): their rows can only come from
    # results.csv; a pending cell's rows there are simply not the records'
    unrecorded = {
        cid for cid, c in entries.items() if cid not in recorded and c["status"] in FINISHED
    }
    state = _results_file(path)
    fallback: list[dict] = []
    problem = None
    if isinstance(state, str):
        problem = state
    else:
        columns, raw = state
        if unrecorded:
            side = Integrity(path, version, out.manifest, RESULTS_TRUTH)
            _, fallback = _checked_rows(side, version, entries, columns, raw, unrecorded)
            fallback = [r for r in fallback if r["cell"] in unrecorded]
            out.sources.update({r["cell"]: RESULTS for r in fallback})
            if fallback:
                out.notes.append(
                    f"{RESULTS}: the rows of {len({r['cell'] for r in fallback})} cell(s) without "
                    "a usable record were read from it, with no record to check them against"
                )
        mine = [r for r in raw if r.get("cell") not in unrecorded]
        lacking = [c for c in want_cols if c not in columns]
        bad = _first_bad(mine, columns)
        if lacking:
            problem = f"lacks column(s) {', '.join(lacking[:5])}" + (
                ", ..." if len(lacking) > 5 else ""
            )
        elif bad is not None:
            i, row, col = bad
            problem = (
                f"has {col} {row[col]!r} (cell {row.get('cell')}, {_level(row)}), not "
                f"{figure_wanted(col, row[col])}"
            )
        else:
            typed = [typed_row(r) for r in mine]
            if [tuple(r.get(c) for c in want_cols) for r in typed] != [
                tuple(r.get(c) for c in want_cols) for r in want
            ]:
                problem = (
                    f"differs from {CELLS_DIR}/*.json ({len(typed)} rows there, "
                    f"{len(want)} in the cell records)"
                )
            elif not fallback:
                out.columns, out.rows = columns, typed
                return
            else:
                want_cols, want = columns, typed
    if problem and (problem != "is missing" or want):
        out.repaired.append(
            f"{results} {problem}: the results were rebuilt from {CELLS_DIR}/*.json (the source "
            f"of truth, {len(want)} rows); the file on disk was left as it is"
        )
    if not fallback:
        out.columns, out.rows = want_cols, want
        return
    columns = want_cols if records else state[0]
    order = {c["id"]: (c["index"], i) for i, c in enumerate(out.manifest["cells"])}
    rows = sorted([*want, *fallback], key=lambda r: order.get(r["cell"], (0, 0)))
    for r in rows:
        for c in columns:
            r.setdefault(c, "" if c in TEXT_COLUMNS else None)
    out.columns, out.rows = columns, rows
