"""The matrix runner: resolve, preflight, prepare the dataset once, run every cell, write the run.

Order of a run (DESIGN.md "How a run flows"): validate -> plan (interleaved) -> preflight ->
dataset prepared once and cached pristine -> cells, each recorded atomically the moment it ends ->
report. SIGINT/SIGTERM become an Interrupted exception in the main thread, so the same `finally`
blocks that stop servers on a failure also stop them on Ctrl-C; the interrupted cell is marked, THP
is restored, and the exit code is 130/143.
"""

from __future__ import annotations

import os
import signal
from datetime import datetime
from pathlib import Path

from analysis.rundir_format import FORMAT_VERSION
from collectors.host import host_metadata
from collectors.thp_probe import prctl_blocks_madvise
from servers.errors import ServerError
from suites import datasets, preflight
from suites.cell import CellContext
from suites.cell_kinds import MongoCell, MySQLCell
from suites.config import LoadedSuite, Suite
from suites.display import Display
from suites.errors import Interrupted, SuiteError
from suites.plan import CellPlan, estimate_cell_seconds, plan_cells
from suites.rundir import RunDir, now_iso
from suites.thp import ThpController

TOOL_VERSION = "0.1.0"


class _SignalGate:
    """SIGINT/SIGTERM -> Interrupted, once. A second signal while servers are being stopped and THP
    restored is noted, not raised: the clean-up that the first one started must finish (a stop cut
    short would leave a server unreaped and THP changed)."""

    def __init__(self):
        self.first: int | None = None

    def __call__(self, signum, _frame):
        if self.first is None:
            self.first = signum
            raise Interrupted(signum)


