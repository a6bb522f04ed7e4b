"""One level of our own Python load clients (iibench) run on a client host.

The whole level runs there (suites.remote.level_agent, under mallocsweep's install on that host,
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
import shutil
import signal
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from servers import interrupts
from suites.sysbench.runner import POLL_S, _RecordFollower, _spawn_remote
from suites.workload import ClientTarget, LevelResult


def run_remote_level(
    remote,
    kind: str,
    target: ClientTarget,
    spec,
    log_path: Path,
    on_interval: Callable[[float, float, float], None] | None = None,
) -> LevelResult:
    """The level's result as the agent reported it; status "failed" with the reason when the
    agent or the connection failed (never raises for that)."""
    log_path = Path(log_path).absolute()
    log_path.parent.mkdir(parents=True, exist_ok=True)
    rec_path = log_path.with_suffix(".jsonl")
    rec_path.unlink(missing_ok=True)
    rec_path.touch()
    tag = remote.new_tag()
    work = {
        "kind": kind,
        "target": dataclasses.asdict(target),
        "spec": dataclasses.asdict(spec),
        "log": f"{remote.dir}/{tag}.log",
    }
    path = remote.put(f"{tag}.work.json", json.dumps(work).encode())
    argv = remote.python_command(["-m", "suites.remote.level_agent", path], tag)
    scratch = Path(tempfile.mkdtemp(prefix="ms-py-", dir="/tmp"))
    follower = _RecordFollower(rec_path)
    result = None
    child = None
    started = time.monotonic()
    try:
        child = _spawn_remote(argv, log_path, rec_path, scratch)
        while True:
            ended = child.poll()
            for rec in follower.new_records():
                if rec["type"] == "interval" and on_interval is not None:
                    on_interval(float(rec["t_s"]), float(rec["tps"]), float(rec["qps"]))
                elif rec["type"] == "result":
                    result = rec["result"]
            if ended is not None:
                break
            interrupts.check()
            child.wait(POLL_S)
    finally:
        with interrupts.held(), interrupts.doing("the client host's level to be ended"):
            bad = child is None or child.poll() is None or child.exit.returncode != 0
            if child is not None and child.poll() is None:
                child.signal_group(signal.SIGKILL)
                child.wait(10)
            if bad:
                remote.abort(tag)
            shutil.rmtree(scratch, ignore_errors=True)
    if result is None:
        how = child.exit.describe if child.exit else "ended in an unknown way"
        tail = [ln for ln in log_path.read_text(errors="replace").splitlines() if ln.strip()]
        return LevelResult(
            workload=kind,
            threads=getattr(spec, "clients", 0),
            status="failed",
            error=f"client host {remote.target}: the level {how}"
            + (f": {tail[-1][:200]}" if tail else ""),
            raw_log=log_path,
            extra={"wall_s": round(time.monotonic() - started, 3)},
        )
    result["raw_log"] = log_path
    res = LevelResult(**result)
    res.extra["client_host_level"] = {"records": str(rec_path), "tag": tag}
    return res
