"""What analysis may read of a run, checked against what the run promised (issue 35).

The integrity check (rundir/integrity.py) makes sure a run's files are all there and hold
numbers. This module checks that those numbers can be what the run says they are, before any
table or verdict is computed from them:

- Its design: the minimum effect a verdict calls a difference, the error rate spent over the
  looks, the planned rounds. A negative or NaN minimum effect once turned "no difference" into
  "slower" (or printed "nan%"); such a manifest is damaged and refused outright.
- Its lives: every cell is one server life, identified by what no other life shares (its start
  and end, the server's pid, the exit's resource usage: the same identity `compare` uses to
  refuse a run compared with its own copy). The same life under two cell names (a shard's cells
  copied and relabelled as other rounds) would count one measurement twice and narrow every
  interval: both copies are refused.
- Its pairing: the verdicts pair lives by round (every round runs every arm once, in a balanced
  order). A cell's id names its round (`...__r<N>`, suites/runner/plan.py); a cell entry or a row
  that says another round was relabelled and would pair with the wrong life: refused.
- Its figures: each results column's value lies in the range its figure declares in
  rundir/schema.py (a throughput above 0 and below any server's rate, times, counts and sizes not
  negative, a percentage 0 to 100: `Range`), and a distribution's figures keep their order (p50
  <= p95 <= p99 <= max: `Record.ordered`); NaN and infinity are refused by the integrity check
  already. A point that fails is refused with a line naming the cell, level, column and value and
  the file the row came from, never left out in silence.

A refusal here is a gap like a missing record: readers refuse the run with one line, and with
`--allow-incomplete` they go on without the refused cells or points, every refusal listed first.
Imports nothing of ours but rundir's errors and schema (rundir/ imports only the standard library
and pydantic).
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import dataclass, field
from itertools import pairwise

from rundir.errors import RunDirError
from rundir.schema import figure_range, ordered_columns, result_figures

# A cell id ends with its round (suites/runner/plan.py CellPlan.id)
ROUND_SUFFIX = re.compile(r"__r(\d+)$")
# Statuses of a cell that lived (its server started and its record was written)
LIVED = ("ok", "failed", "interrupted")
# Run statuses a runner (or merge) writes: anything else is not a state the tool knows
RUN_STATUSES = ("running", "finished", "failed", "interrupted")
# Each results column's admissible values, declared with its figure (rundir/schema.py), and the
# groups of columns whose values keep their order
RANGES = {name: figure_range(name) for name in result_figures()}
ORDERED = ordered_columns()
# refusals of one kind listed; the rest are counted in one line
MAX_SHOWN_PER_KIND = 20
# A run's name as the runner makes it (the run directory's name, or merge's --out name): printable,
# one line, no path separator, not "." or "..".
RUN_ID = re.compile(r"(?!\.\.?$)[^\x00-\x1f\x7f-\x9f/\u2028\u2029]{1,255}")


@dataclass
class Admission:
    """What may not be read: one line each, and the cells and points they exclude."""

    refused: list[str] = field(default_factory=list)
    cells: set[str] = field(default_factory=set)  # every row of these cells
    points: set[tuple] = field(default_factory=set)  # (cell, workload, threads)

    def keeps(self, row: dict) -> bool:
        cid = row.get("cell")
        return cid not in self.cells and (cid, row.get("workload"), row.get("threads")) not in (
            self.points
        )


# -- the design ---------------------------------------------------------------------------------
def _finite(v) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def check_design(manifest: dict, where: str) -> None:
    """RunDirError (one line, naming the field and value) for a design field out of range: every
    verdict depends on them, so nothing can be read from a run whose design is damaged."""
    design = manifest.get("design")
    run = (
        (manifest.get("suite") or {}).get("run")
        if isinstance(manifest.get("suite"), dict)
        else None
    )
    fields = []
    if isinstance(design, dict):
        fields += [(f"design.{k}", design.get(k), k) for k in design]
    if isinstance(run, dict):
        fields += [(f"suite.run.{k}", run.get(k), k) for k in run]
    for name, value, key in fields:
        problem = _design_problem(key, value)
        if problem:
            raise RunDirError(f"{where}: {name} {value!r}: {problem}; the file is damaged")
    _check_design_consistent(design, manifest, where)
    status = manifest.get("status")
    if status is not None and status not in RUN_STATUSES:
        raise RunDirError(
            f"{where}: status {status!r} is not a run's state (one of {', '.join(RUN_STATUSES)}); "
            "the file is damaged"
        )
    run_id = manifest.get("run_id")
    if run_id is not None and (not isinstance(run_id, str) or not RUN_ID.fullmatch(run_id)):
        # compare and report name files and titles after it: a newline or a '/' there would
        # make file names with a newline or point outside the output directory
        raise RunDirError(
            f"{where}: run_id {run_id!r} is not a run's name (one line of printable characters, "
            "no '/'); the file is damaged"
        )


def run_arms(manifest: dict) -> set[str]:
    """The allocator arms the run measured: its allocator entries and its cells' allocators."""
    names = {a.get("name") for a in manifest.get("allocators") or [] if isinstance(a, dict)}
    for c in manifest.get("cells") or []:
        alloc = c.get("allocator") if isinstance(c, dict) else None
        names.add(alloc.get("name") if isinstance(alloc, dict) else alloc)
    return {n for n in names if isinstance(n, str) and n}


