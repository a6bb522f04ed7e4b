"""Which design a run compared its arms with: solo lives or alternating blocks (docs/designs.md).

The manifest's `run_design` says it (suites/runner/alternate.py writes it); a run recorded before
designs existed has none and ran solo lives. Every verdict of a run comes from its design: the
report names it beside the verdicts, verdicts.csv has it in its `design` column, and compare
says so when two runs were measured differently.
"""

from __future__ import annotations

SOLO, ALTERNATE = "solo", "alternate"


def name(manifest: dict) -> str:
    """ "solo" or "alternate" (older runs: solo)."""
    return (manifest.get("run_design") or {}).get("name") or SOLO


def _settling(rec: dict) -> str:
    cap = rec.get("block_settle_cap_s")
    return f" after each block's ramp (at most {cap} s more)" if cap else ""


def words(manifest: dict) -> str:
    """The design in a line, for the report's metadata and compare."""
    rec = manifest.get("run_design") or {}
    if name(manifest) == ALTERNATE:
        return (
            f"alternate: a round's servers alive together, each level run on them in turn in "
            f"blocks of {rec.get('block_s', '?')} s{_settling(rec)}, {rec.get('blocks', '?')} per arm; "
            "throughput from the blocks' steady rates (pairs of adjacent blocks), the round the "
            "unit of the interval"
        )
    return "solo: one server life at a time, every level run whole"
