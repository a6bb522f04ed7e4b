"""What every workload shares: where its clients connect, and what one level produces.

A workload (sysbench sweep, iibench) is a thin leaf over this: it prepares its data once, and runs
one level (a thread/client count for a duration) into a LevelResult. The runner owns servers and
collectors; a workload only talks to the server as a client (suites.workloads.context).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields, make_dataclass
from pathlib import Path
from typing import get_args

from pydantic import BaseModel

from rundir import schema
from rundir.records import RawLevel

# ClientTarget lives below the families and the workloads, which both use it (suites/target.py);
# imported here too for the modules that take it with LevelResult.
from suites.target import ClientTarget as ClientTarget

# Called by a running level once per reporting interval: (seconds since level start, tps, qps).
IntervalCallback = Callable[[float, float, float], None]


# The typed records a LevelResult may carry, by field name: RawLevel's typed fields (rundir.records),
# so the two cannot drift apart. At most one of sysbench/iibench/rww (what is particular to the
# workload); churn, client_load, agent and scenario (a fragmentation scenario's cycle) are what
# any workload's level may add beside.
RECORDS: dict[str, type[BaseModel]] = {
    name: model
    for name, info in RawLevel.model_fields.items()
    for model in get_args(info.annotation)
    if isinstance(model, type) and issubclass(model, BaseModel) and name != "report"
}

# The figures every workload reports (duration_s, events, tps, qps, latencies, errors,
# reconnects: rundir.schema.WORKLOAD_REPORT, with their units and meaning), and the typed records
# (each None unless the level has one): declared there, so results.csv's columns, the raw
# record's `report` and this result cannot disagree. Keyword-only, as every caller passes them.
_Figures = make_dataclass(
    "_Figures",
    [
        *schema.WORKLOAD_REPORT.dataclass_fields(),
        *((name, model | None, field(default=None)) for name, model in RECORDS.items()),
    ],
    kw_only=True,
)


@dataclass(kw_only=True)
class LevelResult(_Figures):
    """One level's figures as the workload itself measured them (server-side figures come from
    the collectors). Latencies in milliseconds; rates per second over `duration_s`, the level's
    MEASURED length (its clients' clock; the planned length is the raw clock's planned_s). The
    figures are rundir.schema.WORKLOAD_REPORT's; the typed records are RECORDS'."""

    workload: str
    threads: int
    status: str = "ok"  # "ok" or "failed"
    error: str | None = None
    intervals: list[dict] = field(
        default_factory=list
    )  # per-interval figures, t_s relative to level start
    raw_log: Path | None = None

    def row(self) -> dict:
        """The results.csv fields this result owns (the raw record's report:
        rundir.schema.RAW_REPORT)."""
        return {name: getattr(self, name) for name in schema.RAW_REPORT.columns()}

    def records(self) -> dict:
        """Its typed records as the raw record keeps them (JSON-safe), the absent ones left out."""
        return {
            name: rec.model_dump(mode="json")
            for name in RECORDS
            if (rec := getattr(self, name)) is not None
        }

    def to_json(self) -> dict:
        """Everything, JSON-safe (a level run by our agent on a client host comes back as this)."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in RECORDS}
        out["raw_log"] = None if self.raw_log is None else str(self.raw_log)
        return out | self.records()

    @classmethod
    def from_json(cls, data: dict) -> LevelResult:
        data = dict(data)
        for name, model in RECORDS.items():
            if data.get(name) is not None:
                data[name] = model.model_validate(data[name])
        if data.get("raw_log") is not None:
            data["raw_log"] = Path(data["raw_log"])
        return cls(**data)