def _check_design_consistent(design, manifest: dict, where: str) -> None:
    """The design's fields against each other and against the run: the first look is one of the
    planned rounds, and the baseline and the A/A arm are arms the run measured (a verdict against
    an arm that never ran would compare nothing with something, or be silently left out)."""
    if not isinstance(design, dict):
        return
    first, most = design.get("first_look"), design.get("max_rounds")
    if _finite(first) and _finite(most) and first > most:
        raise RunDirError(
            f"{where}: design.first_look {first!r} is above design.max_rounds {most!r}: the "
            "first look must come at or before the last planned round; the file is damaged"
        )
    arms = run_arms(manifest)
    if not arms:
        return
    # A run of one arm judges nothing (its recorded baseline may be the suite's default, never
    # measured): the baseline must be one of the arms only where there is something to judge.
    for key in ("baseline", "aa_arm") if len(arms) > 1 else ("aa_arm",):
        value = design.get(key)
        if value is not None and value not in arms:
            raise RunDirError(
                f"{where}: design.{key} {value!r} is not an arm of this run "
                f"({', '.join(sorted(arms))}); the file is damaged"
            )
    servers = [s.get("name") for s in manifest.get("servers") or [] if isinstance(s, dict)]
    bs = design.get("baseline_server")
    if bs is not None and servers and bs not in servers:
        raise RunDirError(
            f"{where}: design.baseline_server {bs!r} is not a server of this run "
            f"({', '.join(map(str, servers))}); the file is damaged"
        )


def _design_problem(key: str, value) -> str | None:
    if value is None:
        return None
    if key == "min_effect_pct":
        if not _finite(value) or not 0 < value < 100:
            return "the minimum effect must be a percentage above 0 and below 100"
    elif key == "alpha":
        if not _finite(value) or not 0 < value < 1:
            return "the error rate must be above 0 and below 1"
    elif key in ("first_look", "max_rounds", "repeat"):
        if not _finite(value) or value != int(value) or value < 1:
            return "expected a whole number of rounds, at least 1"
    elif key == "budget_s":
        if not _finite(value) or value < 0:
            return "expected a finite number of seconds, 0 or more"
    return None


