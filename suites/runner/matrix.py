"""The matrix runner: resolve, preflight, prepare the dataset once, run every cell, write the run.

Order of a run (docs/architecture.md, "One run, step by step"): validate -> plan (interleaved; on --resume, the
run's own cells) -> preflight, before anything is written -> run directory -> dataset prepared once
and cached pristine -> cells, each recorded atomically the moment it ends -> report. A run that
stops on an error is marked "failed" with the error in its manifest.

Signals (SIGINT, SIGTERM, SIGHUP: a closed terminal or SSH session) only set a flag
(servers.interrupts); the run raises Interrupted itself at safe points (before each cell, between
levels, in its waits), so the same `finally` blocks that stop servers on a failure also stop them
on Ctrl-C, and they run with signals held: load generators, collectors and server stopped and
reaped, the cell marked, THP restored, the manifest written, in that order, whatever else
arrives. A second signal says what is still awaited, a third skips the server's clean shutdown
(it is still killed and reaped). Exit code 128 + signal: 130, 143, 129.
"""

from __future__ import annotations

import shlex
import signal
import time
from dataclasses import replace
from datetime import datetime
from pathlib import Path

from analysis.verdicts import aa_name
from collectors.host import host_metadata
from collectors.hugepages import system_hugepages
from collectors.procfs import ProcFS
from collectors.thp_probe import prctl_blocks_madvise
from rundir.format import FORMAT_VERSION
from rundir.records import Tool
from rundir.write import RunDir, now_iso
from servers import callcost, exec_helper, interrupts
from servers.allocators import detect_all, resolve
from servers.errors import ServerError
from servers.verify import linked_allocators
from suites.datasets import prepare as dataset_prepare
from suites.errors import Interrupted, SuiteError
from suites.families.registry import family_of
from suites.kit.manifest import run_record as kit_run_record
from suites.remote.clients import RemoteClients
from suites.remote.hosts import ClientHosts
from suites.runner import alternate, leftovers, preflight
from suites.runner import thp as thp_mod
from suites.runner.budget import Budget, plan_design, recorded_design, spent_s
from suites.runner.cell import CellContext
from suites.runner.display import Display
from suites.runner.plan import (
    CellPlan,
    baseline_first,
    estimate_cell_seconds,
    plan_cells,
    plan_round,
)
from suites.runner.resume import (
    check_allocators,
    check_resumable,
    check_server_build,
    clear_stale_work,
    plan_from_manifest,
)
from suites.runner.servers import RunServer, run_servers
from suites.runner.soak import Soak, check_soak, soak_design, soak_seconds
from suites.runner.thp import LargePagesNeed, ThpController
from suites.runner.workload_cell import WorkloadCell
from suites.suite.model import MAX_REPEAT, LoadedSuite, Suite
from suites.workloads import registry as workloads
from suites.workloads.sysbench.runner import WRAPPER
from suites.workloads.sysbench.scripts import modules as script_modules


def cost_arms(installed: list, servers: list, baseline: str) -> list:
    """The allocators whose per-call cost bounds the run's exposure words: the core ones installed
    here and the run's own arms on this host, once each. A root's own build runs only under its
    chroot and a builtin one has no library to preload; the A/A arm is the baseline again."""
    aa = aa_name(baseline)
    arms = [
        a
        for srv in servers
        for a in (srv.allocators or [])
        if a.root is None and a.kind != "builtin" and a.name != aa
    ]
    return list({a.name: a for a in [*(a for a in installed if a.core), *arms]}.values())


