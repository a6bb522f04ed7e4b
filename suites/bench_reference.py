"""`make bench`'s side-by-side arms against the reference tools (issue 19): does the harness cost
the server it measures?

(a) sweep vs raw sysbench: server lives alternate between mallocsweep's level (our Lua wrapper,
    the runner's record follower, the real Collectors with their sampler, window marks and status
    read, exactly as a cell drives them) and plain `sysbench <stock script> run` with no
    collectors, no wrapper and nobody watching. Same binary, same generated my.cnf, same restored
    dataset, same cold start and scans, same levels in the same order. The ratio of each round's
    pair (ours / raw) is the figure; its min..max over the rounds is its interval.
    Beside it, two figures that do not depend on the machine's noise: the runner process's own
    CPU while a level runs (sampler, marks, status read, record follower: whatever it takes,
    the server cannot have), and sysbench's CPU per query in both arms (the wrapper's hooks).
(b) iibench vs Callaghan's iibench.py (run from where it lives, never copied), on one server,
    levels alternating, the table recreated before each: the same rows, batch size, three
    secondary indexes created before the load (iibench.py needs --secondary_at_start for that:
    without it, it loads a table with no secondary index at all) and 10-byte data. Rates are
    rows / wall time from launching the client(s) to their last exit, on both sides; client CPU
    is the whole client processes' rusage (and, for ours, the runner's too) per inserted row.
"""

from __future__ import annotations

import os
import re
import resource
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from servers.launch import spawn
from suites import sysbench
from suites.sysbench.options import connection_args, stock_script
from suites.workload import ClientTarget

GOAL_SWEEP = 0.98  # ours / raw QPS, at every level
GOAL_IIBENCH = 1.0  # ours / iibench.py rows/s, at 1 and 10 clients
REPO = Path(__file__).resolve().parent.parent
# Where iibench.py is looked for when the user names no path: the shared reference folder beside
# the checkout (../shared/reference), or beside the worktrees' parent.
REFERENCE_CANDIDATES = (
    REPO.parent / "shared" / "reference" / "iibench.py",
    REPO.parent.parent / "shared" / "reference" / "iibench.py",
)
_RAW_QPS = re.compile(r"queries:\s+\d+\s+\(([\d.]+) per sec")


def _cpu(who: int) -> float:
    ru = resource.getrusage(who)
    return ru.ru_utime + ru.ru_stime


def paired(ours: list[float], ref: list[float]) -> dict:
    """Round-by-round ratios ours/ref, their median and min..max (the interval shown)."""
    ratios = [a / b for a, b in zip(ours, ref, strict=True) if b]
    if not ratios:
        return {"ratios": [], "ratio": None, "lo": None, "hi": None}
    return {
        "ratios": [round(r, 4) for r in ratios],
        "ratio": statistics.median(ratios),
        "lo": min(ratios),
        "hi": max(ratios),
    }


# -- (a) sweep vs raw sysbench ---------------------------------------------------------------------
def raw_sysbench_argv(
    target: ClientTarget, workload: str, opts, threads: int, duration_s: int
) -> list[str]:
    """The plain command a DBA would type: the stock script, no report interval, no wrapper."""
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
        "run",
    ]


def raw_qps(output: str) -> float:
    """sysbench's own 'queries: N (X per sec.)' figure; ValueError when it is missing."""
    m = _RAW_QPS.search(output)
    if not m:
        raise ValueError("sysbench printed no 'queries: ... per sec.' line")
    return float(m.group(1))


@dataclass
class SweepPoint:
    workload: str
    threads: int
    ours: list[float] = field(default_factory=list)
    raw: list[float] = field(default_factory=list)
    runner_core: list[float] = field(default_factory=list)  # runner CPU / wall during our level
    ours_client_us: list[float] = field(default_factory=list)  # sysbench CPU per query
    raw_client_us: list[float] = field(default_factory=list)

    def summary(self) -> dict:
        p = paired(self.ours, self.raw)
        med = statistics.median
        return {
            "workload": self.workload,
            "threads": self.threads,
            "ours_qps": self.ours,
            "raw_qps": self.raw,
            **p,
            "met": p["ratio"] is not None and p["ratio"] >= GOAL_SWEEP,
            "resolvable": p["lo"] is not None and p["hi"] - p["lo"] <= 2 * (1 - GOAL_SWEEP),
            "runner_core_fraction": med(self.runner_core) if self.runner_core else None,
            "ours_client_us_per_query": med(self.ours_client_us) if self.ours_client_us else None,
            "raw_client_us_per_query": med(self.raw_client_us) if self.raw_client_us else None,
        }


