"""A soak's stopping rule: looks at the growth verdicts at fixed soak times, each spending a share
of the 5% (docs/soak.md).

The soak of T seconds plans K = ceil(T / look_s) looks before it starts (the suite's
soak_look_s, 10 minutes by default). Look k tests every growth verdict (analysis/growth_rate.py,
soak_differences) at the level 1 - alpha_k, alpha_k being look k's increment of the Lan-DeMets
Pocock-type spending function over the K planned looks (analysis/sequential.py): by the union
bound the chance that any look's interval misses its true difference is at most 5%, whatever
rule stops the soak, so the intervals of the look where it stopped are valid 95% intervals. The
soak stops at the first look where every growth verdict is decided (grows more, grows less, or
no difference beyond the margin); else it runs until its time is up, where the last look (K)
spends what is left.

A report made from the soak's data is itself a look: at the level of the look the soak stopped
at when it was judged at its end, else (a soak interrupted and never resumed, whose data goes
past its last look) at the next look's level. Pure: no I/O, no clock.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from analysis.growth_rate import Difference
from analysis.metrics import UNDECIDED
from analysis.sequential import ALPHA, SPENDING, look_alpha


def planned_looks(soak_s: float, look_s: float) -> int:
    """Looks a soak of soak_s plans, one every look_s and one at its end (at least 1)."""
    return max(1, math.ceil(soak_s / look_s - 1e-9))


def look_level(k: int, looks: int, alpha: float = ALPHA) -> float:
    """The confidence level of look k (1-based, capped at the planned looks)."""
    return 1 - look_alpha(min(max(k, 1), looks), looks, alpha)


def report_level(manifest: dict, workload: str | None = None) -> float:
    """The level a report judges a soak's growth verdicts at (module doc); a soak of scenarios
    apart judges each scenario's at its own stage's looks (suites/runner/soak.py)."""
    soak = manifest.get("soak") or {}
    alpha = float(soak.get("alpha") or ALPHA)
    window = soak
    if soak.get("stages"):
        window = next((s for s in soak["stages"] if s.get("scenario") == workload), None)
        if window is None or not window.get("looks_planned"):
            # no stage of that name, or a stage that never started: its own single look
            return 1 - alpha
    looks = int(window.get("looks_planned") or 1)
    made = len(window.get("looks") or [])
    k = made if window.get("judged_at_end") else made + 1
    return look_level(k, looks, alpha)


def due_look(done_s: float, soak_s: float, look_s: float, made: list[int]) -> int | None:
    """The look due after a turn of blocks at `done_s` seconds of soak, or None: look K (the
    last, spending what is left) once the time is up, else the last whole look_s passed (at most
    K - 1), when it is later than every look made (`made`: their numbers). A turn longer than
    look_s skips a look rather than making two on the same data."""
    looks = planned_looks(soak_s, look_s)
    k = looks if done_s >= soak_s else min(int(done_s // look_s), looks - 1)
    return k if k >= 1 and k > max(made, default=0) else None


@dataclass(frozen=True)
class Look:
    k: int
    level: float
    verdicts: list[tuple[tuple[str, str, str, str], str, Difference]]

    @property
    def undecided(self) -> int:
        return sum(1 for _, _, d in self.verdicts if d.verdict == UNDECIDED)

    @property
    def all_decided(self) -> bool:
        """Every growth verdict decided (and there is at least one to decide)."""
        return bool(self.verdicts) and self.undecided == 0

    def message(self, at_s: float, looks: int, last: bool = False) -> str:
        """What the look says; `last`: the soak's (or its stage's) time is up with this look."""
        n = len(self.verdicts)
        head = f"look {self.k}/{looks} at {at_s / 3600:.2f} h (level {self.level:.4f})"
        if not n:
            return f"{head}: no growth verdict yet (too few cycles)"
        if self.all_decided:
            return f"{head}: all {n} growth verdicts decided" + (
                "" if last else ": the soak stops early"
            )
        return f"{head}: {n - self.undecided} of {n} growth verdicts decided" + (
            ": its time is up" if last else ": the soak goes on"
        )

    def to_manifest(self, at_s: float) -> dict:
        return {
            "look": self.k,
            "at_s": round(at_s, 1),
            "level": self.level,
            "decided": len(self.verdicts) - self.undecided,
            "verdicts": len(self.verdicts),
        }


def design(soak_s: float, look_s: float, block: int, margin: float) -> dict:
    """The soak's plan as the manifest records it before any cycle ran."""
    return {
        "seconds": soak_s,
        "look_s": look_s,
        "looks_planned": planned_looks(soak_s, look_s),
        "block_cycles": block,
        "alpha": ALPHA,
        "method": SPENDING,
        "margin_mb_per_hour": margin,
        "done_s": 0.0,
        "segments": [],
        "looks": [],
        "stopped": None,
        "judged_at_end": False,
    }
