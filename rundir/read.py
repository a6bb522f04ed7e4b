"""Reading a run directory: manifest, results and timelines, typed, with format checks.

Every table, plot and comparison works on the `Run` this module returns. A run may be unfinished
or have failed cells: what succeeded is still readable. A run written by a newer mallocsweep is
refused (its columns may mean something else); an older format is upgraded in memory by
rundir/migrations.py, never rewritten on disk.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from rundir.errors import RunDirError
from rundir.format import MANIFEST, RESULTS_COLUMNS, SAMPLES_DIR, SPAN_WINDOW, TEXT_COLUMNS
from rundir.integrity import check_run, parse_csv, read_csv_text, typed_row
from rundir.migrations import RawRun, migrate
from rundir.records import check_manifest
from rundir.regular import kind_of

# What a timeline needs to be read at all (plots and intervals select on these).
REQUIRED_SAMPLE_COLUMNS = ("t_s", "phase")

# Host keys as the brief names them -> the spelling collectors/ may write instead.
HOST_ALIASES = {"cores": "cpu_count", "glibc": "glibc_version", "governor": "cpu_governor"}

BASELINE_ALLOCATOR = "glibc"  # "no preload": every ratio in the report is relative to it


def _read_csv(path: Path) -> tuple[list[str], list[dict]]:
    columns, rows = parse_csv(read_csv_text(path), str(path), short_ok=True)
    return columns, [typed_row(r) for r in rows]


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
    # What the run's source of truth lacks (rundir.integrity), read anyway (--allow-incomplete);
    # also the first of `notices`.
    gaps: list[str] = field(default_factory=list)
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
            if path.exists() and not path.is_file():  # a FIFO would be waited on: named instead
                raise RunDirError(
                    f"{path}: {kind_of(path.stat().st_mode)}, not a regular file; a timeline "
                    "is a file"
                )
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
        "<workload>@<threads>#c<cycle>" (+ "/tc<size>"; suites.workloads.sysbench.churn)."""
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


def load_run(path: Path, allow_incomplete: bool = False) -> Run:
    """Read a run directory, upgraded to the current format, after its integrity check
    (rundir.integrity). RunDirError (one line) for anything that is not a readable run, and for a
    run whose source of truth lacks something (a cell record, a row, a column, a figure), unless
    `allow_incomplete`: then what is there is read and the gaps are the run's first notices."""
    path = Path(path)
    found = check_run(path)
    if found.gaps and not allow_incomplete:
        raise RunDirError(found.refusal())
    notices = [*found.gap_lines(), *found.repaired, *found.notes]
    rows = found.rows
    for r in rows:
        r["repeat"] = r["repeat"] or 1
    raw = migrate(
        RawRun(manifest=found.manifest, columns=found.columns, rows=rows), str(path / MANIFEST)
    )
    # Columns added to the current format without a version bump (e.g. client_*): absent in a run
    # written before them, read as empty.
    added = [c for c in RESULTS_COLUMNS if c not in raw.columns] if raw.columns else []
    for r in raw.rows:
        for c in added:
            r.setdefault(c, "" if c in TEXT_COLUMNS else None)
    raw.columns = [*raw.columns, *added]
    check_manifest(raw.manifest, str(path / MANIFEST))
    return Run(
        path=path,
        manifest=raw.manifest,
        rows=raw.rows,
        columns=raw.columns,
        notices=notices,
        gaps=list(found.gaps),
    )
