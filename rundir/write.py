"""Writing a run directory: atomic, append-only, never overwriting what the user owns.

Each finished cell is one immutable JSON file (cells/<id>.json) written by temp file + rename; the
manifest and results.csv are derived from those files and rewritten atomically after each cell, so a
crash at any instant leaves a readable run and `--resume` knows exactly which cells finished.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import time
from datetime import UTC, datetime
from pathlib import Path

from rundir.atomic import atomic_write
from rundir.errors import RunDirError
from rundir.format import (
    CELLS_DIR,
    CHECKPOINTS_DIR,
    DERIVED_DIR,
    FORMAT_VERSION,
    LOGS_DIR,
    MANIFEST,
    MARKER_TEXT,
    OWNER_MARKER,
    RAW_DIR,
    RESULTS,
    RESULTS_COLUMNS,
    SAMPLES_DIR,
    SPAN_WINDOW,
    results_columns,
)
from rundir.records import check_manifest
from rundir.regular import read_regular

WORK_DIR = "work"  # datadirs and sockets of running cells; removed cell by cell


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def owned(path: Path) -> bool:
    return (Path(path) / OWNER_MARKER).is_file()


def make_owned_dir(path: Path) -> Path:
    """Create a new directory we own (marker inside). Refuses an existing one."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=False)
    except FileExistsError:
        raise RunDirError(
            f"{path}: already exists; mallocsweep never writes into a directory it did not create"
        ) from None
    except OSError as e:
        raise RunDirError(f"{path}: cannot create: {e.strerror}") from None
    atomic_write(path / OWNER_MARKER, MARKER_TEXT)
    return path


def remove_owned_dir(path: Path, attempts: int = 5) -> bool:
    """Remove a directory made by make_owned_dir; True when it is gone.

    Its owner marker goes last. A process that outlived its stop (a killed script's child) may
    still write into the tree while it is removed; whatever is left then still carries the marker,
    so a later run knows it is ours and removes it (suites.datasets.stale), instead of finding an
    unmarked directory it must never touch. A few tries, a moment apart, outlast such a writer."""
    path = Path(path)
    for attempt in range(attempts):
        if not path.exists():
            return True
        for entry in list(path.iterdir()) if path.is_dir() else []:
            if entry.name == OWNER_MARKER:
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)
        if [p for p in path.iterdir() if p.name != OWNER_MARKER]:
            time.sleep(0.1 * (attempt + 1))
            continue
        (path / OWNER_MARKER).unlink(missing_ok=True)
        try:
            path.rmdir()
            return True
        except OSError:  # something was written after the check: mark it ours again, go on
            atomic_write(path / OWNER_MARKER, MARKER_TEXT)
    return not path.exists()