class Matrix:
    def __init__(
        self,
        loaded: LoadedSuite,
        suite: Suite,
        resume: Path | None = None,
        display: Display | None = None,
        cache_root: Path | None = None,
        shard=None,
    ):
        self.loaded = loaded
        self.shard = shard  # suites.runner.shard.Shard: run only this share of the rounds (a fleet)
        self.clients = (
            None  # suites.remote.clients.RemoteClients while a run with a client host runs
        )
        self.suite = suite
        self.resume = resume
        self.display = display or Display(enabled=False)
        self.cache_root = cache_root or dataset_prepare.default_cache_root()
        self.run_dir: RunDir | None = None
        self.root = None  # the baseline server's root, once resolve_servers has found it
        self.servers: list[RunServer] = []  # the run's servers, baseline first (resolve_servers)
        self.manifest: dict = {}
        self.started = time.monotonic()
        self.design = plan_design(suite, 0.0, MAX_REPEAT)
        self.restored_leftover: dict | None = None  # what a killed run had left changed
        self.live_servers = 1  # servers alive at once (the alternate design: a round's arms)
        self._done: set[str] = set()  # cells of a resumed run already ok

    # -- resolution ------------------------------------------------------------------------------
    def _engines(self) -> tuple[str, ...]:
        """The storage engines its cells run (a matrix dimension; its family's)."""
        return family_of(self.suite).engines(self.suite.server)

    def resolve_servers(self) -> list[RunServer]:
        """Every server of the run, resolved (binary, label), baseline first; ServerError for one
        that cannot be found. Labels must tell the servers apart (they name cells and rows)."""
        self.servers = run_servers(self.suite)
        for srv in self.servers:
            srv.resolve()
        self.root = self.servers[0].root
        return self.servers

    def resolve_server(self):
        """(binary, label) of the run's (baseline) server."""
        first = self.resolve_servers()[0]
        return first.binary, first.label

    def _server_root(self):
        """The baseline server's root (servers.root.ServerRoot: server.root, or a fetched root),
        or None for a host server. Set by resolve_servers."""
        return self.root

    def resolve_allocators(self, binary=None, server: RunServer | None = None) -> list:
        """The suite's allocators, each usable here (for `server`: with its root's builds). `all`
        on a MySQL-family binary that links an allocator itself (Debian's MySQL 9.7 links
        tcmalloc) measures that one as `builtin` instead of glibc, which such a binary cannot
        run with (an explicit glibc is refused)."""
        root = server.root if server is not None else self._server_root()
        family = server.family if server is not None else family_of(self.suite)
        custom = [c.model_dump() for c in self.suite.allocators.custom]
        use = list(self.suite.allocators.use)
        if "all" in use and binary is not None and family.links_allocators:
            linked = linked_allocators(Path(binary.host_path))
            if linked:
                use = ["builtin" if u == "all" else u for u in use]
                core = resolve(["all"], root=root)
                use += [a.name for a in core if a.name != "glibc"]
                use += [c.name for c in self.suite.allocators.custom]
                self.display.note(
                    f"{binary.path} links {linked[0][0]} itself: `all` measures it as 'builtin' "
                    "instead of glibc"
                )
        allocs = resolve(use, custom=custom, root=root)
        if not allocs:
            raise SuiteError("allocators.use: no usable allocator (see `mallocsweep allocators`)")
        unusable = [a for a in allocs if not a.usable]
        if unusable:
            a = unusable[0]
            where = (
                f" for server {server.name!r} ({server.label})" if server and server.name else ""
            )
            raise SuiteError(f"allocator {a.name!r} is not usable here{where}: {a.why_not}")
        return allocs

    def _resume_plan(self) -> tuple[RunDir, list[CellPlan]]:
        """The resumed run's directory and its own cells; each server's allocators of the cells
        still to run, checked against the builds the run started with."""
        rd = RunDir.open_existing(self.resume)
        manifest = rd.read_manifest()
        labels = [srv.label for srv in self.servers]
        check_resumable(manifest, self.suite.as_dict(), labels, host_metadata())
        cells = plan_from_manifest(manifest, labels[0])
        done = {
            cid for cid, rec in rd.finished_cells().items() if rec["cell"].get("status") == "ok"
        }
        self._done = done
        if self.suite.run.design == "alternate":
            alternate.check_resume(cells, done, self.resume)
        custom = [c.model_dump() for c in self.suite.allocators.custom]
        for srv in self.servers:
            check_server_build(manifest, srv.label, getattr(srv.binary, "sha256", None))
            names = list(
                dict.fromkeys(
                    c.allocator
                    for c in cells
                    # a soak's next segment runs every arm again, its finished cells' too
                    if (c.id not in done or soak_seconds(self.suite)) and c.server == srv.name
                )
            )
            srv.allocators = []
            if names:
                try:
                    srv.allocators = self._resume_allocators(names, custom, srv)
                except ServerError as e:
                    raise SuiteError(f"--resume: {e}") from None
                check_allocators(manifest, srv.allocators, srv.name)
        return rd, cells

    def _resume_allocators(self, names: list[str], custom: list[dict], srv) -> list:
        """The allocators of the cells still to run. The A/A arm is no allocator of the registry
        (its name is the baseline's plus "-aa"): it is made again from the baseline's build, as
        the run that planned it made it (with_aa_arm); the baseline is resolved for it even when
        none of its own cells is left."""
        aa = aa_name(self.suite.run.baseline) if self.suite.run.aa else None
        if aa not in names:
            return resolve(names, custom=custom, root=srv.root)
        base = self.suite.run.baseline
        plain = [n for n in names if n != aa]
        found = resolve(list(dict.fromkeys([*plain, base])), custom=custom, root=srv.root)
        found = with_aa_arm(found, self.suite)
        return [a for a in found if a.name in names]

    def _thp_controller(self, run_dir: Path | None) -> ThpController:
        """The run's hugepage controller: its settings, and what a large-pages cell needs (the
        largest of the run's servers': one cell runs at a time)."""
        thp = self.suite.thp
        need = None
        if any(thp.large_pages):
            # families that can (the suite's validation refused the others)
            page_kb = system_hugepages(ProcFS()).get("hugepage_size_kb")
            kb = max(srv.family.large_pages_kb(srv.section, srv.binary) for srv in self.servers)
            need = LargePagesNeed.of(kb, page_kb, thp.large_pages_reserve)
        return ThpController(
            run_dir, defrag=thp.defrag if isinstance(thp.defrag, str) else "system",
            settings=thp.settings(), large_pages=need,
        )  # fmt: skip

    def _restore_leftover(self) -> None:
        """What a killed run of ours left changed (THP, khugepaged, huge pages): put back now,
        and said. A run still at work is left alone (the machine-wide lock keeps us apart)."""
        left = thp_mod.leftover()
        if left is None or left.get("runner_alive"):
            return
        try:
            rec = thp_mod.restore_leftover()
        except SuiteError as e:
            raise SuiteError(
                f"a killed run left the system changed and it could not be put back ({e}); "
                "`mallocsweep doctor --repair` as root"
            ) from None
        if rec is not None:
            self.display.note(thp_mod.restored_text(rec))
            self.restored_leftover = rec

    def _preflight(self, out_root: Path) -> list[dict]:
        """Before anything is written: disk on --out's (and the dataset cache's) filesystem,
        memory, descriptors, threads; the datasets of every server not yet cached."""
        s = self.suite
        prepared = workloads.of(s).prepared_statements(s)
        needs = [srv.family.needs(srv.section, s.max_threads, prepared) for srv in self.servers]
        # A cached dataset needs no preparation room (the key is dataset_prepare.ensure's own).
        restores = [srv for srv in self.servers if srv.family.restores_dataset]
        uncached = [
            srv
            for srv in restores
            if not dataset_prepare.is_cached(s, srv.binary, self.cache_root, srv.section)
        ]
        kb = [preflight.estimate_dataset_kb(s, n) for n in needs]
        # One cell's copy at a time (the largest), and the preparation of each uncached dataset.
        dataset_kb = (
            max(kb)
            if not uncached
            else sum(k for srv, k in zip(self.servers, kb, strict=True) if srv in uncached)
        )
        most = max(needs, key=lambda n: (n.open_files, n.per_connection_kb))
        # a soak keeps every arm's server (and its datadir copy) alive at once, and so does the
        # alternate design a round's arms (self.live_servers)
        soak_alive = (
            max(1, len(self._arm_names(self.servers[0])) * len(self._engines()))
            if soak_seconds(s)
            else 1
        )
        return preflight.preflight(
            s,
            out_root,
            dataset_kb,
            cache_root=self.cache_root if restores else None,
            cached=not uncached,
            needs=most,
            server=max(self.servers, key=lambda srv: srv.family.cache_kb(srv.section)).section,
            live_servers=max(self.live_servers, soak_alive),
        )

    def _call_cost(self) -> dict | None:
        """The per-call cost of the core allocators installed on this machine and of the run's
        own arms that live on this host (a custom library, a variant), and the largest difference
        between two (servers/callcost.py), when the run counts calls; an error is recorded, never
        fatal: the report then decides nothing from exposure. The run's arms are in the bound
        because "cannot matter here" is a claim about them: a custom arm whose calls cost a
        microsecond more can move a point that no installed allocator can (measured: the
        positive control's slowed glibc, docs/measurements/2026-11-28-control.md)."""
        mem = self.suite.memory
        if not (mem.count_calls and mem.alloc_stats):
            return None
        self.display.note(
            "per-call cost of the allocators (kept per library build and setting; new ones "
            "measured now)"
        )
        try:
            arms = cost_arms(detect_all(), self.servers, self.suite.run.baseline)
            return callcost.installed_table(arms)
        except ServerError as e:
            return {"error": str(e)}

    # -- the run -----------------------------------------------------------------------------------
    def run(self) -> int:
        self.started = time.monotonic()
        gate = interrupts.Interrupts()
        gate.install()
        thp = None
        self.clients = None
        try:
            self.resolve_servers()
            check_labels(self.servers)
            if self.resume is not None:
                resumed, cells = self._resume_plan()
            else:
                resumed = None
                for srv in self.servers:
                    srv.allocators = with_aa_arm(
                        self.resolve_allocators(srv.binary, srv), self.suite
                    )
                cells = plan_cells(
                    self._plan_servers(),
                    self._arm_names(self.servers[0]),
                    self.suite.thp.labels(),
                    self.suite.run.repeat,
                    self._engines(),
                )
                per_round = (
                    sum(len(srv.allocators) for srv in self.servers)
                    * len(self.suite.thp.labels())
                    * len(self._engines())
                )
                if self.shard is not None:
                    self.manifest_shard = self.shard.to_manifest(cells, self.suite.run.repeat)
                    cells = self.shard.select(cells, self.suite.run.repeat)
                self.design = plan_design(
                    self.suite, estimate_cell_seconds(self.suite) * per_round, MAX_REPEAT
                )
            check_soak(self.suite, len(self.servers), self.shard)
            for srv in self.servers:
                srv.family.check_allocators(srv.binary, srv.allocators)
                # An engine the server does not have (MyRocks on MySQL, or without its plugin).
                srv.family.check_engines(srv.binary, self._engines())
                # What the workload needs of this server beyond the family's (a dump client).
                workloads.of(self.suite).check_server(self.suite, srv.binary)
            # A system setting a killed run left changed is put back first (and said).
            self._restore_leftover()
            # Refuse before writing anything: hugepage settings this machine cannot make (a mode
            # its kernel does not offer, no root, too few huge pages), and shortfalls.
            self._thp_controller(None).check(self.suite.thp.labels())
            exec_helper.helper()  # every child starts through it: built here if it must be
            # The alternate design keeps a round's arms alive together: preflight counts them.
            self.live_servers = alternate.live_servers(self.suite, cells, self._done_ids())
            checks = self._preflight(self.resume or Path(self.suite.run.out))
            gate.check()  # safe point: nothing written yet
            if self.suite.clients.hosts:
                # The client host is checked before anything is written, like this machine.
                self.display.note(f"checking client host {', '.join(self.suite.clients.hosts)}")
                self.clients = open_clients(self.suite)
            if resumed is not None:
                stale = clear_stale_work(resumed, cells)
                self.run_dir = self._reopen(resumed, stale)
            else:
                self.run_dir = self._create_run_dir(cells)
            self.manifest["preflight"] = checks
            # the bound of the exposure words (analysis/exposure.py), measured once per build
            self.manifest["call_cost"] = self._call_cost()
            if self.clients is not None:
                self.manifest["clients"] = self.clients.to_manifest()
            thp = self._thp_controller(self.run_dir.path)
            todo = [c for c in cells if self.manifest_cell(c.id).get("status") != "ok"]
            self.display.start_matrix(len(todo), estimate_cell_seconds(self.suite) * len(todo))
            dataset = self._datasets(cells if soak_seconds(self.suite) else todo)
            if soak_seconds(self.suite):
                # one life per arm, the arms taking turns (suites/runner/soak.py)
                Soak(self, thp, dataset).run(cells)
            else:
                self._run_cells(todo, thp, dataset)
            if self.suite.run.budget_s:
                self._more_rounds(cells, thp, dataset, resumed is not None)
            self.manifest["status"] = "finished"
            self.manifest.pop("error", None)
            if not any(c.get("status") == "ok" for c in self.manifest["cells"]):
                # Nothing was measured: not a finished run (the exit code is 3, see run_suite).
                self.manifest["status"] = "failed"
                self.manifest["error"] = "every cell failed; see each cell's error"
            return 0
        except Interrupted as e:
            if self.run_dir is not None:
                self.manifest["status"] = "interrupted"
                self.manifest["interrupted_by"] = signal.Signals(e.signum).name
                self._resume_hint(e)
            raise
        except Exception as e:
            # The run stops here (a cell's own failure never gets this far): say so in the run.
            if self.run_dir is not None:
                self.manifest["status"] = "failed"
                first = str(e).splitlines()[0] if str(e) else ""
                self.manifest["error"] = f"{type(e).__name__}: {first}"
            raise
        finally:
            # Signals held from here on: THP restored and the manifest written whatever arrives;
            # a signal that came meanwhile is raised below once everything is written.
            raising = self.manifest.get("status") == "interrupted"  # Interrupted on its way out
            with gate.held():
                self._close(thp, gate)
            gate.uninstall()
            if gate.first is not None and not raising:
                raise self._resume_hint(Interrupted(gate.first))

    def _resume_hint(self, e: Interrupted) -> Interrupted:
        """The interrupted run's directory and the command that finishes it, said with the
        interrupt (suites.cli.main): a Ctrl-C'd run printed neither."""
        if self.run_dir is not None:
            e.run_dir = self.run_dir.path
            e.resume = f"mallocsweep run {shlex.quote(str(self.loaded.path))} --resume " + (
                shlex.quote(str(self.run_dir.path))
            )
        return e

    def _done_ids(self) -> set[str]:
        return self._done

    def _arm_names(self, srv: RunServer) -> list[str]:
        return baseline_first([a.name for a in srv.allocators], self.suite.run.baseline)

    def _plan_servers(self):
        """What the plan needs of the servers: the one label, or every server's name, label and
        allocators (baseline first)."""
        if len(self.servers) == 1 and not self.servers[0].name:
            return self.servers[0].label
        return [replace(srv.plan(), allocators=tuple(self._arm_names(srv))) for srv in self.servers]

    def _server(self, name: str) -> RunServer:
        return next(srv for srv in self.servers if srv.name == name)

    def _datasets(self, todo: list[CellPlan]) -> dict:
        """(server name, engine) -> its pristine datadir, prepared once per server and engine
        (each server's own build: a server never gets another's datadir)."""
        dataset: dict = {}
        wanted = list(dict.fromkeys((c.server, c.engine) for c in todo))
        wanted = [(n, e) for n, e in wanted if self._server(n).family.restores_dataset]
        if not wanted:
            return dataset
        self.display.note("preparing the dataset (once per server; cached for later runs)")
        for name, engine in wanted:
            srv = self._server(name)
            dataset[(name, engine)] = dataset_prepare.ensure(
                self.suite, srv.binary, self.cache_root, self.run_dir, engine, srv.section, name
            )
        # "dataset" stays the first one's (its readers know one); every engine's is under
        # "datasets" (issue 15), every server's under servers[].datasets.
        first = next(iter(dataset.values()))
        self.manifest["dataset"] = first.to_manifest()
        self.manifest["datasets"] = {
            e: d.to_manifest() for (n, e), d in dataset.items() if n == self.servers[0].name
        }
        for entry in self.manifest.get("servers") or []:
            own = {e: d.to_manifest() for (n, e), d in dataset.items() if n == entry["name"]}
            if own:
                entry["datasets"] = own
        self._save_manifest()
        return dataset

    def _close(self, thp, gate) -> None:
        """The run's last clean-up, in order: THP restored, the manifest written (as interrupted
        if a signal came after the last safe point), the display stopped."""
        if self.clients is not None:
            with gate.doing("the client host's connection to close"):
                self.clients.close()
            if self.run_dir is not None:
                self.manifest["clients"] = self.clients.to_manifest()
        if thp is not None:
            with gate.doing("THP to be restored"):
                # Each cell gave back what it changed; this is the last resort (a cell that
                # could not), and the run says what the machine was given back.
                restored = thp.restore() or thp.last_restored
            if restored:
                self.manifest["thp_restored"] = restored
            elif thp.restore_error:
                self.manifest["thp_restore_error"] = thp.restore_error
        if self.run_dir is not None:
            if gate.first is not None and self.manifest.get("status") != "interrupted":
                self.manifest["status"] = "interrupted"
                self.manifest["interrupted_by"] = signal.Signals(gate.first).name
            self.manifest["finished_at"] = now_iso()
            with gate.doing("the manifest to be written"):
                self._save_manifest()
                self.run_dir.rebuild_results()
        try:
            self.display.stop()
        except OSError:  # a terminal gone with SIGHUP: nothing left to show
            pass

    def _more_rounds(self, cells, thp, dataset, resumed: bool = False) -> None:
        """The budget's loop: after each round, stop if every point is decided, the planned
        maximum is reached or the next round would not fit; else plan and run one more round.

        A resumed run goes on with the budget where it broke off: the design its manifest
        recorded before its first round (the planned looks the 5% is spent over; never planned
        again, which would change the spending after seeing data), the rounds it has planned,
        and the budget less the time its cells have taken so far (budget.spent_s)."""
        design, started = self.design, self.started
        rounds = self.suite.run.repeat
        if resumed:
            design = recorded_design(self.manifest.get("design") or {}, design)
            rounds = max(c.round for c in cells)
            started = time.monotonic() - spent_s(self.manifest["cells"])
        budget = Budget(self.suite.run.budget_s, design, self.suite.run.baseline, started)
        last_round_s = (time.monotonic() - started) / rounds
        while True:
            self.run_dir.rebuild_results()
            decision = budget.after_round(self.run_dir.path, rounds, last_round_s)
            self.display.note(decision.message)
            self.manifest.setdefault("design", {}).setdefault("looks", []).append(
                {"rounds": rounds, "message": decision.message}
            )
            if not decision.more:
                self.manifest["design"]["stopped"] = decision.message
                return
            rounds += 1
            new = plan_round(
                self._plan_servers(),
                self._arm_names(self.servers[0]),
                self.suite.thp.labels(),
                rounds,
                len(cells),
                self._engines(),
            )
            cells += new
            self.manifest["cells"] += [_pending(c) for c in new]
            self._save_manifest()
            t0 = time.monotonic()
            self.display.add_cells(len(new))
            self._run_cells(new, thp, dataset)
            last_round_s = time.monotonic() - t0

    def _run_cells(self, cells: list[CellPlan], thp, dataset) -> None:
        """The cells in plan order: one solo life each, or (the alternate design) each round's
        cells of one engine and THP setting together (suites/runner/alternate.py)."""
        if self.suite.run.design != "alternate":
            for cell in cells:
                self._run_cell(cell, thp, dataset)
            return
        for group in alternate.groups(cells):
            alternate.run_group(self, group, thp, dataset)

    def _run_cell(self, plan: CellPlan, thp, dataset) -> None:
        interrupts.check()  # safe point: between cells (and rounds)
        cell, entry = self.make_cell(plan, thp, dataset)
        try:
            outcome = cell.run()
        except Interrupted:
            self.record_interrupted(cell, entry)
            raise
        self.record_outcome(plan, outcome)

    def make_cell(self, plan: CellPlan, thp, dataset) -> tuple[WorkloadCell, dict]:
        """The cell's runner, its manifest entry marked running (an earlier attempt archived)."""
        srv = self._server(plan.server)
        allocator = next(a for a in srv.allocators if a.name == plan.allocator)
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
            server_binary=srv.binary,
            allocator=allocator,
            thp=thp,
            dataset=(dataset or {}).get((plan.server, plan.engine)),
            on_progress=self.display.phase,
            on_interval=self.display.interval,
            on_note=self.display.note,
            clients=self.clients,
            server=srv.section,
        )
        return WorkloadCell(ctx), entry

    def record_interrupted(self, cell: WorkloadCell, entry: dict) -> None:
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

    def record_outcome(self, plan: CellPlan, outcome) -> None:
        self.run_dir.write_cell(outcome.record, outcome.rows)
        self._set_manifest_cell(outcome.record)
        self.run_dir.rebuild_results()
        self.display.end_cell(plan, outcome)

    # -- manifest --------------------------------------------------------------------------------
    def _reopen(self, rd: RunDir, stale: list[str]) -> RunDir:
        self.manifest = rd.read_manifest()
        done = rd.finished_cells()
        for c in self.manifest["cells"]:
            rec = done.get(c["id"])
            if rec is not None:
                c.update(rec["cell"])
            elif c.get("status") in ("running", "interrupted"):
                c["status"] = "pending"
        self.manifest["status"] = "running"
        self.manifest.update(leftovers.runner_identity())
        self.manifest.pop("error", None)
        self.manifest.setdefault("resumed_at", []).append(now_iso())
        if stale:
            self.manifest.setdefault("stale_work_removed", []).extend(stale)
        self._save_manifest(rd)
        return rd

    def _create_run_dir(self, cells: list[CellPlan]) -> RunDir:
        stamp = datetime.now().strftime("%Y%m%dT%H%M%S")
        out = Path(self.suite.run.out)
        shard = f"-shard{self.shard.index}of{self.shard.count}" if self.shard is not None else ""
        several = len(self.servers) > 1
        # One server: named by its label; several: by their names (old-vs-new)
        what = "-vs-".join(srv.name for srv in self.servers) if several else self.servers[0].label
        rd = RunDir.create(out, f"{self.suite.suite.name}-{what}-{stamp}{shard}")
        try:
            leftovers.register(rd.path)  # so doctor finds its servers wherever --out put it
        except OSError as e:
            self.display.note(f"could not record the run for `mallocsweep doctor`: {e}")
        host = host_metadata()
        self.manifest = {
            "format_version": FORMAT_VERSION,
            "tool": Tool.installed().model_dump(),
            "run_id": rd.path.name,
            "status": "running",
            "started_at": now_iso(),
            "finished_at": None,
            **leftovers.runner_identity(),
            "host": host,
            # Whether a server's own THP opt-out also blocks MADV_HUGEPAGE here (the report's advice).
            "thp_prctl_probe": prctl_blocks_madvise(),
            "suite": self.suite.as_dict(),
            "suite_file": self.loaded.path,
            "suite_sha256": self.loaded.sha256,
            # The allocator builds this run measures; --resume refuses if one has changed. With
            # several servers, each build names its server (a root has its own packages).
            "allocators": [
                a.to_manifest() | ({"server": srv.name} if several else {})
                for srv in self.servers
                for a in srv.allocators
            ],
            # Every server: what it is, where it came from, its glibc and allocator builds
            # (format 5; one entry for a run of one server).
            "servers": [srv.to_manifest(host_glibc(host)) for srv in self.servers],
            # What was planned before any data: the looks and the level each is tested at.
            "design": self.design.to_dict()
            | {
                "baseline": self.suite.run.baseline,
                "aa_arm": aa_name(self.suite.run.baseline) if self.suite.run.aa else None,
                "baseline_server": self.servers[0].name if several else None,
                "budget_s": self.suite.run.budget_s,
            },
            # How arms are compared (suites/runner/alternate.py; absent in older runs: solo)
            "run_design": alternate.manifest_record(self.suite),
            "cells": [_pending(c) for c in cells],
        }
        soak = soak_design(self.suite)
        if soak is not None:
            # the soak's plan, looks and segments (suites/runner/soak.py, analysis/soak_looks.py)
            self.manifest["soak"] = soak
        kit = kit_run_record()  # the kit this run is made with (its launcher says), else None
        if kit is not None:
            self.manifest["kit"] = kit
        if self.shard is not None:
            self.manifest["shard"] = self.manifest_shard
        if self.restored_leftover is not None:
            self.manifest["restored_leftover"] = self.restored_leftover
        self._save_manifest(rd)
        return rd

    @staticmethod
    def pending_entry(c: CellPlan) -> dict:
        """The manifest entry of a cell not yet run (a soak's next segment adds them)."""
        return _pending(c)

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


