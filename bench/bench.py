"""`make bench` items 1-7: dataset restore, start to warm, the collectors' cost (on/off, taskstats
vs perf), iibench client scaling and cost, and the simulated verdict rounds. The shared dataset and
server recipe (Bench) are also used by the paired sweep-vs-raw arm and the iibench.py arm."""

from __future__ import annotations

import shutil
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

from analysis.verdicts import SETTLED_WEIGHT
from collectors.collector_session import CollectorSession
from rundir.format import SAMPLE_COLUMNS
from rundir.write import make_owned_dir
from servers.allocators import resolve
from suites.datasets.cache import DatasetCache, restore_vs_prepare
from suites.families.mysql.driver import DRIVER as MYSQL_DRIVER
from suites.families.mysql.plugin import MYSQL
from suites.families.mysql.server import MySQLServer, MySQLSettings, find_mysql
from suites.runner.display import stderr_console
from suites.workloads import sysbench
from suites.workloads.level_result import ClientTarget
from suites.workloads.sysbench import SysbenchOptions
from suites.workloads.sysbench.options import as_script, stock_tables
from suites.workloads.sysbench.warm import scan_tables, sysbench_warm_up
from suites.workloads.warmup import status_counters, warm_vs_fixed

# The MySQL family's status counters by meaning (bench servers are MariaDB, on InnoDB).
COUNTERS = MYSQL.counters("innodb")

console = stderr_console()

HIGH = 1536  # the sweep's top level: where the collectors' cost and intrusion would show
LOW = 64
# The quick suite's throughput family, in units of one OLTP_RO point's weight: 2 OLTP_RO points
# and 2 POINT_SELECT points that the exposure settles (analysis/verdicts.py "One run, one 5%")
QUICK_POINTS = 2 + 2 * SETTLED_WEIGHT


def _target(server: MySQLServer, database: str) -> ClientTarget:
    return MYSQL_DRIVER.target(server.client_target(), database)


def spread(xs: list[float]) -> float:
    """Run-to-run noise of repeated runs: (max - min) / median; 0 for fewer than two runs."""
    return (max(xs) - min(xs)) / statistics.median(xs) if len(xs) > 1 else 0.0


@dataclass
class OnOff:
    """QPS of repeated levels with collectors on and off, at one thread count."""

    threads: int
    on: list[float] = field(default_factory=list)
    off: list[float] = field(default_factory=list)
    cost: list[float] = field(default_factory=list)  # collectors CPU / wall, per "on" run
    connected: list[int] = field(default_factory=list)  # Threads_connected at the window mark

    def add(self, mode: str, qps: float) -> None:
        (self.on if mode == "on" else self.off).append(qps)

    def summary(self) -> dict:
        on, off = statistics.median(self.on), statistics.median(self.off)
        return {
            "threads": self.threads,
            "on_runs": self.on,
            "off_runs": self.off,
            "ratio": on / off if off else None,
            "noise": max(spread(self.on), spread(self.off)),
            "collectors_core_fraction_runs": self.cost,
            "collectors_core_fraction": statistics.median(self.cost) if self.cost else None,
            "connected_runs": self.connected,
        }


@dataclass
class SourceCost:
    """QPS at one thread count with the collectors on taskstats vs on perf counters (which follow
    every server thread: every context switch pays for them), and the sources really used."""

    threads: int
    taskstats: list[float] = field(default_factory=list)
    perf: list[float] = field(default_factory=list)
    sources: dict[str, list[str | None]] = field(default_factory=dict)

    def summary(self) -> dict:
        ts = statistics.median(self.taskstats) if self.taskstats else None
        pf = statistics.median(self.perf) if self.perf else None
        planned = all(s == mode for mode, used in self.sources.items() for s in used) and set(
            self.sources
        ) == {"taskstats", "perf"}
        return {
            "threads": self.threads,
            "taskstats_runs": self.taskstats,
            "perf_runs": self.perf,
            "ratio": ts / pf if ts and pf else None,  # > 1: perf costs throughput
            "noise": max(spread(self.taskstats), spread(self.perf)) if ts and pf else None,
            "sources_used": self.sources,
            "as_planned": planned,
        }


