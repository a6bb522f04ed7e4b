"""A soak: the fragmentation scenarios' cycles over and over in ONE server life per arm, for hours
(`mallocsweep run SUITE --soak 6h`, `[fragmentation] soak = "6h"`; docs/soak.md).

How the arms share the machine. Every arm's server is started (and warmed) first and stays alive
for the whole soak; the arms then take turns, one block of `soak_block` passes each (a pass: one
cycle of every scenario), the order reversed every other turn (A B, B A, ...). Arms run one after
another, each for hours, would put them at different times of the machine's day (the VM's drift
inside one life is of tens of percent over minutes, docs/facts.md) and double the wall time of
a comparison that needs both; alternating blocks puts every arm's cycles at the same moments, so
slow drift reaches every arm alike (duet-style pairing in time), while only one arm has load at a
time (two loads at once on 2 cores would measure each other). While an arm waits, its server is
idle: a phase of its own in the timeline (`soak_wait#n`), the same share of idle for every arm.

Checkpoints. At the end of its block each arm closes its last cycle's phase and appends the
cycles since its last checkpoint to its journal checkpoints/<cell>/ (rundir/write.py: each piece
and the head that counts it written atomically: temp file, fsync, rename). A soak interrupted
(Ctrl-C, SIGTERM) records each arm's cell from it at once; a runner killed outright (SIGKILL,
power) leaves it for `--resume`, which records it the same way. Either way the cell says where and why its series broke (`soak.ended`), and the
resumed soak continues in a new server life per arm: a new segment (cell id `...__s2`), never
fitted together with the one before (analysis/growth_rate.py).

Looks: every soak_look_s of soak, every growth verdict is judged at its look's share of the 5%
(analysis/soak_looks.py); when all are decided the soak stops early and says why.

Scenarios apart (`[fragmentation] soak_scenarios = "apart"`). A soak of several scenarios runs
them in one life per arm, so it judges one trend per arm (docs/soak.md). Apart, the soak is a
series of stages, one per scenario: each stage starts new server lives of every arm that run
that scenario alone, for the stage's share of the time (what is left of the soak, split between
the scenarios still to come, so a stage that stops early gives its time to the later ones), with
looks of its own planned at its start (each verdict belongs to one stage, so each spends its own
5%). A stage's lives are segments of the soak (a break within a stage continues it in a new
segment of the same scenario); the manifest's `soak.stages` says what each stage ran, how long
and why it stopped.
"""

from __future__ import annotations

import json
import time
from collections.abc import Generator
from dataclasses import dataclass, field

from analysis import growth_rate, soak_looks
from rundir.derive.levels import derive_cell
from rundir.errors import RunDirError
from rundir.write import now_iso
from servers import interrupts
from servers.interrupts import Interrupted
from suites.errors import SuiteError
from suites.runner.cell import CellContext, CellOutcome
from suites.runner.plan import CellPlan
from suites.runner.workload_cell import WorkloadCell
from suites.workloads.fragmentation.scenarios import pass_phases
from suites.workloads.fragmentation.settings import SOAK_MIN_S

WAIT = "soak_wait"


def soak_seconds(suite) -> float:
    """The suite's soak in seconds (0: none; only the fragmentation kind has one)."""
    f = getattr(suite, "fragmentation", None)
    return float(f.soak) if f is not None and getattr(f, "soak", 0) else 0.0


def check_soak(suite, servers: int, shard) -> None:
    """What a soak cannot be combined with, refused before anything is written."""
    if not soak_seconds(suite):
        return
    why = None
    if suite.run.repeat != 1:
        why = f"run.repeat {suite.run.repeat}: a soak is one life per arm (repeat 1)"
    elif suite.run.budget_s:
        why = "a time budget adds rounds; a soak's length is its own (--soak), with its own looks"
    elif servers > 1:
        why = "several servers: soak one server at a time"
    elif shard is not None:
        why = "--shard splits rounds between hosts; a soak has one round"
    elif getattr(suite.run, "design", "solo") == "alternate":
        why = "run.design alternate: a soak already keeps its arms alive and runs them in turns"
    elif (
        soak_apart(suite) and soak_seconds(suite) / len(suite.fragmentation.scenarios) < SOAK_MIN_S
    ):
        n = len(suite.fragmentation.scenarios)
        why = (
            f"{soak_seconds(suite):g} s apart over {n} scenarios leaves each less than "
            f"{SOAK_MIN_S:g} s (a look needs cycles of every arm): soak at least "
            f'{n * SOAK_MIN_S / 60:g}m, or soak_scenarios = "together"'
        )
    else:
        for s in suite.thp.settings():
            if (
                s.changes_thp
                or s.defrag != "system"
                or s.max_ptes_none is not None
                or s.large_pages
            ):
                why = (
                    f"THP setting {s.label!r} changes the machine for one cell while every arm's "
                    'server is alive; soak with thp modes = ["system"]'
                )
                break
        if len(suite.thp.labels()) > 1:
            why = 'several THP settings: a soak runs one (thp modes = ["system"])'
    if why:
        raise SuiteError(f"--soak / [fragmentation] soak: {why}")


