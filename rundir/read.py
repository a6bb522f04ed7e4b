"""Reading a run directory: manifest, results and timelines, typed, with format checks.

Every table, plot and comparison works on the `Run` this module returns. A run may be unfinished
or have failed cells: what succeeded is still readable. A run written by a newer mallocsweep is
refused (its columns may mean something else); an older format is upgraded in memory by
rundir/migrations.py, never rewritten on disk.
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from rundir.errors import RunDirError
from rundir.format import (
    CELLS_DIR,
    DERIVED_DIR,
    FORMAT_VERSION,
    INT_COLUMNS,
    MANIFEST,
    REQUIRED_RESULT_COLUMNS,
    RESULTS,
    RESULTS_COLUMNS,
    SAMPLES_DIR,
    SPAN_WINDOW,
    TEXT_COLUMNS,
)
from rundir.migrations import RawRun, check_version, migrate
from rundir.records import check_manifest
from rundir.write import results_text

# What a timeline needs to be read at all (plots and intervals select on these).
REQUIRED_SAMPLE_COLUMNS = ("t_s", "phase")

# Host keys as the brief names them -> the spelling collectors/ may write instead.
HOST_ALIASES = {"cores": "cpu_count", "glibc": "glibc_version", "governor": "cpu_governor"}

BASELINE_ALLOCATOR = "glibc"  # "no preload": every ratio in the report is relative to it


def _number(text: str) -> float | None:
    if text is None or text.strip() == "":
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return None if math.isnan(value) else value  # "nan" is a figure that was not measured


def _typed_row(raw: dict[str, str], where: str) -> dict:
    row: dict = {}
    for key, text in raw.items():
        if key is None:  # more fields than the header: a torn or hand-edited file
            raise RunDirError(
                f"{where}: a row has more fields than the header; the file is damaged"
            )
        if key in TEXT_COLUMNS:
            row[key] = text or ""
        elif key in INT_COLUMNS:
            value = _number(text)
            row[key] = int(value) if value is not None else None
        else:
            row[key] = _number(text)
    return row


def _parse_csv(text: str, where: str) -> tuple[list[str], list[dict]]:
    try:
        reader = csv.DictReader(io.StringIO(text, newline=""))
        rows = [_typed_row(r, where) for r in reader]
        return list(reader.fieldnames or []), rows
    except csv.Error as e:
        raise RunDirError(f"{where}: not a valid CSV file ({e})") from None


def _read_csv(path: Path) -> tuple[list[str], list[dict]]:
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as e:
        raise RunDirError(f"{path}: cannot read: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise RunDirError(f"{path}: not UTF-8 text (byte {e.start}); the file is damaged") from None
    return _parse_csv(text, str(path))


def _read_samples(path: Path) -> list[dict]:
    """A cell's timeline; RunDirError naming the file when it is not one (a garbage file must
    not surface later as a Python exception in a plot)."""
    columns, rows = _read_csv(path)
    missing = [c for c in REQUIRED_SAMPLE_COLUMNS if c not in columns]
    if missing:
        raise RunDirError(
            f"{path}: not a timeline (no {', '.join(missing)} column); the file is damaged"
        )
    if any(r.get("t_s") is None for r in rows):
        raise RunDirError(f"{path}: a sample has no number in t_s; the file is damaged")
    return rows


@dataclass
class Run:
    """One run directory, read. `rows` are results.csv rows (numbers typed, '' -> None)."""

    path: Path
    manifest: dict
    rows: list[dict]
    columns: list[str] = field(default_factory=list)  # results.csv header, as written
    # What reading found and repaired in memory (e.g. a damaged results.csv rebuilt from
    # cells/*.json): shown by `report` and `compare`, and at the top of the report.
    notices: list[str] = field(default_factory=list)
    _samples: dict[str, list[dict]] = field(default_factory=dict, repr=False)

    # -- identity and metadata -----------------------------------------------------------------
    @property
    def run_id(self) -> str:
        return str(self.manifest.get("run_id") or self.path.name)

    @property
    def status(self) -> str:
        return str(self.manifest.get("status") or "unknown")

    @property
    def has_windows(self) -> bool:
        """True when the CPU and context-switch columns cover each level's measured window
        (window_s, window_ops); False for a run that recorded whole-level figures in them. The
        manifest says which (figures.cpu_ctxsw_span; migrated for format-1 runs)."""
        return (self.manifest.get("figures") or {}).get("cpu_ctxsw_span") == SPAN_WINDOW

    @property
    def host(self) -> dict:
        """Host metadata, with canonical keys (cores, glibc, governor) filled from their aliases."""
        host = dict(self.manifest.get("host") or {})
        for canon, alias in HOST_ALIASES.items():
            if host.get(canon) is None and host.get(alias) is not None:
                host[canon] = host[alias]
        return host

    @property
    def suite(self) -> dict:
        return self.manifest.get("suite") or {}

    @property
    def kind(self) -> str:
        """'sysbench' or 'iibench' (the suite's [suite] kind)."""
        info = self.suite.get("suite")
        if isinstance(info, dict) and info.get("kind"):
            return str(info["kind"])
        return str(self.suite.get("kind") or "sysbench")

    @property
    def dataset(self) -> dict:
        """What was loaded before measuring; compare warns when two runs differ in it."""
        return self.suite.get("dataset") or {}

    @cached_property
    def cells(self) -> dict[str, dict]:
        """Manifest cell entries by id, in run order."""
        cells = self.manifest.get("cells") or []
        ordered = sorted(cells, key=lambda c: c.get("index", 0))
        return {str(c.get("id")): c for c in ordered}

    # -- what the run contains, in display order -----------------------------------------------
    @cached_property
    def ok_rows(self) -> list[dict]:
        """Rows of levels that completed: the only ones any figure is computed from."""
        return [r for r in self.rows if (r.get("status") or "ok") == "ok"]

    @property
    def workloads(self) -> list[str]:
        return _unique(r["workload"] for r in self.rows)

    @property
    def allocators(self) -> list[str]:
        """glibc (the baseline) first, then in the order the run introduced them."""
        names = _unique(
            [str((c.get("allocator") or {}).get("name") or "") for c in self.cells.values()]
            + [r["allocator"] for r in self.rows]
        )
        names = [n for n in names if n]
        return sorted(names, key=lambda n: n != BASELINE_ALLOCATOR)

    @property
    def thp_modes(self) -> list[str]:
        order = {"system": 0, "always": 1, "madvise": 2, "never": 3}
        return sorted(_unique(r["thp"] for r in self.rows), key=lambda m: (order.get(m, 9), m))

    @property
    def servers(self) -> list[str]:
        return _unique(r["server"] for r in self.rows)

    def threads(self, workload: str) -> list[int]:
        return sorted({r["threads"] for r in self.rows if r["workload"] == workload})

    @property
    def repeats(self) -> int:
        return max((r["repeat"] or 1 for r in self.rows), default=0)

    # -- per cell --------------------------------------------------------------------------------
    def cell(self, cell_id: str) -> dict:
        return self.cells.get(cell_id, {})

    def is_standin(self, cell_id: str) -> bool:
        """A MongoDB wire-protocol stand-in: protocol coverage only, no allocator conclusions."""
        return bool((self.cell(cell_id).get("server") or {}).get("standin"))

    @property
    def has_standin(self) -> bool:
        return any((c.get("server") or {}).get("standin") for c in self.cells.values())

    def samples(self, cell_id: str) -> list[dict]:
        """The cell's timeline (samples/<cell>.csv), typed; [] when it was not recorded."""
        if cell_id not in self._samples:
            rel = self.cell(cell_id).get("samples_file") or f"{SAMPLES_DIR}/{cell_id}.csv"
            path = self.path / rel
            self._samples[cell_id] = _read_samples(path) if path.is_file() else []
        return self._samples[cell_id]

    def interval_rates(self, cell_id: str, workload: str, threads: int) -> list[float]:
        """Per-interval throughput of one level, from the timeline (queries/s, else transactions/s).

        The phase of a level is named "<workload>@<threads>" by the runner."""
        phase = f"{workload}@{threads}"
        return _rates([s for s in self.samples(cell_id) if s.get("phase") == phase])

    def level_visits(self, cell_id: str, workload: str, threads: int) -> list[list[float]]:
        """Per-interval throughput of every visit of one level in the cell's life, in timeline
        order: the one phase "<workload>@<threads>", or in a thread-churn life one phase per cycle,
        "<workload>@<threads>#c<cycle>" (+ "/tc<size>"; suites.churn)."""
        level = f"{workload}@{threads}"
        visits: dict[str, list[dict]] = {}
        for s in self.samples(cell_id):
            phase = s.get("phase") or ""
            if phase == level or phase.startswith(level + "#c"):
                visits.setdefault(phase, []).append(s)
        return [r for r in (_rates(rows) for rows in visits.values()) if r]


def _rates(samples: list[dict]) -> list[float]:
    """A phase's interval throughput: queries/s, else transactions/s."""
    qps = [s["workload_qps"] for s in samples if s.get("workload_qps")]
    if qps:
        return qps
    return [s["workload_tps"] for s in samples if s.get("workload_tps")]


def _unique(items) -> list:
    seen: dict = {}
    for item in items:
        seen.setdefault(item, None)
    return list(seen)


def _read_manifest(path: Path) -> dict:
    if not path.is_dir():
        what = "does not exist" if not path.exists() else "is not a directory"
        raise RunDirError(f"{path}: {what}; give the path of a mallocsweep run directory")
    mpath = path / MANIFEST
    if not mpath.is_file():
        raise RunDirError(
            f"{path}: not a mallocsweep run directory (no {MANIFEST}); "
            "give the directory that `mallocsweep run` printed"
        )
    try:
        manifest = json.loads(mpath.read_text())
    except (OSError, UnicodeDecodeError) as e:
        raise RunDirError(f"{mpath}: cannot read: {e}") from None
    except json.JSONDecodeError as e:
        raise RunDirError(
            f"{mpath}: not valid JSON (line {e.lineno}): the file is damaged"
        ) from None
    if not isinstance(manifest, dict):
        raise RunDirError(f"{mpath}: expected a JSON object at the top level")
    return manifest


def _cell_records(path: Path) -> list[dict] | None:
    """cells/*.json (the source of truth for results.csv), or None for a run without them (runs
    recorded before cell records existed, and test fixtures). RunDirError naming a damaged one."""
    folder = path / CELLS_DIR
    files = sorted(folder.glob("*.json")) if folder.is_dir() else []
    if not files:
        return None
    records = []
    for f in files:
        try:
            rec = json.loads(f.read_bytes().decode("utf-8"))
        except OSError as e:
            raise RunDirError(f"{f}: cannot read: {e.strerror}") from None
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise RunDirError(f"{f}: not a valid cell record (damaged JSON)") from None
        ok = (
            isinstance(rec, dict)
            and isinstance(rec.get("cell"), dict)
            and isinstance(rec.get("rows"), list)
            and all(isinstance(r, dict) for r in rec["rows"])
        )
        if not ok:
            raise RunDirError(f"{f}: not a cell record (expected {{'cell': ..., 'rows': [...]}})")
        # Rows that `report --rederive` derived again replace the recorded ones (the cell record
        # itself is never rewritten); results.csv is then checked against those.
        derived = path / DERIVED_DIR / f.name
        if derived.is_file():
            try:
                rec = dict(rec, rows=json.loads(derived.read_text())["rows"])
            except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError):
                raise RunDirError(
                    f"{derived}: unreadable; run `mallocsweep report --rederive` again"
                ) from None
        records.append(rec)
    return records


