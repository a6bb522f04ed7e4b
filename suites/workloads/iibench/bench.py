"""Figures about the load generator itself, for `make bench` (which owns the server it passes in).

- Does the multi-process client scale? The same level run by client processes and by threads of
  one Python process (the GIL-bound baseline), on the same server, back to back; the ratio of
  insert rates says whether the client could have been the bottleneck.
- What does the client cost? Client CPU (each client's own getrusage over the load) as a fraction
  of the server's CPU over the same level, the server's from /proc/PID/stat before and after.
  On a shared 2-core machine both figures are noisy: report them as ratios of one run.
"""

from __future__ import annotations

import statistics
from pathlib import Path

from collectors.procfs import ProcFS
from suites.workloads.iibench.run_level import PROCESSES, THREADS, run_level
from suites.workloads.iibench.schema import prepare
from suites.workloads.iibench.spec import IIBenchSpec
from suites.workloads.level_result import ClientTarget, LevelResult


def process_cpu_s(pid: int, proc_root: str = "/proc") -> float:
    """utime + stime of a whole process (all its threads, live and exited) in seconds."""
    st = ProcFS(proc_root).stat(pid)
    return st.utime_s + st.stime_s


def _checked(res: LevelResult, what: str) -> LevelResult:
    if res.status != "ok":
        raise RuntimeError(f"{what} level failed: {res.error}")
    return res


def process_vs_thread_rate(
    target: ClientTarget, spec: IIBenchSpec, log_dir: Path, repeats: int = 2
) -> dict:
    """Insert rate of `spec` with client processes vs the same clients as threads in one process.

    One discarded warm-up level first (the first level on a fresh server pays for buffer pool
    and file growth), then `repeats` rounds alternating the order (processes first, then threads
    first) so drift cancels; the medians are compared. The table is recreated before every level.
    ratio > 1: the process clients got more inserts through; ~1: the server sets the pace.
    """
    log_dir = Path(log_dir)

    def level(mode: str, tag: str) -> LevelResult:
        prepare(target, spec)
        return _checked(run_level(target, spec, log_dir / f"iibench-{tag}.log", mode=mode), tag)

    level(PROCESSES, "warmup")
    rates: dict[str, list[float]] = {PROCESSES: [], THREADS: []}
    cpu: dict[str, list[float]] = {PROCESSES: [], THREADS: []}
    for r in range(repeats):
        order = (PROCESSES, THREADS) if r % 2 == 0 else (THREADS, PROCESSES)
        for mode in order:
            res = level(mode, f"{mode}-{r}")
            rates[mode].append(res.qps)
            cpu[mode].append(res.iibench.client_cpu_s)
    p, t = statistics.median(rates[PROCESSES]), statistics.median(rates[THREADS])
    return {
        "clients": spec.clients,
        "rows_per_level": spec.max_rows,
        "repeats": repeats,
        "processes_rows_per_s": p,
        "threads_rows_per_s": t,
        "processes_runs": rates[PROCESSES],
        "threads_runs": rates[THREADS],
        "processes_client_cpu_s": statistics.median(cpu[PROCESSES]),
        "threads_client_cpu_s": statistics.median(cpu[THREADS]),
        "ratio": round(p / t, 3) if t else None,
    }


def client_cpu_fraction(
    target: ClientTarget, spec: IIBenchSpec, server_pid: int, log_path: Path
) -> dict:
    """Client CPU / server CPU over one level of `spec` (client processes), table recreated first."""
    prepare(target, spec)
    before = process_cpu_s(server_pid)
    res = _checked(run_level(target, spec, Path(log_path), mode=PROCESSES), "client-cpu")
    server = process_cpu_s(server_pid) - before
    client = res.iibench.client_cpu_s
    return {
        "rows": res.events,
        "rows_per_s": res.qps,
        "client_cpu_s": client,
        "server_cpu_s": round(server, 3),
        "fraction": round(client / server, 3) if server > 0 else None,
    }