# -- lives ----------------------------------------------------------------------------------------
def life_key(cell: dict) -> tuple | None:
    """What identifies one server life across runs, shards and rounds: its start and end, the
    server's pid and its exit's resource usage (CPU seconds, faults, context switches: no two
    lives share them). None for a life that did not record them (synthetic runs, a cell that
    never started)."""
    ver, ex = cell.get("verification"), cell.get("exit")
    pid = ver.get("pid") if isinstance(ver, dict) else None
    usage = ex.get("rusage") if isinstance(ex, dict) else None
    if not cell.get("started_at") or pid is None or not isinstance(usage, dict) or not usage:
        return None
    return (cell.get("started_at"), cell.get("finished_at"), pid, repr(sorted(usage.items())))


def same_lives(cells: list[dict]) -> list[list[dict]]:
    """Groups of cells (two or more) that are one server life."""
    by_life: dict[tuple, list[dict]] = defaultdict(list)
    for c in cells:
        if c.get("status") in LIVED:
            key = life_key(c)
            if key is not None:
                by_life[key].append(c)
    return [group for group in by_life.values() if len(group) > 1]


def same_life_line(group: list[dict]) -> str:
    first = group[0]
    pid = (first.get("verification") or {}).get("pid")
    names = ", ".join(str(c.get("id")) for c in group)
    return (
        f"cells {names} are the same server life (started {first.get('started_at')}, pid {pid}): "
        "one is a copy of the other under another name, so neither is used"
    )


# -- identity -------------------------------------------------------------------------------------
def cell_identity(entry: dict) -> dict:
    """What a cell entry (a manifest's, or its record's "cell") says each of its rows is: the
    results columns of the cell's identity, as rows hold them (rundir.derive.levels takes them
    from the same plan and resolved server)."""
    srv = entry.get("server") if isinstance(entry.get("server"), dict) else {}
    alloc = entry.get("allocator")
    thp = entry.get("thp")
    # Runs before cells recorded their label (formats 1-2, one server each): the label the cell
    # id begins with (suites/runner/plan.py CellPlan.id: LABEL__ALLOCATOR__thp-MODE__rN)
    cid = str(entry.get("id") or "")
    return {
        "server": srv.get("label") or (cid.split("__")[0] if "__" in cid else None),
        "server_flavor": srv.get("flavor"),
        "server_version": srv.get("version"),
        "allocator": alloc.get("name") if isinstance(alloc, dict) else alloc,
        "allocator_version": alloc.get("version") if isinstance(alloc, dict) else None,
        "thp": thp.get("requested") if isinstance(thp, dict) else thp,
        "engine": entry.get("engine"),
    }


def identity_mismatch(identity: dict, entry: dict) -> tuple[str, object, object] | None:
    """(column, its value in `identity`, the cell's) for the first identity column a row (or a
    raw record's identity) holds that is not the cell entry's, or None. A relabelled row would be
    counted under another server or allocator: a row of server b relabelled 'a' once added a
    phantom server to a summary and moved its verdicts. What one side did not record (an older
    run's empty engine) cannot disagree."""
    for col, want in cell_identity(entry).items():
        have = identity.get(col)
        if want in (None, "") or have in (None, "") or str(have) == str(want):
            continue
        return col, have, want
    return None


# -- rounds -----------------------------------------------------------------------------------------
def id_round(cell_id: str) -> int | None:
    m = ROUND_SUFFIX.search(str(cell_id))
    return int(m.group(1)) if m else None


def _as_int(v) -> int | None:
    if _finite(v) and v == int(v):
        return int(v)
    return None