def _check_rows(columns: list[str], rows: list[dict], where: Path) -> None:
    missing = [c for c in REQUIRED_RESULT_COLUMNS if c not in columns]
    if missing:
        raise RunDirError(f"{where}: missing column(s) {', '.join(missing)}; the file is damaged")
    bad = next((r for r in rows if r["threads"] is None or not r["workload"]), None)
    if bad is not None:
        raise RunDirError(f"{where}: row of cell {bad['cell']!r} has no workload or threads")


def _results(path: Path, manifest: dict) -> tuple[list[str], list[dict], list[str]]:
    """(columns, rows, notices): results.csv checked against cells/*.json when the run has them.
    A missing, damaged or different results.csv is rebuilt in memory from the cell records with a
    notice (the file on disk is left as it is: it is the user's evidence); rows of a cell that has
    no record cannot be checked and are an error, never silently dropped."""
    results = path / RESULTS
    records = _cell_records(path)
    if records is None:
        if not results.is_file():
            return [], [], []
        columns, rows = _read_csv(results)
        _check_rows(columns, rows, results)
        return columns, rows, []
    current = manifest.get("format_version") == FORMAT_VERSION
    # An older writer wrote the columns it knew: rebuild with those, so migrations see the run
    # exactly as that writer's results.csv would have shown it.
    cols = RESULTS_COLUMNS
    if not current:
        present = {k for rec in records for r in rec["rows"] for k in r}
        cols = [c for c in RESULTS_COLUMNS if c in present]
    text, _ = results_text(records, cols)
    want_cols, want = _parse_csv(text, f"{path / CELLS_DIR}/*.json")
    problem = None
    if not results.is_file():
        problem = "is missing"
    else:
        try:
            columns, rows = _read_csv(results)
            _check_rows(columns, rows, results)
        except RunDirError as e:
            problem = f"is damaged ({str(e).removeprefix(f'{results}: ')})"
        else:
            recorded = {str(rec["cell"].get("id")) for rec in records}
            orphans = sorted({str(r["cell"]) for r in rows} - recorded)
            if orphans:
                raise RunDirError(
                    f"{results}: holds rows of cell(s) with no record in {CELLS_DIR}/ "
                    f"({', '.join(orphans[:3])}{', ...' if len(orphans) > 3 else ''}); the run "
                    "directory is damaged (a cell record was removed?)"
                )
            shared = [c for c in columns if c in want_cols]
            mine = [tuple(r.get(c) for c in shared) for r in rows]
            theirs = [tuple(r.get(c) for c in shared) for r in want]
            if mine != theirs:
                problem = (
                    f"differs from {CELLS_DIR}/*.json ({len(rows)} rows there, "
                    f"{len(want)} in the cell records)"
                )
            else:
                return columns, rows, []
    notice = (
        f"{results} {problem}: the results were rebuilt from {CELLS_DIR}/*.json (the source of "
        f"truth, {len(want)} rows); the file on disk was left as it is"
    )
    _check_rows(want_cols, want, path / CELLS_DIR)
    return want_cols, want, [notice]


def load_run(path: Path) -> Run:
    """Read a run directory, upgraded to the current format. RunDirError (one line) for anything
    that is not a readable run."""
    path = Path(path)
    manifest = _read_manifest(path)
    check_version(manifest, str(path / MANIFEST))  # a newer format's files may mean anything
    columns, rows, notices = _results(path, manifest)
    for r in rows:
        r["repeat"] = r["repeat"] or 1
    raw = migrate(RawRun(manifest=manifest, columns=columns, rows=rows), str(path / MANIFEST))
    # Columns added to the current format without a version bump (e.g. client_*): absent in a run
    # written before them, read as empty.
    added = [c for c in RESULTS_COLUMNS if c not in raw.columns] if raw.columns else []
    for r in raw.rows:
        for c in added:
            r.setdefault(c, "" if c in TEXT_COLUMNS else None)
    raw.columns = [*raw.columns, *added]
    check_manifest(raw.manifest, str(path / MANIFEST))
    return Run(
        path=path, manifest=raw.manifest, rows=raw.rows, columns=raw.columns, notices=notices
    )