def open_clients(suite: Suite):
    """The suite's client host(s), checked and prepared (suites.remote.clients; several:
    suites.remote.hosts), with the files its workload's clients need there."""
    workload = workloads.of(suite)
    scripts = {p: [str(m) for m in script_modules(p)] for p in workload.remote_files(suite)}
    if len(suite.clients.hosts) > 1:
        clients = ClientHosts(suite.clients, suite.max_threads, WRAPPER, scripts=scripts)
    else:
        program = workload.remote_program
        clients = RemoteClients(
            suite.clients, suite.max_threads, WRAPPER, program=program, scripts=scripts
        )
    clients.open()
    return clients


def _pending(c: CellPlan) -> dict:
    return {
        "id": c.id,
        "index": c.index,
        "round": c.round,
        "repeat": c.round,
        "allocator": {"name": c.allocator},
        "thp": {"requested": c.thp},
        "server": {"label": c.server_label} | ({"name": c.server} if c.server else {}),
        "engine": c.engine,
        "status": "pending",
        "error": None,
    } | ({"soak": {"segment": c.segment}} if c.segment > 1 else {})


def _empty_soak_segment(c: dict) -> bool:
    """A soak's segment broken before it recorded a cycle: nothing was lost, nothing failed."""
    return c.get("status") == "skipped" and (c.get("soak") or {}).get("cycles") == 0