# -- the whole check ------------------------------------------------------------------------------
def admit(manifest: dict, rows: list[dict], sources: dict[str, str] | None = None) -> Admission:
    """The cells and points of a run (its manifest's cell entries, its typed rows) analysis may
    not read, each with one line (see the module doc). `sources`: the file each cell's rows were
    read from (cells/<id>.json, derived/<id>.json, results.csv), named in a figure's refusal."""
    out = Admission()
    cells = [c for c in manifest.get("cells") or [] if isinstance(c, dict)]
    for group in same_lives(cells):
        out.refused.append(same_life_line(group))
        out.cells.update(str(c.get("id")) for c in group)
    rounds: dict[str, int] = {}
    for c in cells:
        cid = str(c.get("id"))
        r = id_round(cid)
        if r is None:
            continue
        rounds[cid] = r
        for key in ("repeat", "round"):
            v = c.get(key)
            if v is not None and _as_int(v) != r:
                out.refused.append(
                    f"manifest.json: cell {cid} has {key} {v!r} but its id names round {r}: a "
                    "relabelled life would pair with another round's lives, so it is not used"
                )
                out.cells.add(cid)
                break
    _check_rounds_whole(cells, out)
    relabelled: dict[str, tuple] = {}
    figures: list[str] = []
    for row in rows:
        cid = row.get("cell")
        r = rounds.get(cid)
        rep = row.get("repeat")
        if r is not None and rep is not None and _as_int(rep) != r and cid not in relabelled:
            relabelled[cid] = (row, rep, r)
        if (row.get("status") or "ok") != "ok":
            continue
        problem = figure_problem(row)
        if problem:
            where = f" in {sources[cid]}" if sources and cid in sources else ""
            figures.append(
                f"cell {cid}, {row.get('workload')}@{row.get('threads')}: {problem}{where}, so "
                "this point is not used"
            )
            out.points.add((cid, row.get("workload"), row.get("threads")))
    for cid, (row, rep, r) in relabelled.items():
        out.refused.append(
            f"cell {cid}, {row.get('workload')}@{row.get('threads')}: repeat {rep!r} but the cell "
            f"ran in round {r}: a relabelled life would pair with another round's lives, so the "
            "cell is not used"
        )
        out.cells.add(cid)
    out.refused += figures[:MAX_SHOWN_PER_KIND]
    if len(figures) > MAX_SHOWN_PER_KIND:
        out.refused.append(f"and {len(figures) - MAX_SHOWN_PER_KIND} more point(s) out of range")
    return out


def _check_rounds_whole(cells: list[dict], out: Admission) -> None:
    """Every round runs every arm once (suites/runner/plan.py lists every planned cell in the
    manifest from the start, pending until it runs): a round without a cell of an arm the other
    rounds have lost that cell's entry, and its other lives have nothing to pair with."""
    by_round: dict[int, set[str]] = defaultdict(set)
    ids: dict[int, list[str]] = defaultdict(list)
    for c in cells:
        cid = str(c.get("id"))
        r = id_round(cid)
        if r is None:
            continue
        by_round[r].add(ROUND_SUFFIX.sub("", cid))
        ids[r].append(cid)
    if len(by_round) < 2:
        return
    every = set().union(*by_round.values())
    for r in sorted(by_round):
        lacking = sorted(every - by_round[r])
        if lacking:
            out.refused.append(
                f"manifest.json: round {r} has no cell of {', '.join(lacking)} (the other rounds "
                "have one): its lives cannot be paired, so round "
                f"{r}'s cells are not used"
            )
            out.cells.update(ids[r])


def figure_problem(row: dict) -> str | None:
    """The first figure of `row` outside its declared range, or out of its distribution's order,
    as "COLUMN VALUE is ..."; None when every figure can be what it says."""
    for col, v in row.items():
        rng = RANGES.get(col)
        if rng is not None and _finite(v):
            why = rng.problem(v)
            if why:
                return f"{col} {v!r} {why}"
    return _order_problem(row)


def _order_problem(row: dict) -> str | None:
    for group in ORDERED:
        present = [(c, row.get(c)) for c in group if _finite(row.get(c))]
        for (a, x), (b, y) in pairwise(present):
            if x > y:
                return (
                    f"{a} {x!r} is above {b} {y!r} (out of order: a distribution's figures rise "
                    "from p50 to max)"
                )
    return None