class Bench:
    def __init__(self, work: Path, quick: bool):
        self.work = work
        self.quick = quick
        self.binary = find_mysql()
        self.glibc = resolve(["glibc"])[0]
        self.cache = DatasetCache(work / "cache")
        # Restore-vs-prepare depends on size (prepare is CPU-bound, a copy is I/O-bound): 4 x 250k
        # rows (~240 MB) is the smallest size where the ratio says something about real datasets.
        self.opts = SysbenchOptions(tables=4, table_size=25_000 if quick else 250_000)
        self.settings = MySQLSettings(
            buffer_pool_mb=256,
            max_threads=HIGH,
            prepared_statements=sysbench.prepared_statements_needed(
                "point_select", HIGH, self.opts.tables
            ),
        )
        self.key = ""
        self._n = 0

    def _workdir(self, tag: str) -> Path:
        self._n += 1
        return self.work / f"{self._n:02d}-{tag}"

    def prepare_dataset(self) -> None:
        wd = make_owned_dir(self._workdir("prepare"))
        server = MySQLServer(
            self.binary, wd, MySQLSettings(buffer_pool_mb=256, max_threads=64), self.glibc
        )
        try:
            server.initialize()
            server.start()
            conn = server.connect()
            conn.cursor().execute("CREATE DATABASE sbtest")
            conn.cursor().execute("CREATE DATABASE iibench")
            conn.close()
            prepare_s = sysbench.prepare(_target(server, "sbtest"), self.opts, wd / "prepare.log")
            server.stop()
            spec = {
                "kind": "sysbench",
                "tables": self.opts.tables,
                "table_size": self.opts.table_size,
            }
            self.key = self.cache.key(self.binary.version, spec)
            self.cache.store(
                self.key, server.datadir, {"prepare_s": round(prepare_s, 3), "spec": spec}
            )
        finally:
            server.stop()
            shutil.rmtree(wd, ignore_errors=True)

    def restored(self, tag: str) -> MySQLServer:
        """A server on a fresh copy of the dataset, not started yet."""
        wd = make_owned_dir(self._workdir(tag))
        self.cache.restore(self.key, wd / "datadir")
        return MySQLServer(self.binary, wd, self.settings, self.glibc)

    # -- 1 ---------------------------------------------------------------------------------------
    def restore_vs_prepare(self) -> dict:
        scratch = self.work / "scratch"
        scratch.mkdir(exist_ok=True)
        return restore_vs_prepare(self.cache, self.key, scratch, repeats=3)

    # -- 2 ---------------------------------------------------------------------------------------
    def start_to_warm(self) -> dict:
        server = self.restored("warm")
        try:
            t0 = time.monotonic()  # the clock starts at server start; the restore is item 1
            server.start()
            w = self.warm(server, cap_s=120, min_s=2)
            elapsed = time.monotonic() - t0
        finally:
            server.stop()
        return warm_vs_fixed(elapsed) | {
            "warm": w["warm"],
            "stopped_by": w["stopped_by"],
            "bp_reads_during": w["bp_reads_during"],
        }

    def warm(self, server: MySQLServer, cap_s: float, min_s: float) -> dict:
        """The runner's warm-up on a started bench server (scans, then OLTP_RO until the buffer
        pool's reads stop rising and its pages level off, at most `cap_s`)."""
        names = (COUNTERS["cache_misses"], COUNTERS["cache_fill"])
        return sysbench_warm_up(
            server.connect,
            _target(server, "sbtest"),
            self.opts,
            status_counters(server.global_status, names),
            names,
            load=as_script("oltp_ro"),
            stock=stock_tables(self.opts.tables),
            own=[],
            cap_s=cap_s,
            min_s=min_s,
            log_dir=self.work,
        )

    # -- 3 and 4 ---------------------------------------------------------------------------------
    def one_life(
        self,
        mode: str,
        r: int,
        levels: dict[int, OnOff],
        duration: int,
        source: SourceCost | None = None,
    ) -> None:
        """One server life with collectors `mode`: scan, then each level once.

        "on" drives the real CollectorSession exactly as a cell does (default source: taskstats):
        attached before exec, phase boundaries, a window mark at every interval report, sampler
        liveness checked per level, the final reading before the reap. "perf" is the same with
        taskstats not used (the perf fallback). "off": no collectors. `source`, when given,
        records the QPS at its thread count and the context-switch source really used.
        """
        server = self.restored(f"{mode}-{r}")
        coll = None
        if mode != "off":
            coll = CollectorSession(
                self.work / f"samples-{mode}-{r}.csv",
                list(SAMPLE_COLUMNS),
                use_taskstats=mode != "perf",
            )

        def attach(pid: int) -> None:
            coll.on_spawn(pid)
            coll.start(pid, "startup")

        exit_info = None
        try:
            server.start(
                on_spawn=attach if coll else None,
                before_reap=coll.before_reap if coll else None,
            )
            if coll:
                coll.set_status_source(server.global_status, server.connection_status, COUNTERS)
                coll.begin_phase("warmup", mark="server_start")
            # The same cold start in every life: the scans load the pool before any level.
            scan_tables(
                server.connect, MYSQL_DRIVER, "sbtest", stock_tables(self.opts.tables), stock=True
            )
            for threads, rec in levels.items():
                phase = f"point_select@{threads}"
                cpu0 = w0 = 0.0
                if coll:
                    cpu0, w0 = coll.sampler_cpu_s + coll.boundary_cpu_s, time.monotonic()
                    coll.begin_phase(phase)

                def interval(_t, tps, qps, c=coll):
                    if c:
                        c.set_throughput(tps, qps)
                        c.mark_window()

                res = sysbench.run_level(
                    _target(server, "sbtest"),
                    "point_select",
                    threads,
                    duration,
                    self.opts,
                    self.work / f"onoff-{mode}-{r}-{threads}.log",
                    on_interval=interval,
                )
                if res.status != "ok":
                    raise RuntimeError(f"collectors {mode}, {phase} failed: {res.error}")
                rec.add(mode, res.qps)
                if source is not None and mode != "off" and threads == source.threads:
                    (source.perf if mode == "perf" else source.taskstats).append(res.qps)
                if coll:
                    coll.check_sampling()
                    cpu = coll.sampler_cpu_s + coll.boundary_cpu_s - cpu0
                    rec.cost.append(cpu / (time.monotonic() - w0))
            if coll:
                coll.begin_phase("shutdown", mark="server_stop")
            exit_info = server.stop()
        finally:
            exit_info = exit_info or server.stop()
            if coll:
                coll.stop(exit_info.rusage if exit_info else None)
        if coll:
            for threads, rec in levels.items():
                connected = coll.phase_figures(f"point_select@{threads}")["threads_connected"]
                rec.connected.append(int(connected or 0))
            if source is not None:
                planned = "perf" if mode == "perf" else "taskstats"
                source.sources.setdefault(planned, []).append(coll.ctxsw_source)

    def collectors_on_off(self, rounds: int, duration: int = 8) -> dict:
        """Items 3, 4 and 4b in one rotation of lives: collectors on (taskstats), off, and on
        perf counters (LOW only: that level runs first in every life, so its conditions match);
        the order rotates each round so that no mode always runs first."""
        levels = {LOW: OnOff(LOW), HIGH: OnOff(HIGH)}
        source = SourceCost(LOW)
        modes = ["on", "off", "perf"]
        for r in range(rounds):
            for mode in modes[r % 3 :] + modes[: r % 3]:
                console.print(f"[dim]  round {r + 1}/{rounds}: collectors {mode}[/dim]")
                if mode == "perf":
                    self.one_life(mode, r, {LOW: OnOff(LOW)}, duration, source)
                else:
                    self.one_life(mode, r, levels, duration, source)
        out = {str(t): rec.summary() | {"duration_s": duration} for t, rec in levels.items()}
        out["source"] = source.summary() | {"duration_s": duration}
        return out

    # -- 5 and 6 ---------------------------------------------------------------------------------
    def iibench(self) -> dict:
        from suites.workloads.iibench.bench import client_cpu_fraction, process_vs_thread_rate
        from suites.workloads.iibench.spec import IIBenchSpec

        spec = IIBenchSpec(
            clients=10,
            max_rows=20_000 if self.quick else 60_000,
            batch_rows=200,
            secondary_indexes=3,
        )
        server = self.restored("iibench")
        try:
            server.start()
            target = _target(server, "iibench")
            scale = process_vs_thread_rate(target, spec, self.work, repeats=2)
            cpu = client_cpu_fraction(target, spec, server.pid, self.work / "iibench-cpu.log")
        finally:
            server.stop()
        scale["noise"] = max(spread(scale["processes_runs"]), spread(scale["threads_runs"]))
        return {"scale": scale, "cpu": cpu}