def run_raw_level(
    target: ClientTarget, workload: str, opts, threads: int, duration_s: int, log: Path
) -> tuple[float, float]:
    """One plain sysbench level; (QPS, sysbench CPU seconds)."""
    argv = raw_sysbench_argv(target, workload, opts, threads, duration_s)
    # Started exactly as our own levels start sysbench (exec helper, same open-file limit), so
    # the comparison measures the harness, not a different launch.
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
    done = child.wait(sysbench.runner.default_timeout(threads, duration_s))
    if done is None:
        done = child.terminate(term_timeout=5)
        raise RuntimeError(f"raw sysbench {workload}@{threads} did not finish; see {log}")
    if done.returncode != 0:
        raise RuntimeError(f"raw sysbench {workload}@{threads} {done.describe}; see {log}")
    cpu = done.rusage.get("ru_utime", 0.0) + done.rusage.get("ru_stime", 0.0)
    return raw_qps(log.read_text(errors="replace")), cpu


# -- (b) iibench vs iibench.py -----------------------------------------------------------------
def find_reference(given: Path | None) -> Path | None:
    if given is not None:
        return given if given.is_file() else None
    return next((p for p in REFERENCE_CANDIDATES if p.is_file()), None)


def reference_argv(script: Path, socket: str, database: str, rows: int, batch: int) -> list[str]:
    return [
        sys.executable,
        str(script),
        "--dbms=mysql",
        f"--db_socket={socket}",
        "--db_user=root",
        "--db_password=",
        f"--db_name={database}",
        f"--max_rows={rows}",
        f"--rows_per_commit={batch}",
        "--num_secondary_indexes=3",
        "--data_length_min=10",
        "--data_length_max=10",
        "--secs_per_report=1",
        "--query_threads=0",
    ]


def run_reference(
    script: Path, socket: str, database: str, clients: int, rows: int, batch: int, log_dir: Path
) -> dict:
    """`clients` iibench.py processes inserting rows/clients each into a freshly created table;
    the table (with its secondary indexes, --secondary_at_start) is made first, untimed."""
    setup = reference_argv(script, socket, database, 0, batch) + ["--setup", "--secondary_at_start"]
    done = subprocess.run(setup, capture_output=True, text=True, cwd=log_dir, timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"iibench.py --setup exited {done.returncode}: {done.stderr[-300:]}")
    each = rows // clients
    c0, t0 = _cpu(resource.RUSAGE_CHILDREN), time.monotonic()
    procs = []
    for i in range(clients):
        out = open(log_dir / f"iibench-py-{clients}-{i}.log", "w")  # noqa: SIM115 - closed below
        argv = reference_argv(script, socket, database, each, batch) + [f"--my_id={i + 1}"]
        procs.append((subprocess.Popen(argv, stdout=out, stderr=out, cwd=log_dir), out))
    codes = []
    try:
        for p, _ in procs:
            codes.append(p.wait(timeout=600))
    finally:
        for p, out in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
            out.close()
    wall = time.monotonic() - t0
    cpu = _cpu(resource.RUSAGE_CHILDREN) - c0
    if any(codes):
        raise RuntimeError(f"iibench.py exited {codes}; see {log_dir}")
    return {"rows": each * clients, "wall_s": wall, "cpu_s": cpu}


@dataclass
class InsertPoint:
    clients: int
    rows: int
    ours: list[float] = field(default_factory=list)  # rows/s, launch to last exit
    ref: list[float] = field(default_factory=list)
    ours_cpu_us: list[float] = field(default_factory=list)  # client CPU per inserted row
    ref_cpu_us: list[float] = field(default_factory=list)
    ours_in_window: list[float] = field(default_factory=list)  # our own measured-window rate

    def summary(self) -> dict:
        p = paired(self.ours, self.ref)
        med = statistics.median
        ours_cpu = med(self.ours_cpu_us) if self.ours_cpu_us else None
        ref_cpu = med(self.ref_cpu_us) if self.ref_cpu_us else None
        return {
            "clients": self.clients,
            "rows": self.rows,
            "ours_rows_per_s": self.ours,
            "ref_rows_per_s": self.ref,
            "ours_in_window_rows_per_s": self.ours_in_window,
            **p,
            "met": p["ratio"] is not None and p["ratio"] >= GOAL_IIBENCH,
            "ours_cpu_us_per_row": ours_cpu,
            "ref_cpu_us_per_row": ref_cpu,
            "cpu_met": ours_cpu is not None and ref_cpu is not None and ours_cpu < ref_cpu,
        }


