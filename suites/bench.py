"""`make bench`: the tool's own performance targets, each measured side by side in one run.

Timings on a shared machine drift, so every figure here is a ratio of two things measured back to
back (or interleaved) in this process, never an absolute time compared with a constant:

1. dataset restore vs sysbench prepare of the same dataset        goal: restore >= 20x faster
2. server start to warm buffer pool vs the fixed 600 s warmup      (how much the protocol saves)
3. sampler CPU per second, as a fraction of one core, while the server holds 1536 connections
                                                                   goal: <= 1% of a core
4. POINT_SELECT QPS with collectors on vs off, interleaved repeats, with the run-to-run noise
                                                                   goal: no change beyond the noise
5. iibench: multi-process client insert rate vs a one-process (GIL-bound) baseline; client CPU as a
   fraction of server CPU                                          (the client must not be the limit)

Usage: python -m suites.bench [--quick] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from analysis.rundir_format import SAMPLE_COLUMNS
from collectors.sampler import measure_sample_cost
from collectors.session import Collectors
from servers.allocators import resolve
from servers.mysql import MySQLServer, MySQLSettings, find_mysql
from suites import sysbench
from suites.dataset import DatasetCache, restore_vs_prepare
from suites.rundir import make_owned_dir
from suites.sysbench import SysbenchOptions
from suites.warmup import warm_up, warm_vs_fixed
from suites.workload import ClientTarget

console = Console(stderr=True)


def _target(server: MySQLServer, database: str) -> ClientTarget:
    return ClientTarget.mysql(server.client_target(), database)


class Bench:
    def __init__(self, work: Path, quick: bool):
        self.work = work
        self.quick = quick
        self.binary = find_mysql()
        self.glibc = resolve(["glibc"])[0]
        self.cache = DatasetCache(work / "cache")
        # Restore-vs-prepare depends on size (prepare is CPU-bound, a copy is I/O-bound): 4 x 250k rows
        # (~240 MB) is the smallest size where the ratio says something about real datasets.
        self.opts = SysbenchOptions(tables=4, table_size=25_000 if quick else 250_000)
        self.settings = MySQLSettings(
            buffer_pool_mb=256,
            max_threads=1536,
            prepared_statements=sysbench.prepared_statements_needed(
                "point_select", 1536, self.opts.tables
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

    def server(self, tag: str, collectors: Collectors | None = None) -> MySQLServer:
        wd = make_owned_dir(self._workdir(tag))
        self.cache.restore(self.key, wd / "datadir")
        server = MySQLServer(self.binary, wd, self.settings, self.glibc)

        def attach(pid: int) -> None:
            collectors.on_spawn(pid)
            collectors.start(pid, "startup")

        server.start(on_spawn=attach if collectors else None)
        return server

    # -- 1 ---------------------------------------------------------------------------------------
    def restore_vs_prepare(self) -> dict:
        scratch = self.work / "scratch"
        scratch.mkdir(exist_ok=True)
        return restore_vs_prepare(self.cache, self.key, scratch, repeats=3)

    # -- 2 ---------------------------------------------------------------------------------------
    def start_to_warm(self) -> dict:
        t0 = time.monotonic()
        server = self.server("warm")
        try:
            w = warm_up(
                server.connect,
                _target(server, "sbtest"),
                self.opts.tables,
                self.opts,
                cap_s=120,
                min_s=2,
                log_dir=self.work,
                status_fn=server.global_status,
            )
            elapsed = time.monotonic() - t0
        finally:
            server.stop()
        return warm_vs_fixed(elapsed) | {"warm": w["warm"], "bp_reads_during": w["bp_reads_during"]}

    # -- 3 ---------------------------------------------------------------------------------------
    def sampler_cost_at_1536(self) -> dict:
        server = self.server("sampler")
        got: dict = {}
        try:
            target = _target(server, "sbtest")
            duration = 20

            def measure() -> None:
                # Measure once all 1536 clients are connected (Threads_connected says so).
                deadline = time.monotonic() + duration
                while time.monotonic() < deadline:
                    if server.global_status().get("Threads_connected", 0) >= 1536:
                        break
                    time.sleep(0.5)
                got["connected"] = server.global_status().get("Threads_connected", 0)
                got["perf"] = measure_sample_cost(server.pid, samples=30, ctx="perf")
                got["procfs"] = measure_sample_cost(server.pid, samples=5, ctx="procfs")
                got["smaps"] = measure_sample_cost(server.pid, samples=5, ctx=None, with_smaps=True)

            t = threading.Thread(target=measure, daemon=True)
            t.start()
            res = sysbench.run_level(
                target, "point_select", 1536, duration, self.opts, self.work / "sampler-1536.log"
            )
            t.join(30)
            got["level_status"] = res.status
        finally:
            server.stop()
        return got

    # -- 4 ---------------------------------------------------------------------------------------
    def collectors_on_off(self, pairs: int, threads: int = 64, duration: int = 8) -> dict:
        qps: dict[str, list[float]] = {"on": [], "off": []}
        for r in range(pairs):
            for mode in ("on", "off") if r % 2 == 0 else ("off", "on"):
                coll = None
                if mode == "on":
                    coll = Collectors(self.work / f"samples-{r}.csv", list(SAMPLE_COLUMNS))
                server = self.server(f"collect-{mode}", coll)
                try:
                    if coll:
                        coll.set_status_source(server.global_status)
                        coll.begin_phase("level")
                    res = sysbench.run_level(
                        _target(server, "sbtest"),
                        "point_select",
                        threads,
                        duration,
                        self.opts,
                        self.work / f"onoff-{mode}-{r}.log",
                        on_interval=(lambda _t, a, b, c=coll: c.set_throughput(a, b))
                        if coll
                        else None,
                    )
                    if res.status != "ok":
                        raise RuntimeError(f"collectors {mode} level failed: {res.error}")
                    qps[mode].append(res.qps)
                finally:
                    exit_info = server.stop()
                    if coll:
                        coll.stop(exit_info.rusage if exit_info else None)
        on, off = statistics.median(qps["on"]), statistics.median(qps["off"])

        def spread(xs: list[float]) -> float:
            return (max(xs) - min(xs)) / statistics.median(xs) if len(xs) > 1 else 0.0

        return {
            "threads": threads,
            "duration_s": duration,
            "pairs": pairs,
            "on_runs": qps["on"],
            "off_runs": qps["off"],
            "ratio": on / off,
            "noise": max(spread(qps["on"]), spread(qps["off"])),
        }

    # -- 5 ---------------------------------------------------------------------------------------
    def iibench(self) -> dict:
        from suites.iibench.bench import client_cpu_fraction, process_vs_thread_rate
        from suites.iibench.spec import IIBenchSpec

        spec = IIBenchSpec(
            clients=10,
            max_rows=20_000 if self.quick else 60_000,
            batch_rows=200,
            secondary_indexes=3,
        )
        server = self.server("iibench")
        try:
            target = _target(server, "iibench")
            scale = process_vs_thread_rate(target, spec, self.work, repeats=2)
            cpu = client_cpu_fraction(target, spec, server.pid, self.work / "iibench-cpu.log")
        finally:
            server.stop()
        return {"scale": scale, "cpu": cpu}


def _met(ok: bool) -> str:
    return "[green]yes[/green]" if ok else "[red]NOT met[/red]"


def _fmt(x, spec=".1f") -> str:
    return "n/a" if x is None else format(x, spec)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m suites.bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--quick", action="store_true", help="smaller dataset and fewer repeats")
    p.add_argument("--out", type=Path, default=Path("runs"), help="where bench-<time>.json goes")
    args = p.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="ms-bench-", dir="/tmp"))
    (work / ".mallocsweep-owned").write_text("bench scratch\n")
    bench = Bench(work, args.quick)
    figures: dict = {"machine": {}}
    try:
        from collectors.host import host_metadata

        figures["machine"] = host_metadata()
        steps = [
            ("dataset", "preparing the dataset with sysbench", bench.prepare_dataset),
            ("restore", "restore vs prepare", bench.restore_vs_prepare),
            ("warm", "start to warm", bench.start_to_warm),
            ("sampler", "sampler cost at 1536 connections", bench.sampler_cost_at_1536),
            (
                "onoff",
                "collectors on vs off",
                lambda: bench.collectors_on_off(3 if args.quick else 5),
            ),
            ("iibench", "iibench client scaling and cost", bench.iibench),
        ]
        for key, label, fn in steps:
            console.print(f"[dim]bench: {label} ...[/dim]")
            t0 = time.monotonic()
            figures[key] = fn()
            console.print(f"[dim]  done in {time.monotonic() - t0:.0f}s[/dim]")
    finally:
        shutil.rmtree(work, ignore_errors=True)

    m = figures["machine"]
    t = Table(
        title=f"mallocsweep bench — {m.get('cpu_model', '?')}, {m.get('cpu_count', '?')} cores, "
        f"kernel {m.get('kernel', '?')}"
    )
    for col in ("figure", "measured (side by side, this run)", "ratio", "goal", "met"):
        t.add_column(col)
    r = figures["restore"]
    t.add_row(
        "dataset restore vs sysbench prepare",
        f"prepare {_fmt(r['prepare_s'], '.2f')} s, restore {_fmt(r['restore_s'], '.3f')} s ({r['method']}, "
        f"{r['bytes'] / 1e6:.0f} MB)",
        f"{_fmt(r['ratio'])}x faster",
        ">= 20x",
        _met(r["ratio"] is not None and r["ratio"] >= 20),
    )
    w = figures["warm"]
    t.add_row(
        "start to warm vs fixed 600 s warmup",
        f"{_fmt(w.get('start_to_warm_s'), '.1f')} s to warm "
        f"(warm={w['warm']}, {w['bp_reads_during']:.0f} reads from disk)",
        f"{_fmt(w.get('ratio'))}x shorter",
        "(saving)",
        "",
    )
    s = figures["sampler"]
    perf, procfs = s["perf"], s["procfs"]
    t.add_row(
        "sampler CPU at 1536 connections (1 Hz)",
        f"{perf['cpu_ms_per_sample']:.3f} ms/sample with {perf.get('threads', '?')} server threads; "
        f"procfs fallback {procfs['cpu_ms_per_sample']:.1f} ms; smaps_rollup "
        f"{s['smaps']['cpu_ms_per_sample']:.2f} ms",
        f"{perf['core_fraction_at_1hz'] * 100:.3f}% of a core",
        "<= 1% of a core",
        _met(perf["core_fraction_at_1hz"] <= 0.01),
    )
    o = figures["onoff"]
    t.add_row(
        f"POINT_SELECT@{o['threads']} QPS, collectors on / off",
        f"on {[round(x) for x in o['on_runs']]}, off {[round(x) for x in o['off_runs']]}",
        f"{o['ratio']:.3f} (noise {o['noise'] * 100:.1f}%)",
        "|1 - ratio| within noise",
        _met(abs(1 - o["ratio"]) <= o["noise"]),
    )
    ii = figures["iibench"]
    t.add_row(
        "iibench processes vs one process (rows/s)",
        f"{ii['scale']['processes_rows_per_s']:.0f} vs {ii['scale']['threads_rows_per_s']:.0f}",
        f"{_fmt(ii['scale']['ratio'], '.2f')}x",
        "~1 or more: the server sets the pace",
        "",
    )
    t.add_row(
        "iibench client CPU / server CPU",
        f"{ii['cpu']['client_cpu_s']:.2f} s vs {ii['cpu']['server_cpu_s']:.2f} s",
        f"{_fmt(ii['cpu']['fraction'], '.2f')}",
        "(cost of the client)",
        "",
    )
    (Console() if sys.stdout.isatty() else Console(width=200)).print(t)
    args.out.mkdir(parents=True, exist_ok=True)
    out = args.out / f"bench-{time.strftime('%Y%m%dT%H%M%S')}.json"
    out.write_text(json.dumps(figures, indent=2, default=str) + "\n")
    print(f"figures: {out}")
    return 0  # the bench reports figures; the "met" column says which goals this machine met


if __name__ == "__main__":
    sys.exit(main())