def verdicts_figure(runs_dir: Path | None = None) -> dict:
    """Item 7: a simulation of the budgeted design against fixed 3 rounds, at the noise of the
    newest real run under `runs_dir` (the noise its verdicts saw, with its number of allocators)
    when there is one, else at the recorded noise of the fixtures' repeated server lives; the
    figure says which."""
    import csv

    from analysis.simulate import budget_vs_fixed, life_sd
    from suites.runner.plan import allocator_order

    measured = _newest_run_noise(runs_dir) if runs_dir is not None else None
    if measured is not None:
        path, noise = measured
        fig = budget_vs_fixed(
            noise.sigma,
            others=max(noise.arms - 1, 0),
            order=allocator_order,
            points=max(noise.points, 1),
        )
        return fig | {
            "noise_source": f"measured by the run {path} ({noise.points} points, "
            f"{noise.rounds} rounds, {noise.arms + 1} allocators)"
        }
    runs = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "runs"
    qps = [
        float(r["qps"])
        for d in ("real-regress-base-a", "real-regress-base-b")
        for r in csv.DictReader((runs / d / "results.csv").open())
    ]
    fig = budget_vs_fixed(life_sd(qps), others=5, order=allocator_order, points=QUICK_POINTS)
    return fig | {
        "noise_source": "recorded in tests/fixtures/runs/real-regress-base-a/b (no run with "
        f"two or more rounds under {runs_dir}); seven allocators and the quick suite's 4 points "
        f"(2 weighing a tenth: a family of {QUICK_POINTS:g})"
    }


def _newest_run_noise(runs_dir: Path):
    """(run dir, analysis.verdicts.PairedNoise) of the newest run directory under `runs_dir`
    whose verdicts had a baseline and another allocator over two or more rounds, or None."""
    from analysis.verdicts import paired_noise
    from rundir.read import load_run

    candidates = sorted(
        (p.parent for p in runs_dir.glob("*/manifest.json")),
        key=lambda p: p.stat().st_mtime,
        reverse=True,
    )
    for path in candidates:
        try:
            noise = paired_noise(load_run(path))
        except Exception:  # noqa: BLE001 - a damaged or foreign directory is just not a source
            continue
        if noise is not None:
            return path, noise
    return None
