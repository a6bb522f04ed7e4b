"""`make bench` item 9: our iibench vs Callaghan's iibench.py (issue 19).

iibench.py runs from where it lives (never copied into the project), on one server,
levels alternating, the table recreated before each: the same rows, batch size, three
secondary indexes created before the load (iibench.py needs --secondary_at_start for that:
without it, it loads a table with no secondary index at all) and 10-byte data. Rates are
rows / wall time from launching the client(s) to their last exit, on both sides; client CPU
is the whole client processes' rusage (and, for ours, the runner's too) per inserted row.
"""

from __future__ import annotations

import resource
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.paired import t_interval, verdict
from suites.families.mysql.driver import DRIVER as MYSQL_DRIVER
from suites.workloads.level_result import ClientTarget

GOAL_IIBENCH = 1.0  # ours / iibench.py rows/s, at 1 and 10 clients
REPO = Path(__file__).resolve().parents[1]
# Where iibench.py is looked for when the user names no path: the shared reference folder beside
# the checkout (../shared/reference), or beside the worktrees' parent.
REFERENCE_CANDIDATES = (
    REPO.parent / "shared" / "reference" / "iibench.py",
    REPO.parent.parent / "shared" / "reference" / "iibench.py",
)


def _cpu(who: int) -> float:
    ru = resource.getrusage(who)
    return ru.ru_utime + ru.ru_stime


def paired(ours: list[float], ref: list[float]) -> dict:
    """Round-by-round ratios ours/ref (each round ran both sides back to back, alternating which
    went first), their geometric mean with a 95% t-interval, and the verdict against the goal:
    "met" only when the whole interval clears it, as in the sweep's paired arm."""
    ratios = [a / b for a, b in zip(ours, ref, strict=True) if b]
    iv = t_interval(ratios)
    return {
        "ratios": [round(r, 4) for r in ratios],
        **iv,
        "verdict": verdict(iv, GOAL_IIBENCH),
    }


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
            "met": {"met": True, "not met": False}.get(p["verdict"]),
            "ours_cpu_us_per_row": ours_cpu,
            "ref_cpu_us_per_row": ref_cpu,
            "cpu_met": ours_cpu is not None and ref_cpu is not None and ours_cpu < ref_cpu,
        }


def run_ours_iibench(target: ClientTarget, spec, log: Path) -> dict:
    from suites.workloads.iibench.run_level import run_level
    from suites.workloads.iibench.schema import count_rows, prepare

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


def iibench_vs_reference(bench, rounds: int, rows: int, rows_10: int, script: Path | None) -> dict:
    """Item 9: levels alternate ours / iibench.py on one server, the first side swapped each
    round."""
    from suites.workloads.iibench.spec import IIBenchSpec

    found = find_reference(script)
    why = None if found else f"iibench.py not found ({script or 'no path given'})"
    why = why or mysqldb_missing()
    if why:
        return {"skipped": why}
    batch = 1000
    points = [InsertPoint(1, rows), InsertPoint(10, rows_10)]
    server = bench.restored("iibench-ref")
    logs = bench.work / "iibench-ref"
    logs.mkdir()
    try:
        server.start()
        target = MYSQL_DRIVER.target(server.client_target(), "iibench")
        sock = server.client_target()["socket"]
        for r in range(rounds):
            for pt in points:
                spec = IIBenchSpec(
                    clients=pt.clients,
                    max_rows=pt.rows,
                    batch_rows=batch,
                    secondary_indexes=3,
                    data_length=10,
                )
                for side in ("ours", "ref") if r % 2 == 0 else ("ref", "ours"):
                    if side == "ours":
                        o = run_ours_iibench(target, spec, logs / f"ours-{pt.clients}-{r}.log")
                        pt.ours.append(o["rows"] / o["wall_s"])
                        pt.ours_cpu_us.append(o["cpu_s"] * 1e6 / o["rows"])
                        pt.ours_in_window.append(o["in_window"])
                        continue
                    f = run_reference(found, sock, "iibench", pt.clients, pt.rows, batch, logs)
                    seen = reference_rows(server.connect, "iibench")
                    if seen != f["rows"]:
                        raise RuntimeError(f"iibench.py left {seen} rows, {f['rows']} expected")
                    pt.ref.append(f["rows"] / f["wall_s"])
                    pt.ref_cpu_us.append(f["cpu_s"] * 1e6 / f["rows"])
    finally:
        server.stop()
    return {
        "reference": str(found),
        "batch_rows": batch,
        "rounds": rounds,
        "points": [p.summary() for p in points],
    }