class RunDir:
    """A run directory being written."""

    def __init__(self, path: Path):
        # Absolute: children (sysbench, servers) run in other working directories.
        self.path = Path(path).absolute()

    # -- creation -----------------------------------------------------------------------------
    @classmethod
    def create(cls, out_root: Path, name: str) -> RunDir:
        out_root = Path(out_root)
        try:
            out_root.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise RunDirError(f"--out {out_root}: cannot create: {e.strerror}") from None
        path = out_root / name
        n = 1
        while path.exists():  # never overwrite: a second run in the same second gets a suffix
            n += 1
            path = out_root / f"{name}.{n}"
        make_owned_dir(path)
        for sub in (CELLS_DIR, RAW_DIR, SAMPLES_DIR, LOGS_DIR, WORK_DIR):
            (path / sub).mkdir()
        atomic_write(path / WORK_DIR / OWNER_MARKER, "work area of mallocsweep\n")
        return cls(path)

    @classmethod
    def open_existing(cls, path: Path) -> RunDir:
        path = Path(path)
        if not (path / MANIFEST).is_file():
            raise RunDirError(f"--resume {path}: not a mallocsweep run directory (no {MANIFEST})")
        if not owned(path):
            raise RunDirError(
                f"--resume {path}: has no {OWNER_MARKER} marker; refusing to write into it"
            )
        for sub in (CELLS_DIR, RAW_DIR, SAMPLES_DIR, LOGS_DIR, WORK_DIR):
            (path / sub).mkdir(exist_ok=True)
        if not owned(path / WORK_DIR):
            atomic_write(path / WORK_DIR / OWNER_MARKER, "work area of mallocsweep\n")
        return cls(path)

    # -- paths --------------------------------------------------------------------------------
    def inside(self, path: Path, *, directory: bool = False) -> Path:
        """`path` (a file, or with `directory` a directory, the tool writes in this run) when every
        directory between the run directory and it (and it, when it is a directory) is a real
        directory of the run: a subdirectory that is a symlink (to a directory of the user's)
        would have the tool write, and overwrite, the user's files outside the run. RunDirError
        naming it otherwise."""
        top = self.path
        rel = Path(path).relative_to(top)
        d = top
        for part in rel.parts if directory else rel.parts[:-1]:
            d = d / part
            if d.is_symlink():
                raise RunDirError(
                    f"{d} is a symlink (to {os.readlink(d)}): the tool writes a run's files only "
                    f"inside its run directory; replace it with a directory of its own"
                )
        return Path(path)

    def samples_path(self, cell_id: str) -> Path:
        return self.inside(self.path / SAMPLES_DIR / f"{cell_id}.csv")

    def logs_dir(self, cell_id: str) -> Path:
        d = self.inside(self.path / LOGS_DIR / cell_id, directory=True)
        d.mkdir(parents=True, exist_ok=True)
        return d

    def work_dir(self, cell_id: str) -> Path:
        return self.path / WORK_DIR / cell_id

    def cell_file(self, cell_id: str) -> Path:
        return self.path / CELLS_DIR / f"{cell_id}.json"

    def raw_file(self, cell_id: str) -> Path:
        return self.path / RAW_DIR / f"{cell_id}.json"

    def derived_file(self, cell_id: str) -> Path:
        return self.path / DERIVED_DIR / f"{cell_id}.json"

    # -- manifest and cells -------------------------------------------------------------------
    def read_manifest(self) -> dict:
        try:
            return json.loads(read_regular(self.path / MANIFEST))
        except (OSError, json.JSONDecodeError) as e:
            raise RunDirError(f"{self.path / MANIFEST}: unreadable: {e}") from None

    def write_manifest(self, manifest: dict) -> None:
        manifest = dict(manifest)
        manifest["format_version"] = FORMAT_VERSION
        # Recorded, not left for readers to guess: this writer's cpu_*/ctxsw_* columns cover
        # each level's measured window (rundir/derive/window.py).
        manifest.setdefault("figures", {"cpu_ctxsw_span": SPAN_WINDOW, "raw_records": True})
        check_manifest(manifest, str(self.path / MANIFEST))
        atomic_write(
            self.path / MANIFEST,
            json.dumps(manifest, indent=2, sort_keys=False, default=str) + "\n",
        )

    def finished_cells(self) -> dict[str, dict]:
        """Cell records on disk, by id."""
        out = {}
        for f in sorted((self.path / CELLS_DIR).glob("*.json")):
            try:
                rec = json.loads(read_regular(f))
            except (OSError, UnicodeDecodeError, json.JSONDecodeError):
                continue  # a torn file cannot exist (atomic rename); ignore foreign files
            cell = rec.get("cell") if isinstance(rec, dict) else None
            if not isinstance(cell, dict) or cell.get("id") != f.stem:
                continue  # not a record (rundir.integrity names it to readers)
            out[cell["id"]] = rec
        return out

    def archive_attempt(self, cell_id: str) -> int | None:
        """Before a cell runs again (--resume), move its failed attempt aside, never deleting it.

        The record, timeline and logs get an `.attemptN` suffix that the readers do not pick up.
        Returns N, or None when there was no earlier attempt.
        """
        paths = [
            self.cell_file(cell_id),
            self.raw_file(cell_id),
            self.derived_file(cell_id),
            self.samples_path(cell_id),
            self.path / LOGS_DIR / cell_id,
        ]
        if not any(p.exists() for p in paths):
            return None
        rec = self.cell_file(cell_id)
        if rec.exists() and json.loads(rec.read_bytes())["cell"].get("status") == "ok":
            raise RunDirError(f"{rec}: a finished cell is never run again")
        n = 1
        while any(Path(f"{p}.attempt{n}").exists() for p in paths):
            n += 1
        for p in paths:
            if p.exists():
                os.replace(p, f"{p}.attempt{n}")
        return n

    def write_cell(self, cell: dict, rows: list[dict]) -> None:
        """Record one cell (its manifest entry and its results rows). An `ok` cell is final."""
        path = self.inside(self.cell_file(cell["id"]))
        text = json.dumps({"cell": cell, "rows": rows}, indent=1, default=str) + "\n"
        try:
            atomic_write(path, text, exclusive=True)
        except FileExistsError:
            raise RunDirError(f"{path}: a finished cell is never rewritten") from None

    def write_raw(self, raw: dict) -> str:
        """Record what one cell observed (raw/<cell>.json), once; returns the text written, which
        is what its rows are derived from (so the run's rows and a later --rederive agree)."""
        path = self.inside(self.raw_file(raw["cell"]))
        path.parent.mkdir(exist_ok=True)  # a run directory resumed from an older format
        text = json.dumps(raw, indent=None, separators=(",", ":")) + "\n"
        try:
            atomic_write(path, text, exclusive=True)
        except FileExistsError:
            raise RunDirError(f"{path}: a cell's raw record is never rewritten") from None
        return text

    def checkpoint_dir(self, cell_id: str) -> Path:
        return self.path / CHECKPOINTS_DIR / cell_id

    def write_checkpoint(self, cell_id: str, part: dict, head: dict) -> None:
        """One more piece of a running cell's journal (a soak's cycles since its last
        checkpoint: part-NNNNNN.json), then its head (head.json: the record without its levels,
        how many parts and cycles count). Each file is written atomically and synced, the part
        before the head that counts it: a runner killed at any moment leaves a whole journal of
        the parts the head names. Appending pieces keeps a soak of thousands of cycles from
        rewriting all of them at every block."""
        d = self.inside(self.checkpoint_dir(cell_id) / "head.json").parent
        d.mkdir(parents=True, exist_ok=True)
        text = json.dumps(part, separators=(",", ":"), default=str) + "\n"
        atomic_write(d / f"part-{int(head['parts']):06d}.json", text)
        atomic_write(d / "head.json", json.dumps(head, default=str) + "\n")

    def read_checkpoint(self, cell_id: str) -> dict | None:
        """The journal put together: {"record", "raw", "cycles"} as if the cell had been
        recorded after its last checkpoint; None when it has none."""
        d = self.checkpoint_dir(cell_id)
        try:
            head = json.loads(read_regular(d / "head.json"))
            parts = [
                json.loads(read_regular(d / f"part-{i:06d}.json"))
                for i in range(1, int(head["parts"]) + 1)
            ]
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as e:
            raise RunDirError(f"{d}: unreadable checkpoint: {e}") from None
        if not parts:
            return None
        raw = dict(parts[0]["raw"], levels=[], phases={}, alloc_readings=None)
        record = dict(head["record"], levels=[])
        for p in parts:
            raw["levels"] += p["raw"]["levels"]
            raw["phases"].update(p["raw"]["phases"])
            if p["raw"].get("alloc_readings") is not None:
                raw["alloc_readings"] = (raw["alloc_readings"] or []) + p["raw"]["alloc_readings"]
            record["levels"] += p["record_levels"]
        for k, v in parts[-1]["raw"].items():  # the latest of what is not a list of pieces
            if k not in ("levels", "phases", "alloc_readings"):
                raw[k] = v
        return {"record": record, "raw": raw, "cycles": head["cycles"]}

    def remove_checkpoint(self, cell_id: str) -> None:
        """The journal of a cell now recorded (raw/ holds all of it): only the files it wrote."""
        d = self.checkpoint_dir(cell_id)
        for f in [*d.glob("part-*.json"), d / "head.json"]:
            f.unlink(missing_ok=True)
        try:
            d.rmdir()
        except OSError:
            pass  # something else is in it: left as it is

    def write_derived(self, cell_id: str, derived: dict) -> None:
        """The rows and window records `report --rederive` derived again (derived/<cell>.json);
        rewritten by every --rederive, never touching cells/ or raw/."""
        path = self.inside(self.derived_file(cell_id))
        path.parent.mkdir(exist_ok=True)
        atomic_write(path, json.dumps(derived, indent=1, default=str) + "\n")

    def rows_of(self, rec: dict) -> list[dict]:
        """A cell's rows: re-derived ones when `report --rederive` wrote them, else as recorded."""
        path = self.inside(self.derived_file(rec["cell"]["id"]))
        if path.is_file():
            try:
                return json.loads(read_regular(path))["rows"]
            except (OSError, json.JSONDecodeError, KeyError) as e:
                raise RunDirError(
                    f"{path}: unreadable ({e}); run report --rederive again"
                ) from None
        return rec["rows"]

    def rebuild_results(self) -> int:
        """results.csv from every cell record, in cell order; returns the row count. In the
        columns of the run's own format (a run of an older format, re-derived, keeps its file's
        layout: the columns a later format added are empty in its rows anyway)."""
        records = [dict(rec, rows=self.rows_of(rec)) for rec in self.finished_cells().values()]
        try:
            version = self.read_manifest().get("format_version")
        except RunDirError:  # no manifest yet: the current format's
            version = FORMAT_VERSION
        columns = (
            results_columns(version)
            if isinstance(version, int) and 1 <= version < FORMAT_VERSION
            else RESULTS_COLUMNS
        )
        text, n = results_text(records, columns)
        atomic_write(self.path / RESULTS, text)
        return n


def results_text(records: list[dict], columns: list[str] = RESULTS_COLUMNS) -> tuple[str, int]:
    """The results.csv text of these cell records (in cell order) and its row count. The reader
    (rundir/read.py) renders the same text from cells/*.json to check or rebuild a results.csv."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    n = 0
    for rec in sorted(records, key=lambda r: r["cell"].get("index", 0)):
        for row in rec["rows"]:
            w.writerow({k: ("" if row.get(k) is None else row.get(k)) for k in columns})
            n += 1
    return buf.getvalue(), n
