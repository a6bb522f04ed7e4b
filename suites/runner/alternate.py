"""The alternate design ([run] design = "alternate"): a round's arms compared at the same moments.

Solo lives (the default) run one arm's server life after the other: a round of seven lives spans
minutes, and the rate of this shared VM drifts over seconds to minutes (one OLTP_RO@8 level went
from 50k to 35k q/s), so each arm meets a different machine. Here, within a round (and one engine
and THP setting), every arm's cell is opened first: server started, its allocator proven, warmed
(suites.runner.cell: the same stages as a solo life). All stay alive. Then each level runs on
them in turn in short blocks of `block_s` seconds, one arm loaded at a time while the others
idle: cycle k runs one block of every arm, in row (round + k) of the Williams design over the
arms (suites.runner.plan.allocator_order: with two arms A B, B A, A B, ...; rounds start on
alternate rows), so an arm's position in its cycle and its neighbour do not favour it. The k-th
blocks of the arms (pair k) ran next to each other; rundir/derive/blocks.py turns them into the
level's rate, whose ratio between two arms is the round's mean log pair ratio. Then every cell
is closed (idle, stop, reaped, records) in the round's order: memory at stop stays per life.

One cell failing (a server that will not start or dies) fails that cell alone; the others carry
on. Interrupted stops every live server (each cell's abort) before the runner records them.
"""

from __future__ import annotations

from collections.abc import Iterator

from servers import interrupts
from suites.errors import Interrupted, SuiteError
from suites.runner.plan import CellPlan, allocator_order


def groups(cells: list[CellPlan]) -> Iterator[list[CellPlan]]:
    """The cells in plan order, grouped into what is alive together: one round's cells of one
    engine and THP setting (plan_round puts them next to each other)."""
    group: list[CellPlan] = []
    for c in cells:
        if group and (c.round, c.engine, c.thp) != (group[0].round, group[0].engine, group[0].thp):
            yield group
            group = []
        group.append(c)
    if group:
        yield group


def schedule(arms: list, rnd: int, blocks: int) -> list[list]:
    """The order of every cycle of one level: cycle k is row rnd + k of the Williams design over
    `arms` (module docstring). Pair k is cycle k's blocks."""
    return [allocator_order(list(arms), rnd + k) for k in range(blocks)]


def run_group(matrix, plans: list[CellPlan], thp, dataset) -> None:
    """Open every cell of the group, run the levels in blocks, close them; each outcome recorded
    as a solo cell's is (matrix.record_outcome). Whatever stops the group (a signal, a bug of
    ours) stops every server of it that is still alive, and records the cells not yet recorded
    as interrupted."""
    run = matrix.suite.run
    made = []
    recorded: set[str] = set()
    try:
        for plan in plans:
            interrupts.check()  # safe point: between starts
            made.append(matrix.make_cell(plan, thp, dataset))
            made[-1][0].open()
        cells = [c for c, _ in made]
        matrix.display.note(
            f"round {plans[0].round}: {len(cells)} servers alive; each level in blocks of "
            f"{run.block_s} s, {run.blocks} per arm"
        )
        run_levels(cells, plans[0].round, run.block_s, run.blocks)
        for cell, _ in made:  # in the round's order: each stopped, reaped and recorded
            matrix.record_outcome(cell.plan, cell.close())
            recorded.add(cell.plan.id)
    except Interrupted:
        for cell, entry in made:
            if cell.plan.id not in recorded:
                cell.abort()
                matrix.record_interrupted(cell, entry)
        raise
    except BaseException:
        for cell, _ in made:
            cell.abort()
        raise


def run_levels(cells: list, rnd: int, block_s: int, blocks: int) -> None:
    """Every level of the workload, in blocks on the live cells (module docstring)."""
    levels: dict[str, list] = {}
    for cell in cells:
        if not cell.broken:
            with cell.guard():
                levels[cell.plan.id] = list(cell.block_levels(block_s))
    live = [c for c in cells if not c.broken]
    if not live:
        return
    phases = [phase for phase, _ in levels[live[0].plan.id]]
    order = schedule(live, rnd, blocks)
    for li, phase in enumerate(phases):
        for cell in live:
            if not cell.broken:
                with cell.guard():
                    cell.begin_blocks(phase)
        for k, cycle in enumerate(order):
            for position, cell in enumerate(cycle):
                if cell.broken:
                    continue
                interrupts.check()  # safe point: between blocks
                _, run_block = levels[cell.plan.id][li]
                with cell.guard():
                    cell.run_block(phase, run_block, k, position)
        for cell in live:
            if not cell.broken:
                with cell.guard():
                    cell.end_blocks(phase)


def manifest_record(suite) -> dict:
    """The manifest's `run_design`: which design the run's verdicts come from, and its blocks."""
    run = suite.run
    if run.design != "alternate":
        return {"name": "solo"}
    rec = {"name": "alternate", "block_s": run.block_s, "blocks": run.blocks}
    if run.block_settle_cap_s:  # blocks that settle (runs before it had fixed blocks)
        rec["block_settle_cap_s"] = run.block_settle_cap_s
    return rec


def live_servers(suite, cells: list[CellPlan], done: set[str]) -> int:
    """Servers alive at once: a solo run's one; an alternate run's largest group still to run
    (preflight's memory, disk and thread needs are per live server)."""
    if suite.run.design != "alternate":
        return 1
    todo = [c for c in cells if c.id not in done]
    return max((len(g) for g in groups(todo)), default=1)


def check_resume(cells: list[CellPlan], done: set[str], run_dir) -> None:
    """A resumed alternate run re-runs whole groups only: a group with cells ok and cells not
    (a server that failed, a run interrupted between writing its cells) cannot be finished one
    arm at a time, since its arms were measured at the same moments. Refused in one line."""
    for group in groups(cells):
        ok = [c for c in group if c.id in done]
        if ok and len(ok) < len(group):
            missing = ", ".join(c.allocator for c in group if c.id not in done)
            raise SuiteError(
                f"--resume {run_dir}: round {group[0].round} of this alternate run is half done "
                f"({len(ok)} of {len(group)} cells ok; not: {missing}); an alternate round's arms "
                "are measured together and cannot be finished one at a time. Its complete rounds "
                "stand (mallocsweep report, with --allow-incomplete); for more rounds start a new run"
            )
