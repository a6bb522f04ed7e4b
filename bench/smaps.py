"""What taking RSS apart costs (collectors/smaps.py): one read of the whole /proc/PID/smaps (and
the threads' stack pointers) against smaps_rollup and the 1 Hz sample, at rest and while the
largest client count runs; and the server's throughput with and without the reads, paired
within one server life.

The collectors read smaps at phase (cycle) boundaries only, where no load runs. The paired arm
bounds what a read could cost a level: blocks of POINT_SELECT alternate A B B A ..., A with no
read, B with a decomposition every `every_s` seconds while the load runs (far more often than
any cycle ends), and each adjacent pair gives B/A; the geometric mean with its t-interval says
whether a difference is resolvable at this machine's block-to-block noise.
"""

from __future__ import annotations

import statistics
import threading
import time

from bench.paired import block_order, t_interval
from collectors.procfs import ProcFS
from collectors.sampler import ProcessReader
from collectors.smaps import decompose
from suites.families.mysql.driver import DRIVER as MYSQL_DRIVER
from suites.workloads import sysbench
from suites.workloads.sysbench.options import stock_tables
from suites.workloads.sysbench.warm import scan_tables

ARMS = ("none", "reads")


def _ms(fn, n: int) -> dict:
    """Wall and CPU milliseconds of `fn` per call (median and max over n calls)."""
    walls, cpus = [], []
    for _ in range(n):
        c0, w0 = time.thread_time(), time.perf_counter()
        fn()
        walls.append((time.perf_counter() - w0) * 1000)
        cpus.append((time.thread_time() - c0) * 1000)
    return {
        "wall_ms": round(statistics.median(walls), 3),
        "wall_ms_max": round(max(walls), 3),
        "cpu_ms": round(statistics.median(cpus), 3),
    }


def read_costs(pid: int, n: int) -> dict:
    fs = ProcFS()
    reader = ProcessReader(fs, pid)
    dec = decompose(fs, pid)
    return {
        "threads": fs.status(pid).threads,
        "mappings": sum(p.mappings for p in dec.parts.values()),
        "rss_kb": dec.rss_kb,
        "decompose": _ms(lambda: decompose(fs, pid), n),
        "smaps_rollup": _ms(lambda: fs.smaps_rollup(pid), n),
        "sample": _ms(lambda: reader.read(ctx=False), n),
    }


class _Reads(threading.Thread):
    """A decomposition every `every_s` until stopped (the B arm's reads, or a loaded measure)."""

    def __init__(self, pid: int, every_s: float):
        super().__init__(name="bench-smaps-reads", daemon=True)
        self.pid, self.every_s = pid, every_s
        self.halt = threading.Event()
        self.walls: list[float] = []

    def run(self) -> None:
        fs = ProcFS()
        while not self.halt.wait(self.every_s):
            w0 = time.perf_counter()
            decompose(fs, self.pid)
            self.walls.append((time.perf_counter() - w0) * 1000)

    def stop(self) -> None:
        self.halt.set()
        self.join(30)


def run(bench, pairs: int, block_s: int, threads: int, every_s: float, progress=None) -> dict:
    server = bench.restored("smaps")
    target = MYSQL_DRIVER.target(server.client_target(), "sbtest")
    out: dict = {"threads": threads, "block_s": block_s, "every_s": every_s}
    try:
        server.start()
        scan_tables(
            server.connect, MYSQL_DRIVER, "sbtest", stock_tables(bench.opts.tables), stock=True
        )
        out["at_rest"] = read_costs(server.pid, 20)
        # while `threads` clients run: reads back to back in a thread of their own
        reads = _Reads(server.pid, 0.2)
        reads.start()
        try:
            sysbench.run_level(
                target, "point_select", threads, max(block_s, 4), bench.opts,
                bench.work / "smaps-loaded.log",
            )  # fmt: skip
        finally:
            reads.stop()
        out["under_load_wall_ms"] = (
            round(statistics.median(reads.walls), 3) if reads.walls else None
        )
        blocks: list[tuple[str, float]] = []
        order = block_order(pairs, ARMS)
        for i, arm in enumerate(order):
            if progress:
                progress(f"block {i + 1}/{len(order)}: {arm}")
            r = _Reads(server.pid, every_s) if arm == "reads" else None
            if r:
                r.start()
            try:
                res = sysbench.run_level(
                    target, "point_select", threads, block_s, bench.opts,
                    bench.work / f"smaps-{i}-{arm}.log",
                )  # fmt: skip
            finally:
                if r:
                    r.stop()
            if res.status != "ok":
                raise RuntimeError(f"smaps bench block {i} ({arm}) failed: {res.error}")
            blocks.append((arm, res.qps))
        # each cycle of the A B B A ... order is one adjacent pair: reads / none
        pairs_ = [dict(blocks[k : k + 2]) for k in range(0, len(blocks) - 1, 2)]
        out["qps"] = {a: [round(q) for x, q in blocks if x == a] for a in ARMS}
        out["reads_over_none"] = t_interval([p["reads"] / p["none"] for p in pairs_])
    finally:
        server.stop()
    return out