class Matrix:
    def __init__(
        self,
        loaded: LoadedSuite,
        suite: Suite,
        resume: Path | None = None,
        display: Display | None = None,
        cache_root: Path | None = None,
    ):
        self.loaded = loaded
        self.suite = suite
        self.resume = resume
        self.display = display or Display(enabled=False)
        self.cache_root = cache_root or datasets.default_cache_root()
        self.run_dir: RunDir | None = None
        self.manifest: dict = {}

    # -- resolution ------------------------------------------------------------------------------
    def resolve_server(self):
        s = self.suite.server
        if s.flavor == "mongodb":
            from servers.mongodb import find_mongod

            b = find_mongod(s.binary or None)
            return b, f"mongodb-{b.version}"
        from servers.mysql import find_mysql

        b = find_mysql(s.binary or None, s.basedir or None)
        if s.flavor != "mariadb" and b.flavor != s.flavor:
            raise SuiteError(
                f"server.flavor is {s.flavor!r} but {b.path} is {b.flavor} {b.version}"
            )
        return b, f"{b.flavor}-{b.version}"

    def resolve_allocators(self, binary) -> list:
        from servers.allocators import resolve

        custom = [c.model_dump() for c in self.suite.allocators.custom]
        allocs = resolve(list(self.suite.allocators.use), custom=custom)
        if not allocs:
            raise SuiteError("allocators.use: no usable allocator (see `mallocsweep allocators`)")
        unusable = [a for a in allocs if not a.usable]
        if unusable:
            a = unusable[0]
            raise SuiteError(f"allocator {a.name!r} is not usable here: {a.why_not}")
        return allocs

    # -- the run -----------------------------------------------------------------------------------
    def run(self) -> int:
        gate = _SignalGate()
        old_int = signal.signal(signal.SIGINT, gate)
        old_term = signal.signal(signal.SIGTERM, gate)
        thp = None
        try:
            binary, label = self.resolve_server()
            allocators = self.resolve_allocators(binary)
            by_name = {a.name: a for a in allocators}
            cells = plan_cells(
                label,
                [a.name for a in allocators],
                list(self.suite.thp.modes),
                self.suite.run.repeat,
            )
            ThpController(None).check(list(self.suite.thp.modes))  # refuse before writing anything
            self.run_dir = self._open_run_dir(label, cells)
            thp = ThpController(self.run_dir.path, defrag=self.suite.thp.defrag)
            ds_kb = preflight.estimate_dataset_kb(
                self.suite.suite.kind, self.suite.dataset.tables, self.suite.dataset.table_size
            )
            self.manifest["preflight"] = preflight.preflight(self.suite, self.run_dir.path, ds_kb)
            todo = [c for c in cells if self.manifest_cell(c.id).get("status") != "ok"]
            self.display.start_matrix(len(todo), estimate_cell_seconds(self.suite) * len(todo))
            dataset = None
            if self.suite.server.flavor != "mongodb":
                self.display.note("preparing the dataset (once; cached for later runs)")
                dataset = datasets.ensure(self.suite, binary, self.cache_root, self.run_dir)
                self.manifest["dataset"] = dataset.to_manifest()
                self._save_manifest()
            for cell in todo:
                self._run_cell(cell, binary, by_name[cell.allocator], thp, dataset)
            self.manifest["status"] = "finished"
            return 0
        except Interrupted as e:
            if self.run_dir is not None:
                self.manifest["status"] = "interrupted"
                self.manifest["interrupted_by"] = signal.Signals(e.signum).name
            raise
        finally:
            if thp is not None:
                restored = thp.restore()
                if restored:
                    self.manifest["thp_restored"] = restored
            if self.run_dir is not None:
                self.manifest["finished_at"] = now_iso()
                self._save_manifest()
                self.run_dir.rebuild_results()
            self.display.stop()
            signal.signal(signal.SIGINT, old_int)
            signal.signal(signal.SIGTERM, old_term)

    def _run_cell(self, plan: CellPlan, binary, allocator, thp, dataset) -> None:
        entry = self.manifest_cell(plan.id)
        attempt = self.run_dir.archive_attempt(plan.id)
        if attempt is not None:
            entry.setdefault("earlier_attempts", []).append(f"attempt{attempt}")
        entry.update({"status": "running", "started_at": now_iso()})
        self._save_manifest()
        self.display.start_cell(plan, estimate_cell_seconds(self.suite))
        ctx = CellContext(
            suite=self.suite,
            plan=plan,
            run_dir=self.run_dir,
            server_binary=binary,
            allocator=allocator,
            thp=thp,
            dataset=dataset,
            on_progress=self.display.phase,
            on_interval=self.display.interval,
        )
        runner_cls = MongoCell if self.suite.server.flavor == "mongodb" else MySQLCell
        cell = runner_cls(ctx)
        try:
            outcome = cell.run()
        except Interrupted:
            record = cell.record or dict(entry)
            record.update(
                {
                    "status": "interrupted",
                    "error": "interrupted by signal",
                    "finished_at": now_iso(),
                }
            )
            self.run_dir.write_cell(record, [])
            self._set_manifest_cell(record)
            raise
        self.run_dir.write_cell(outcome.record, outcome.rows)
        self._set_manifest_cell(outcome.record)
        self.run_dir.rebuild_results()
        self.display.end_cell(plan, outcome)

    # -- manifest --------------------------------------------------------------------------------
    def _open_run_dir(self, label: str, cells: list[CellPlan]) -> RunDir:
        if self.resume is not None:
            rd = RunDir.open_existing(self.resume)
            self.manifest = rd.read_manifest()
            self._check_resumable(label)
            done = rd.finished_cells()
            for c in self.manifest["cells"]:
                rec = done.get(c["id"])
                if rec is not None:
                    c.update(rec["cell"])
                elif c.get("status") in ("running", "interrupted"):
                    c["status"] = "pending"
            self.manifest["status"] = "running"
            self.manifest.setdefault("resumed_at", []).append(now_iso())
            self._save_manifest(rd)
            return rd
        stamp = datetime.now().strftime("%Y%m%dT%H%M%S")
        out = Path(self.suite.run.out)
        rd = RunDir.create(out, f"{self.suite.suite.name}-{label}-{stamp}")
        self.manifest = {
            "format_version": FORMAT_VERSION,
            "tool": {"name": "mallocsweep", "version": TOOL_VERSION},
            "run_id": rd.path.name,
            "status": "running",
            "started_at": now_iso(),
            "finished_at": None,
            "runner_pid": os.getpid(),
            "host": host_metadata(),
            # Whether a server's own THP opt-out also blocks MADV_HUGEPAGE here (the report's advice).
            "thp_prctl_probe": prctl_blocks_madvise(),
            "suite": self.suite.as_dict(),
            "suite_file": self.loaded.path,
            "suite_sha256": self.loaded.sha256,
            "cells": [
                {
                    "id": c.id,
                    "index": c.index,
                    "round": c.round,
                    "repeat": c.round,
                    "allocator": {"name": c.allocator},
                    "thp": {"requested": c.thp},
                    "server": {"label": c.server_label},
                    "status": "pending",
                    "error": None,
                }
                for c in cells
            ],
        }
        self._save_manifest(rd)
        return rd

    def _check_resumable(self, label: str) -> None:
        m = self.manifest
        if m.get("format_version") != FORMAT_VERSION:
            raise SuiteError(
                f"--resume: run format {m.get('format_version')} is not {FORMAT_VERSION}"
            )

        def identity(d: dict) -> dict:  # where the run is written does not change what runs
            return {k: v for k, v in d.items() if k != "run"} | {
                "repeat": d.get("run", {}).get("repeat")
            }

        if identity(m.get("suite") or {}) != identity(self.suite.as_dict()):
            raise SuiteError(
                "--resume: the suite settings differ from the run's (same file and options needed)"
            )
        host = host_metadata()
        for key in ("kernel", "cpu_model", "cores", "glibc"):
            if m.get("host", {}).get(key) != host.get(key):
                raise SuiteError(
                    f"--resume: host {key} changed ({m['host'].get(key)!r} -> {host.get(key)!r})"
                )
        labels = {c["server"].get("label") for c in m["cells"]}
        if labels and label not in labels:
            raise SuiteError(
                f"--resume: the server is now {label}, the run used {', '.join(sorted(labels))}"
            )
        pid = m.get("runner_pid")
        if (
            m.get("status") == "running"
            and pid
            and pid != os.getpid()
            and Path(f"/proc/{pid}").exists()
        ):
            raise SuiteError(f"--resume: the run is still in progress (runner pid {pid})")
        m["runner_pid"] = os.getpid()

    def manifest_cell(self, cell_id: str) -> dict:
        for c in self.manifest["cells"]:
            if c["id"] == cell_id:
                return c
        raise KeyError(cell_id)

    def _set_manifest_cell(self, record: dict) -> None:
        cells = self.manifest["cells"]
        for i, c in enumerate(cells):
            if c["id"] == record["id"]:
                cells[i] = record
        self._save_manifest()

    def _save_manifest(self, rd: RunDir | None = None) -> None:
        (rd or self.run_dir).write_manifest(self.manifest)


def run_suite(
    loaded: LoadedSuite,
    suite: Suite,
    resume: Path | None,
    display: Display,
    cache_root: Path | None = None,
) -> tuple[int, Path | None]:
    """Run the matrix; (exit code, run dir). Raises Interrupted after recording the interruption."""
    m = Matrix(loaded, suite, resume=resume, display=display, cache_root=cache_root)
    try:
        code = m.run()
    except ServerError as e:
        raise SuiteError(str(e)) from None
    failed = [
        c for c in m.manifest.get("cells", []) if c.get("status") != "ok" or c.get("level_failures")
    ]
    return (code if not failed else 3), m.run_dir.path