def check_labels(servers: list[RunServer]) -> None:
    """Labels name cells and results rows: two servers may not share one."""
    labels = [srv.label for srv in servers]
    dup = next((x for x in labels if labels.count(x) > 1), None)
    if dup is not None:
        raise SuiteError(f"two servers of this run have the label {dup!r}; name them apart")


def host_glibc(host: dict) -> str | None:
    return host.get("glibc_version") or host.get("glibc")


def with_aa_arm(allocators: list, suite: Suite) -> list:
    """The allocators, plus the A/A arm when the suite asks for it: the baseline's very build and
    settings under a second name, so its proof is the baseline's proof. A baseline chosen on
    purpose (not the default, glibc) must be one of them: with `all`, which allocators those are
    is known only now."""
    names = [a.name for a in allocators]
    default = type(suite.run).model_fields["baseline"].default
    if suite.run.baseline != default and suite.run.baseline not in names:
        raise SuiteError(
            f"run.baseline {suite.run.baseline!r} (--baseline) is not one of the allocators this "
            f"run measures here ({', '.join(names)}); choose one of them"
        )
    if not suite.run.aa:
        return allocators
    base = next((a for a in allocators if a.name == suite.run.baseline), None)
    if base is None:
        raise SuiteError(
            f"run.aa: the baseline {suite.run.baseline!r} is not among the allocators run "
            f"({', '.join(a.name for a in allocators)}); add it or set run.baseline"
        )
    arm = replace(
        base,
        name=aa_name(base.name),
        description=f"A/A arm: {base.name} again under a second name (noise floor)",
    )
    return [*allocators, arm]


def run_suite(
    loaded: LoadedSuite,
    suite: Suite,
    resume: Path | None,
    display: Display,
    cache_root: Path | None = None,
    shard=None,
) -> tuple[int, Path | None]:
    """Run the matrix; (exit code, run dir). Raises Interrupted after recording the interruption."""
    m = Matrix(loaded, suite, resume=resume, display=display, cache_root=cache_root, shard=shard)
    try:
        code = m.run()
    except ServerError as e:
        raise SuiteError(str(e)) from None
    failed = [
        c
        for c in m.manifest.get("cells", [])
        if (c.get("status") != "ok" and not _empty_soak_segment(c)) or c.get("level_failures")
    ]
    # THP left changed is a problem of the run, like a failed cell: the results stand, exit 3.
    if failed or m.manifest.get("thp_restore_error"):
        code = 3
    return code, m.run_dir.path
