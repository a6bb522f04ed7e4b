"""What every workload shares: where its clients connect, and what one level produces.

A workload (sysbench sweep, iibench) is a thin leaf over this: it prepares its data once, and runs
one level (a thread/client count for a duration) into a LevelResult. The runner owns servers and
collectors; a workload only talks to the server as a client (suites.workloads.context).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path

from rundir.records import (
    AgentLevel,
    ChurnLevel,
    ClientLoad,
    IIBenchLevel,
    RwwLevel,
    ScenarioLevel,
    SysbenchLevel,
)

# ClientTarget lives below the families and the workloads, which both use it (suites/target.py);
# imported here too for the modules that take it with LevelResult.
from suites.target import ClientTarget as ClientTarget

# Called by a running level once per reporting interval: (seconds since level start, tps, qps).
IntervalCallback = Callable[[float, float, float], None]


# The typed records a LevelResult may carry, by field name (rundir.records: RawLevel has the same
# fields). At most one of sysbench/iibench/rww (what is particular to the workload); churn,
# client_load, agent and scenario (a fragmentation scenario's cycle) are what any workload's
# level may add beside.
RECORDS = {
    "sysbench": SysbenchLevel,
    "iibench": IIBenchLevel,
    "rww": RwwLevel,
    "churn": ChurnLevel,
    "client_load": ClientLoad,
    "agent": AgentLevel,
    "scenario": ScenarioLevel,
}


@dataclass
class LevelResult:
    """One level's figures as the workload itself measured them (server-side figures come from
    the collectors). Latencies in milliseconds; rates per second over `duration_s`."""

    workload: str
    threads: int
    status: str = "ok"  # "ok" or "failed"
    error: str | None = None
    duration_s: float = 0.0
    events: int = 0  # transactions (sysbench) or rows inserted (iibench): the "op" in per-op rates
    tps: float = 0.0
    qps: float = 0.0
    lat_avg_ms: float | None = None
    lat_p50_ms: float | None = None
    lat_p95_ms: float | None = None
    lat_p99_ms: float | None = None
    lat_p999_ms: float | None = None
    lat_max_ms: float | None = None
    errors: int = 0
    reconnects: int = 0
    intervals: list[dict] = field(
        default_factory=list
    )  # per-interval figures, t_s relative to level start
    raw_log: Path | None = None
    sysbench: SysbenchLevel | None = None
    iibench: IIBenchLevel | None = None
    rww: RwwLevel | None = None
    churn: ChurnLevel | None = None
    client_load: ClientLoad | None = None
    agent: AgentLevel | None = None
    scenario: ScenarioLevel | None = None

    def row(self) -> dict:
        """The results.csv fields this result owns."""
        skip = {"intervals", "raw_log", "status", "error", *RECORDS}
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in skip}

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
