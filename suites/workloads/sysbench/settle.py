"""A level that runs until its ramp has ended: the live side of the steady-state rule.

With `[sysbench] settle_cap_s`, a level is planned as duration_s + settle_cap_s seconds of
sysbench, and this watch follows its interval reports as they come. After each it applies the
same rule the derivation applies afterwards (rundir/derive/steady.py, MSER over the reports so
far); once the rule calls the series settled and at least duration_s seconds of reports follow
the ramp's end, it creates the stop file, and our Lua wrapper ends sysbench at its next report
the way --time would (mallocsweep.lua, maybe_stop): one report later than the rule was met,
since the file can only appear after the report that satisfied it (a steady second more). A level whose ramp never ends runs to the cap,
and its derivation flags it (settled = 0).

The live answer only decides when to stop; what the results say (ramp_s, settled, the window) is
derived afterwards from the recorded reports, so `report --rederive` gives the same figures.
"""

from __future__ import annotations

from pathlib import Path

from rundir.derive.steady import mser_truncation


class SettleWatch:
    """Follows one level's reports; `stop_path` appears once the level has measured enough."""

    def __init__(self, duration_s: float, stop_path: Path):
        self.duration_s = float(duration_s)
        self.stop_path = Path(stop_path)
        self.times: list[float] = []
        self.rates: list[float] = []
        self.stopped_at: float | None = None

    def add(self, t_s: float, qps: float) -> None:
        """One interval report (the workload's clock, its rate); may create the stop file."""
        self.times.append(float(t_s))
        self.rates.append(float(qps))
        if self.stopped_at is None and self.due():
            self.stopped_at = self.times[-1]
            self.stop_path.touch(exist_ok=True)

    def due(self) -> bool:
        """Settled, and duration_s seconds of reports after the ramp's end.

        The first report is not judged (clients may still be connecting during it, and the
        measured window opens at its mark, rundir.derive.window): the series is reports 1..k,
        as the derivation's load_rates gives it."""
        if len(self.times) < 2:
            return False
        steady = mser_truncation(self.rates[1:])
        if steady is None or not steady.settled:
            return False
        return self.times[-1] - self.times[steady.drop] >= self.duration_s - 1e-9
