"""Plain `sysbench <stock script> run`: the raw arm of the sweep-vs-raw figure (issue 19).

The command a DBA would type: the stock script, the same connection, dataset, thread count,
duration and --db-ps-mode as our level, and nothing else (no wrapper, no report interval). It is
started exactly as our levels start sysbench (the exec helper, the same open-file limit), so the
comparison measures the harness, not a different launch, and waited for with one blocking select
on a pidfd: the runner makes no wake-ups of its own while a raw block runs.
"""

from __future__ import annotations

import os
import re
import resource
import select
import signal
from dataclasses import dataclass
from pathlib import Path

from servers.launch import spawn
from suites.workloads import sysbench
from suites.workloads.level_result import ClientTarget
from suites.workloads.sysbench.options import connection_args, stock_script

# sysbench's own summary lines, printed by its C reporters in both arms (our wrapper prints them
# through sysbench's db_report_cumulative too, so the two logs read alike).
_QUERIES = re.compile(r"queries:\s+(\d+)\s+\(([\d.]+) per sec")
_TOTAL_TIME = re.compile(r"total time:\s+([\d.]+)s")


def raw_sysbench_argv(
    target: ClientTarget,
    workload: str,
    opts,
    threads: int,
    duration_s: int,
    extra: tuple[str, ...] = (),
) -> list[str]:
    """The plain command: the stock script, no report interval, no wrapper (`extra`: options
    added before "run", for the sources figure)."""
    return [
        opts.sysbench,
        stock_script(workload),
        *connection_args(target),
        f"--tables={opts.tables}",
        f"--table-size={opts.table_size}",
        f"--threads={threads}",
        f"--time={duration_s}",
        "--events=0",
        f"--db-ps-mode={opts.ps_mode}",
        *extra,
        "run",
    ]


def raw_qps(output: str) -> float:
    """sysbench's own 'queries: N (X per sec.)' figure; ValueError when it is missing."""
    return printed_summary(output)["qps"]


def printed_summary(output: str) -> dict:
    """What sysbench printed at the end of a run: queries, their rate, and its total time."""
    m = _QUERIES.search(output)
    if not m:
        raise ValueError("sysbench printed no 'queries: ... per sec.' line")
    t = _TOTAL_TIME.search(output)
    return {
        "queries": int(m.group(1)),
        "qps": float(m.group(2)),
        "total_time_s": float(t.group(1)) if t else None,
    }


@dataclass
class RawBlock:
    qps: float
    queries: int
    total_time_s: float | None
    sysbench_cpu_s: float  # the sysbench process's own CPU (wait4 rusage)


def run_raw_level(
    target: ClientTarget,
    workload: str,
    opts,
    threads: int,
    duration_s: int,
    log: Path,
    extra: tuple[str, ...] = (),
) -> RawBlock:
    """One plain sysbench level; RuntimeError naming the log when it fails."""
    argv = raw_sysbench_argv(target, workload, opts, threads, duration_s, extra)
    nofile = sysbench.runner.ensure_nofile(threads + 256)["soft"]
    log.write_bytes(b"")
    child = spawn(
        argv,
        env={"PATH": "/usr/local/bin:/usr/bin:/bin", "LC_ALL": "C", "HOME": str(log.parent)},
        cwd=log.parent,
        stdout=log,
        stderr=log,
        death_signal=signal.SIGKILL,
        rlimits={"nofile": nofile} if nofile != resource.RLIM_INFINITY else None,
    )
    limit = sysbench.runner.default_timeout(threads, duration_s)
    try:
        pidfd = os.pidfd_open(child.pid)
    except OSError:
        pidfd = None
    try:
        if pidfd is not None:
            select.select([pidfd], [], [], limit)
        done = child.wait(0 if pidfd is not None else limit)
        if done is None and pidfd is not None:
            done = child.wait(1.0)  # readable pidfd, reaper not done yet
    finally:
        if pidfd is not None:
            os.close(pidfd)
        if child.poll() is None:
            child.terminate(term_timeout=5)
    if done is None:
        raise RuntimeError(f"raw sysbench {workload}@{threads} did not finish; see {log}")
    if done.returncode != 0:
        raise RuntimeError(f"raw sysbench {workload}@{threads} {done.describe}; see {log}")
    printed = printed_summary(log.read_text(errors="replace"))
    cpu = done.rusage.get("ru_utime", 0.0) + done.rusage.get("ru_stime", 0.0)
    return RawBlock(printed["qps"], printed["queries"], printed["total_time_s"], cpu)