@dataclass
class Arm:
    plan: CellPlan
    cell: WorkloadCell
    life: Generator
    outcome: CellOutcome | None = None
    cycles: int = 0
    rows: list[dict] = field(default_factory=list)  # its cycles' rows so far (from checkpoints)


class _ArmEnded(Exception):
    """An arm's life ended on its own (its server died, a cycle's driver failed the cell)."""


class Soak:
    """Runs a soak's cells for the matrix (suites/runner/matrix.py) and records them."""

    def __init__(self, matrix, thp, dataset):
        self.m = matrix
        self.thp = thp
        self.dataset = dataset
        self.suite = matrix.suite
        f = self.suite.fragmentation
        self.state = matrix.manifest["soak"]
        self.stages: list[dict] | None = self.state.get("stages") or None
        self.block = f.soak_block * pass_phases(self._suite_now())
        self.base = self.suite.run.baseline
        self.margin = float(self.state.get("margin_mb_per_hour") or growth_rate.MARGIN_MB_PER_HOUR)

    # -- the plan ---------------------------------------------------------------------------
    def run(self, cells: list[CellPlan]) -> None:
        m = self.m
        pending = [c for c in cells if m.manifest_cell(c.id).get("status") == "pending"]
        broken = [c for c in pending if m.manifest_cell(c.id).get("started_at")]
        killed = (
            "the runner was killed (no clean stop); recovered from its last checkpoint on --resume"
        )
        for c in broken:  # a killed runner's cells: recorded from their checkpoints
            self._record_broken(c, killed)
        last = (self.state.get("segments") or [{}])[-1]
        if broken and last and not last.get("ended_at"):
            last.update(ended=killed, to_s=self.state["done_s"], ended_at="unknown (killed)")
        if self.state.get("stopped"):
            m.display.note(f"soak: {self.state['stopped']}; nothing more to run")
            return
        if self.state["done_s"] >= self.state["seconds"]:
            self.state["stopped"] = "its time was up"
            return
        to_run = [c for c in pending if c not in broken]
        if self.stages and self._window().get("stopped"):
            self._next_stage()  # killed after its stage stopped, before the next one began
            if self.state.get("stopped"):
                return
        if self.stages and self._window().get("seconds") is None:
            self._begin_stage()
        if not to_run:
            to_run = self._next_segment(cells)
        self._soak(to_run)
        while self.stages and not self.state.get("stopped"):
            # the stage ended, the soak goes on: the next scenario's lives
            self._soak(self._next_segment(cells))

    def _next_segment(self, cells: list[CellPlan]) -> list[CellPlan]:
        """The arms' cells of the next segment (after a break), added to the manifest."""
        seg = max(c.segment for c in cells) + 1
        firsts = [c for c in cells if c.segment == 1]
        new = [
            CellPlan(
                len(cells) + i, c.round, c.server_label, c.allocator, c.thp, c.engine, c.server, seg
            )  # fmt: skip
            for i, c in enumerate(firsts)
        ]
        cells += new
        self.m.manifest["cells"] += [self.m.pending_entry(c) for c in new]
        self.m._save_manifest()
        what = (
            f"scenario {self._scenario()!r} (stage {self.state['stage'] + 1} of {len(self.stages)})"
            if self.stages
            else "a new server life, recorded apart from the one before"
        )
        self.m.display.note(
            f"soak: segment {seg} of every arm starts ({self._left_s() / 3600:.2f} h left): {what}"
        )
        return new

    def _left_s(self) -> float:
        return max(0.0, self.state["seconds"] - self.state["done_s"])

    # -- stages (scenarios apart) --------------------------------------------------------------
    def _window(self) -> dict:
        """What the time and the looks now belong to: the current stage of a soak of scenarios
        apart, else the soak itself (both have seconds, looks_planned, looks, stopped)."""
        return self.stages[self.state["stage"]] if self.stages else self.state

    def _scenario(self) -> str | None:
        return self._window()["scenario"] if self.stages else None

    def _suite_now(self):
        """The suite the arms' lives run now: the current stage's scenario alone, apart."""
        if not self.stages:
            return self.suite
        f = self.suite.fragmentation.model_copy(update={"scenarios": [self._scenario()]})
        return self.suite.model_copy(update={"fragmentation": f})

    def _begin_stage(self) -> None:
        """The current stage's share of the time and its looks, fixed before its first cycle."""
        st = self.state
        stage = self._window()
        share = self._left_s() / (len(self.stages) - st["stage"])
        stage.update(
            seconds=round(share, 1),
            from_s=st["done_s"],
            looks_planned=soak_looks.planned_looks(share, st["look_s"]),
            looks=[],
            stopped=None,
            judged_at_end=False,
        )
        self.block = self.suite.fragmentation.soak_block * pass_phases(self._suite_now())

    def _next_stage(self) -> None:
        """The stage that just stopped hands over to the next, or the soak stops with it."""
        st = self.state
        if st["stage"] + 1 < len(self.stages) and self._left_s() > 0:
            st["stage"] += 1
            self._begin_stage()
            return
        st["stopped"] = "every scenario soaked apart: " + "; ".join(
            f"{x['scenario']} {x.get('stopped') or 'not run (no time left)'}" for x in self.stages
        )
        st["judged_at_end"] = True

    # -- the soak ---------------------------------------------------------------------------
    def _soak(self, plans: list[CellPlan]) -> None:
        m, state = self.m, self.state
        seg = plans[0].segment
        segment = {"segment": seg, "started_at": now_iso(), "from_s": state["done_s"]}
        if self.stages:
            segment["scenario"] = self._scenario()
        state["segments"].append(segment)
        arms: list[Arm] = []
        try:
            for plan in plans:
                arms.append(self._start(plan))
            m.display.start_soak(state["seconds"], state["done_s"])
            self._cycles(arms, segment)
            why = state["stopped"]
            if self.stages:
                why = f"stage {self._scenario()!r}: {self._window()['stopped']}"
            self._end(arms, why)
            if self.stages:
                self._next_stage()
        except _ArmEnded as e:
            state["stopped"] = f"stopped: {e}"
            m.display.note(f"soak: {state['stopped']}")
            self._end(arms, state["stopped"])
        except Interrupted as e:
            why = f"interrupted by {_signame(e.signum)}"
            self._break(arms, why)
            segment["ended"] = why
            raise
        finally:
            segment["ended_at"] = now_iso()
            segment["to_s"] = state["done_s"]
            m._save_manifest()

    def _start(self, plan: CellPlan) -> Arm:
        """The arm's cell: server started, collectors attached, warmed up (its life's first step)."""
        m = self.m
        srv = m._server(plan.server)
        allocator = next(a for a in srv.allocators if a.name == plan.allocator)
        entry = m.manifest_cell(plan.id)
        entry.update({"status": "running", "started_at": now_iso()})
        entry["soak"] = {"segment": plan.segment} | self._scenario_key()
        m._save_manifest()
        m.display.start_cell(plan, 0)
        ctx = CellContext(
            suite=self._suite_now(), plan=plan, run_dir=m.run_dir, server_binary=srv.binary,
            allocator=allocator, thp=self.thp,
            dataset=(self.dataset or {}).get((plan.server, plan.engine)),
            on_progress=m.display.phase, on_interval=m.display.interval,
            on_note=m.display.note, clients=m.clients, server=srv.section,
        )  # fmt: skip
        cell = WorkloadCell(ctx)
        arm = Arm(plan, cell, cell.life())
        self._step(arm)  # start and warm up
        return arm

    def _scenario_key(self, plan: CellPlan | None = None) -> dict:
        """{"scenario": ...} of a soak of scenarios apart: the current stage's, or the one the
        plan's life started with (as its manifest entry recorded it); {} otherwise."""
        if plan is not None:
            got = (self.m.manifest_cell(plan.id).get("soak") or {}).get("scenario")
            return {"scenario": got} if got else {}
        return {"scenario": self._scenario()} if self.stages else {}

    def _step(self, arm: Arm) -> None:
        try:
            next(arm.life)
        except StopIteration as done:
            arm.outcome = done.value
            self._write(arm, "its life ended on its own")
            raise _ArmEnded(
                f"{arm.plan.id} ended ({arm.outcome.record.get('error') or 'no error recorded'})"
            ) from None

    def _cycles(self, arms: list[Arm], segment: dict) -> None:
        """Turns of blocks until the time is up or a look decides everything."""
        m, state = self.m, self.state
        win = self._window()
        t0, done0 = time.monotonic(), state["done_s"]
        turn = sum(int(s.get("turns") or 0) for s in state["segments"])
        looks = int(win["looks_planned"])
        stage = f"stage {self._scenario()!r} " if self.stages else ""
        while True:
            order = arms if turn % 2 == 0 else arms[::-1]
            for arm in order:
                for _ in range(self.block):
                    self._step(arm)
                    arm.cycles += 1
                self._derive_piece(arm, arm.cell.park(f"{WAIT}#{turn + 1}"))
            turn += 1
            segment["turns"] = segment.get("turns", 0) + 1
            state["done_s"] = round(done0 + time.monotonic() - t0, 1)
            # the window's own clock: a stage's starts at the stage (from_s)
            done = round(state["done_s"] - float(win.get("from_s") or 0.0), 1)
            at_end = done >= win["seconds"]
            if self.stages:
                win["ran_s"] = done
            made = [x["look"] for x in win["looks"]]
            k = soak_looks.due_look(done, win["seconds"], state["look_s"], made)
            look = None
            if k is not None:
                look = self._look(arms, k)
                win["looks"].append(look.to_manifest(done))
                m.display.note(f"soak {stage}" + look.message(done, looks, last=at_end))
            self._progress(arms)
            if look is not None and look.all_decided and not at_end:
                win["stopped"] = (
                    f"stopped early at {done / 3600:.2f} h of {win['seconds'] / 3600:.2f}"
                    f" h: every growth verdict was decided at look {k} of {looks}"
                )
                win["judged_at_end"] = True
                return
            if at_end:
                win["stopped"] = f"its time was up ({win['seconds'] / 3600:.2f} h)" + (
                    f"; at its last look {len(look.verdicts) - look.undecided} of "
                    f"{len(look.verdicts)} growth verdicts were decided"
                    if look is not None
                    else ""
                )
                win["judged_at_end"] = look is not None
                return
            m._save_manifest()

    # -- looks and progress ------------------------------------------------------------------
    def _rows(self, arms: list[Arm]) -> dict[str, tuple[int, list[dict]]]:
        """cell -> (segment, rows) of every cycle so far: the finished segments' cells and each
        arm's current life as its last checkpoint holds it."""
        out = {}
        for cid, rec in self.m.run_dir.finished_cells().items():
            soak = rec["cell"].get("soak")
            if (
                rec["cell"].get("status") == "ok"
                and soak
                and soak.get("scenario") == self._scenario()
            ):
                # apart, a stage judges its own scenario's lives (an earlier stage's are done)
                seg = int(soak.get("segment") or 1)
                out[cid] = (seg, self.m.run_dir.rows_of(rec))
        for arm in arms:
            out[arm.plan.id] = (arm.plan.segment, arm.rows)
        return out

    def _derive_piece(self, arm: Arm, piece: dict | None) -> None:
        """The rows of the cycles a checkpoint just wrote (derived from its piece alone: a
        level's row needs its own phase and readings), kept for the looks and the progress
        line: each cycle is derived once, not again at every turn."""
        if piece is None:
            return
        try:
            arm.rows += derive_cell(piece).rows
        except Exception as e:  # noqa: BLE001 - the looks go without them; the cell's own
            # derivation at its end says what failed
            self.m.display.note(f"soak: {arm.plan.id}: cycles not derived for the look ({e})")

    def _lives(self, arms: list[Arm]) -> list[growth_rate.LifeRate]:
        lives = []
        for cid, (seg, rows) in self._rows(arms).items():
            lives += growth_rate.lives_of_rows(cid, rows, seg)
        return lives

    def _look(self, arms: list[Arm], k: int) -> soak_looks.Look:
        looks = int(self._window()["looks_planned"])
        level = soak_looks.look_level(k, looks)
        verdicts = growth_rate.soak_differences(self._lives(arms), self.base, level, self.margin)
        return soak_looks.Look(k, level, verdicts)

    def _progress(self, arms: list[Arm]) -> None:
        """The live line: elapsed / total, ETA, each arm's RSS growth per hour so far."""
        per_arm = {}
        for _seg, rows in self._rows(arms).values():
            alloc = next((r["allocator"] for r in rows), None)
            if alloc is not None:
                per_arm.setdefault(alloc, []).append(growth_rate.series_rate(rows))
        parts = []
        for alloc, rates in per_arm.items():
            r = growth_rate.pooled(rates)
            if r is None:
                parts.append(f"{alloc} ?")
                continue
            lo, hi = r.interval()
            parts.append(f"{alloc} {r.value:+.1f} MB/h [{lo:+.1f}, {hi:+.1f}]")
        text = " | ".join(parts)
        if self.stages and text:  # which stage's lives the figures are of
            text = f"{self._scenario()}: {text}"
        self.m.display.soak_progress(self.state["done_s"], text)

    # -- ending ------------------------------------------------------------------------------
    def _end(self, arms: list[Arm], why: str) -> None:
        """Each arm's life ends after its current level: idle, shutdown, its cell recorded."""
        for arm in arms:
            if arm.outcome is not None:
                continue
            arm.cell.end_after_level()
            try:
                next(arm.life)
            except StopIteration as done:
                arm.outcome = done.value
            else:  # pragma: no cover - a life yields nothing once it is ending
                raise SuiteError(f"{arm.plan.id}: the soak's life did not end")
            self._write(arm, why)

    def _write(self, arm: Arm, why: str) -> None:
        m = self.m
        rec = arm.outcome.record
        rec["soak"] = {
            "segment": arm.plan.segment,
            "ended": why,
            "cycles": len(rec["levels"]),
        } | self._scenario_key(arm.plan)
        m.run_dir.write_cell(rec, arm.outcome.rows)
        m._set_manifest_cell(rec)
        m.run_dir.remove_checkpoint(arm.plan.id)  # raw/ holds it all now
        m.display.end_cell(arm.plan, arm.outcome)

    def _break(self, arms: list[Arm], why: str) -> None:
        """Interrupted: every arm's server stopped (its life closed: its `finally`), the cycles
        it finished checkpointed and recorded as its cell, with where the series broke."""
        for arm in arms:
            if arm.outcome is not None:
                continue
            with interrupts.held():
                arm.life.close()
                try:  # the cycles since its last park too (the collectors have closed them)
                    arm.cell.checkpoint()
                except (OSError, RunDirError, AttributeError, KeyError):
                    pass
            self._record_broken(arm.plan, why)

    def _record_broken(self, plan: CellPlan, why: str) -> None:
        """The cell of a broken segment from its checkpoint: its raw record written and derived,
        its record `ok` with `soak.ended` saying where and why the series broke; a segment with
        no cycle recorded is `skipped`."""
        m = self.m
        rd = m.run_dir
        entry = m.manifest_cell(plan.id)
        scenario = self._scenario_key(plan)
        cp = rd.read_checkpoint(plan.id)
        if cp is None or not cp.get("cycles"):
            entry.update(
                status="skipped",
                error=f"soak segment {plan.segment}: {why} before its first cycle was recorded",
                soak={"segment": plan.segment, "ended": why, "cycles": 0} | scenario,
                finished_at=now_iso(),
            )
            m._save_manifest()
            return
        raw = cp["raw"]
        derived = derive_cell(json.loads(rd.write_raw(raw)))
        rec = cp["record"]
        rec["levels"] = rec["levels"][: len(raw["levels"])]
        for level, window in zip(rec["levels"], derived.windows, strict=True):
            level["window"] = window
        at = rec.pop("checkpoint_at", None) or now_iso()
        last = raw["levels"][-1]["phase"] if raw["levels"] else "-"
        rec.update(status="ok", error=None, finished_at=at)
        rec["soak"] = {
            "segment": plan.segment,
            "ended": why,
            "cycles": len(raw["levels"]),
            "broken_after": last,
            "checkpoint_at": at,
        } | scenario
        stopped = (
            "its server was stopped and reaped"
            if rec.get("exit")
            else "its server was not stopped by us (no exit recorded, no figures at stop)"
        )
        rec["warnings"] = rec.get("warnings", []) + [
            f"soak series broken after {last} ({why}); {stopped}; a resumed soak continues in a "
            f"new server life (segment {plan.segment + 1})"
        ]
        rd.write_cell(rec, derived.rows)
        m._set_manifest_cell(rec)
        rd.remove_checkpoint(plan.id)
        m.display.note(f"soak: {plan.id}: {len(raw['levels'])} cycles recorded; broken: {why}")


def _signame(signum: int) -> str:
    import signal

    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def soak_design(suite) -> dict | None:
    """The manifest's `soak` for a new run of this suite (None: no soak)."""
    total = soak_seconds(suite)
    if not total:
        return None
    f = suite.fragmentation
    design = soak_looks.design(
        total,
        float(f.soak_look_s),
        f.soak_block * pass_phases(suite),
        growth_rate.MARGIN_MB_PER_HOUR,
    )
    if soak_apart(suite):
        # each stage's time and looks are fixed when it starts (Soak._begin_stage)
        design.update(stage=0, stages=[{"scenario": s, "seconds": None} for s in f.scenarios])
    return design


def soak_apart(suite) -> bool:
    """A soak of several scenarios, each in lives of its own (module doc)."""
    f = suite.fragmentation
    return f.soak_scenarios == "apart" and len(f.scenarios) > 1
