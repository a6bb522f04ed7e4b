"""One level of our own Python load clients (iibench) run on a client host.

The whole level runs there (suites.workloads.level_agent, under mallocsweep's install on that host,
checked at preflight to be the same code as ours): its clients are processes of that host,
connected to the server over TCP, started and stopped by the same machinery as on the server's
machine. Over the shared SSH connection the runner writes the level's work file (mode 600: the
per-cell account's password), starts the agent, and reads its records as they come: each
interval report is handed to the collectors at once (their window marks are on our clock, as for
a local level; the records cross the connection in a round trip), and the level's result at the
end. The agent's log comes back on ssh's stderr into the level's log.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path

from rundir.records import AgentLevel, ClientLoad, IIBenchLevel
from servers.launch import Child
from suites.remote.spawn import spawn_over_ssh
from suites.workloads.level_loop import Stream, run_streams
from suites.workloads.level_result import ClientTarget, LevelResult


class AgentIntervals:
    """How the agent's interval records read (suites.workloads.level_loop.Intervals): one stream, its
    rates as the agent computed them."""

    def rates(self, rec: dict) -> tuple[float, float, float]:
        return float(rec["t_s"]), float(rec["tps"]), float(rec["qps"])

    def combine(self, recs: list[dict]) -> dict:
        raise NotImplementedError("an agent level runs on one client host")


def run_remote_level(
    remote,
    kind: str,
    target: ClientTarget,
    spec,
    log_path: Path,
    on_interval: Callable[[float, float, float], None] | None = None,
) -> LevelResult:
    """The level's result as the agent reported it, with the client host's own load over it;
    status "failed" with the reason when the agent or the connection failed (never raises for
    that)."""
    log_path = Path(log_path).absolute()
    log_path.parent.mkdir(parents=True, exist_ok=True)
    rec_path = log_path.with_suffix(".jsonl")
    tag = remote.new_tag()
    work = {
        "kind": kind,
        "target": dataclasses.asdict(target),
        "spec": dataclasses.asdict(spec),
        "log": f"{remote.dir}/{tag}.log",
    }
    path = remote.put(f"{tag}.work.json", json.dumps(work).encode())
    argv = remote.python_command(["-m", "suites.workloads.level_agent", path], tag)

    def start(scratch: Path, _go) -> Child:
        return spawn_over_ssh(argv, log_path, rec_path, scratch)

    stream = Stream(remote.target, start, rec_path, abort=lambda: remote.abort(tag))
    result: list[dict] = []

    def record(_stream: Stream, rec: dict) -> None:
        if rec["type"] == "result":
            result.append(rec["result"])

    before = remote.load()
    # No deadline of ours: the agent's level has its own caps (max_seconds, stall_timeout_s).
    run = run_streams(
        [stream], AgentIntervals(), limit_s=None, on_interval=on_interval, on_record=record,
        what="the client host's level",
    )  # fmt: skip
    if not result:
        child = stream.child
        how = (
            f"could not start ({stream.start_error})"
            if child is None
            else (child.exit.describe if child.exit else "ended in an unknown way")
        )
        tail = [ln for ln in log_path.read_text(errors="replace").splitlines() if ln.strip()]
        return LevelResult(
            workload=kind,
            threads=getattr(spec, "clients", 0),
            status="failed",
            error=f"client host {remote.target}: the level {how}"
            + (f": {tail[-1][:200]}" if tail else ""),
            raw_log=log_path,
            iibench=IIBenchLevel(wall_s=run.wall_s),
        )
    res = LevelResult.from_json(result[0])
    res.raw_log = log_path
    res.agent = AgentLevel(records=str(rec_path), tag=tag)
    # the client host's own CPU, context switches and network over the level
    res.client_load = ClientLoad(**remote.level_load(before))
    return res