def run_ours_iibench(target: ClientTarget, spec, log: Path) -> dict:
    from suites.iibench.level import run_level
    from suites.iibench.schema import count_rows, prepare

    prepare(target, spec)
    c0, s0, t0 = _cpu(resource.RUSAGE_CHILDREN), _cpu(resource.RUSAGE_SELF), time.monotonic()
    res = run_level(target, spec, log)
    wall = time.monotonic() - t0
    cpu = _cpu(resource.RUSAGE_CHILDREN) - c0 + _cpu(resource.RUSAGE_SELF) - s0
    if res.status != "ok":
        raise RuntimeError(f"iibench level failed: {res.error}")
    rows = count_rows(target, spec)
    if rows != spec.max_rows:
        raise RuntimeError(f"iibench inserted {rows} rows, {spec.max_rows} expected")
    return {"rows": rows, "wall_s": wall, "cpu_s": cpu, "in_window": res.qps}


def reference_rows(conn_factory, database: str) -> int:
    conn = conn_factory()
    try:
        cur = conn.cursor()
        cur.execute(f"SELECT COUNT(*) FROM `{database}`.purchases_index")
        return int(cur.fetchone()[0])
    finally:
        conn.close()


def mysqldb_missing() -> str | None:
    """Why iibench.py cannot run with this interpreter, or None."""
    try:
        import MySQLdb  # noqa: F401
    except ImportError as e:
        return f"its MySQLdb client (PyPI mysqlclient) is not importable: {e}"
    return None


def env_note() -> dict:
    return {"cpu_count": os.cpu_count(), "loadavg_at_start": os.getloadavg()}


def sweep_life(
    server, mode: str, points: list[SweepPoint], opts, work: Path, tag: str, duration: int
):
    """One server life, levels in `points` order: "ours" exactly as a cell runs them (collectors
    attached before exec, phases, window marks at each interval report, the mid-level status
    read, sampler liveness checked), "raw" plain sysbench with nothing attached."""
    from analysis.rundir_format import SAMPLE_COLUMNS
    from collectors.session import Collectors
    from suites.warmup import scan_tables

    coll = None
    if mode == "ours":
        coll = Collectors(work / f"samples-{tag}.csv", list(SAMPLE_COLUMNS))

    def attach(pid: int) -> None:
        coll.on_spawn(pid)
        coll.start(pid, "startup")

    exit_info = None
    try:
        server.start(
            on_spawn=attach if coll else None, before_reap=coll.before_reap if coll else None
        )
        if coll:
            coll.set_status_source(server.global_status, server.connection_status)
            coll.begin_phase("warmup", mark="server_start")
        scan_tables(server.connect, "sbtest", opts.tables)
        target = ClientTarget.mysql(server.client_target(), "sbtest")
        for pt in points:
            log = work / f"{tag}-{pt.workload}-{pt.threads}.log"
            if coll is None:
                qps, client_cpu = run_raw_level(
                    target, pt.workload, opts, pt.threads, duration, log
                )
                pt.raw.append(qps)
                pt.raw_client_us.append(client_cpu * 1e6 / (qps * duration))
                continue
            coll.begin_phase(f"{pt.workload}@{pt.threads}")

            def interval(_t, tps, qps, c=coll):
                c.set_throughput(tps, qps)
                c.mark_window()

            c0, s0, w0 = (
                _cpu(resource.RUSAGE_CHILDREN),
                _cpu(resource.RUSAGE_SELF),
                time.monotonic(),
            )
            res = sysbench.run_level(
                target, pt.workload, pt.threads, duration, opts, log, on_interval=interval
            )
            runner_cpu, wall = _cpu(resource.RUSAGE_SELF) - s0, time.monotonic() - w0
            client_cpu = _cpu(resource.RUSAGE_CHILDREN) - c0
            if res.status != "ok":
                raise RuntimeError(f"{pt.workload}@{pt.threads} failed: {res.error}")
            coll.check_sampling()
            pt.ours.append(res.qps)
            pt.runner_core.append(runner_cpu / wall)
            pt.ours_client_us.append(client_cpu * 1e6 / (res.qps * res.duration_s))
        if coll:
            coll.begin_phase("shutdown", mark="server_stop")
        exit_info = server.stop()
    finally:
        exit_info = exit_info or server.stop()
        if coll:
            coll.stop(exit_info.rusage if exit_info else None)
