"""Whether a raw record (raw/<cell>.json) is the observation of the cell it is named after, and
holds what re-deriving that cell's figures needs (issue 35).

`report --rederive` replaces a cell's recorded figures with figures derived from its raw record.
A raw record of another cell copied over this one's (another allocator's life) was once derived
"confidently": the jemalloc life's figures then stood under the glibc cell's name. And a record
whose phases were emptied derived rows with no CPU, latency or memory figures, reported as
"changed". Both keep the cell's recorded figures instead, with a line naming the cell and why.

What identifies the life: the cell id the record names (twice: `cell` and `identity.cell`), the
server, allocator, THP mode, engine and round it says it ran, and the exit's resource usage
(wait4's reading of that very server process, the same reading the cell record keeps: no two
lives share it).
"""

from __future__ import annotations

import math

from rundir.admissible import id_round, identity_mismatch
from rundir.schema import RATE


def identity_problem(raw: dict, cell: dict) -> str | None:
    """Why `raw` is not the raw record of the cell entry `cell` (its cells/<id>.json "cell"), or
    None. One clause, naming the field and both values."""
    cid = cell.get("id")
    ident = raw.get("identity") if isinstance(raw.get("identity"), dict) else {}
    for where, value in (("cell", raw.get("cell")), ("identity.cell", ident.get("cell"))):
        if value is not None and value != cid:
            return f"it is the raw record of cell {value!r} ({where}), not of {cid!r}"
    # its server, allocator, THP mode and engine: every row derived from it carries them
    found = identity_mismatch(ident, cell)
    if found is not None:
        col, have, want = found
        return f"its identity.{col} is {have!r}, the cell ran {want!r}"
    r = id_round(str(cid))
    rep = ident.get("repeat")
    if r is not None and rep is not None and rep != r:
        return f"its identity.repeat is {rep!r}, the cell ran in round {r}"
    mine = (cell.get("exit") or {}).get("rusage") if isinstance(cell.get("exit"), dict) else None
    theirs = (raw.get("exit") or {}).get("rusage") if isinstance(raw.get("exit"), dict) else None
    if mine and theirs and mine != theirs:
        return (
            "its exit's resource usage (wait4) differs from the cell record's: it observed "
            "another server life"
        )
    return None


def phases_problem(raw: dict, cell: dict) -> str | None:
    """Why `raw` cannot re-derive the levels the cell recorded as ok, or None: each needs its
    level entry and its phase, closed (the boundaries the figures are taken between)."""
    phases = raw.get("phases") if isinstance(raw.get("phases"), dict) else {}
    levels = {lv.get("phase"): lv for lv in raw.get("levels") or [] if isinstance(lv, dict)}
    lacking = []
    for lv in cell.get("levels") or []:
        if not isinstance(lv, dict) or lv.get("status") != "ok":
            continue
        name = lv.get("phase") or f"{lv.get('workload')}@{lv.get('threads')}"
        ph = phases.get(name)
        if name not in levels or not isinstance(ph, dict) or ph.get("end") is None:
            lacking.append(name)
    if not lacking:
        return None
    shown = ", ".join(lacking[:4]) + (f" (and {len(lacking) - 4} more)" if len(lacking) > 4 else "")
    return f"it lacks the level(s) or closed phase(s) {shown} that the cell recorded as ok"


def rates_problem(raw: dict) -> str | None:
    """The first rate `raw` records that no level could have had, or None: an interval report's
    rate or a block's (the alternate design) that is not a finite number, is below 0 or above
    any server's (rundir.schema.RATE). The steady rates and the verdicts are taken from these:
    a NaN emptied a level's steady rate in silence, a 1e300 made one of 1e152. One clause,
    naming the level, the block and the interval: "level point_select@4, block 2, interval 3
    (t 3.0 s): rate nan is not a finite number"."""
    for lv in raw.get("levels") or []:
        if not isinstance(lv, dict):
            continue
        name = "level " + str(lv.get("phase") or f"{lv.get('workload')}@{lv.get('threads')}")
        problem = _intervals_problem(lv.get("intervals"), name)
        if problem:
            return problem
        for b in lv.get("blocks") or []:
            block = f"{name}, block {int(b.get('index', 0)) + 1}"
            why = _rate_problem(b.get("qps"))
            if why:
                return f"{block}: qps {why}"
            problem = _intervals_problem(b.get("intervals"), block)
            if problem:
                return problem
    return None


def _intervals_problem(intervals, where: str) -> str | None:
    for i, item in enumerate(intervals or []):
        why = _rate_problem(item[1])
        if why:
            return f"{where}, interval {i + 1} (t {item[0]} s): rate {why}"
    return None


def _rate_problem(value) -> str | None:
    if value is None:
        return None
    if not math.isfinite(value):
        return f"{value!r} is not a finite number"
    why = RATE.problem(value)
    return f"{value!r} {why}" if why else None
