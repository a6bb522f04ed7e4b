"""Item 12: which design sees an allocator's cost on a shared machine -- solo lives, alternating
blocks, or a duet -- each with the A/A pair (glibc against glibc) and the positive control (glibc
against glibc slowed by bench/slowmalloc.c), on the same level (OLTP_RO@8).

The designs, each repeated over several "lives" (a life: both arms' servers started, proven, used
and stopped; the arm that starts and goes first swaps from life to life):

  solo       one server at a time, as the quick suite runs cells today: A's server alone for
             `blocks` blocks, stopped, then B's alone; the life's ratio is B's mean rate over A's.
  alternate  both servers alive at once, loaded in turn in short blocks (A B B A A B ...), so
             the machine's drift is shared by the two sides of each pair; a pair's ratio is B/A.
  duet       both servers loaded at the same time (Bulej et al., ICPE 2020): whatever else runs
             on the machine hits both; a block's ratio is B/A.

Every server life is proven as a cell's is (suites.families.mysql.server: the malloc binding when it starts).
Per design and pair: the geometric mean of the ratios with its 95% t-interval over the lives'
ratios (one per life: pairs within a life are not independent of each other), the half-width, and
the machine time it took; "half-width x sqrt(minutes)" puts designs of different lengths on one
scale (an interval narrows with the square root of the time spent).

What this measures is the design, on this machine at this time: the load average is recorded
beside each figure; with other work on the machine the noise is what it is.
"""

from __future__ import annotations

import math
import os
import shutil
import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path

from bench.paired import block_order, t_interval
from bench.raw import run_raw_level
from rundir.write import make_owned_dir
from servers.allocators import Allocator, custom_allocator
from suites.families.mysql.driver import DRIVER as MYSQL_DRIVER
from suites.families.mysql.server import MySQLServer

DESIGNS = ("solo", "alternate", "duet")
WARM_CAP_S = 30
WORKLOAD, THREADS = "oltp_ro", 8


def control_allocator(library: Path, spins: int, name: str = "slow") -> Allocator:
    """The slowed glibc as an allocator arm (what a suite's [[allocators.custom]] makes)."""
    return custom_allocator(
        {"name": name, "library": str(library), "env": {"SLOWMALLOC_SPINS": str(spins)}}
    )


class _Servers:
    """Servers on fresh copies of the bench dataset, always stopped and removed on exit."""

    def __init__(self, bench):
        self.bench = bench
        self.live: list[tuple[MySQLServer, Path]] = []

    def start(self, tag: str, allocator: Allocator) -> MySQLServer:
        wd = make_owned_dir(self.bench._workdir(tag))
        self.bench.cache.restore(self.bench.key, wd / "datadir")
        server = MySQLServer(self.bench.binary, wd, self.bench.settings, allocator)
        self.live.append((server, wd))
        server.start()  # proves the allocator (the malloc binding) or raises
        # Warmed as the runner warms a cell: a cold server's rate climbs for its first ~20-30 s
        # of load (56k to 75k q/s at OLTP_RO@8), and a fixed cost per malloc call is a smaller
        # share while it does, so unwarmed lives saw the control cost 0.85 in solo lives (late
        # in the climb) and 0.92 in alternate and duet ones (early in it):
        # docs/measurements/2026-11-29-designs.md.
        self.bench.warm(server, cap_s=WARM_CAP_S, min_s=3)
        return server

    def stop_all(self) -> None:
        for server, wd in self.live:
            server.stop()
            shutil.rmtree(wd, ignore_errors=True)
        self.live.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop_all()


def one_life(
    bench, design: str, arms: dict[str, Allocator], swap: bool, blocks: int, block_s: int
) -> dict:
    """One life of a design: both arms' servers (started in the life's order), a lead-in block
    each, then the design's blocks; {ratio: B/A, pairs: per-pair ratios, wall_s}."""
    names = list(arms)
    a, b = (names[1], names[0]) if swap else (names[0], names[1])
    work = bench.work
    opts = bench.opts
    t0 = time.monotonic()
    rates: dict[str, list[float]] = {a: [], b: []}
    pairs: list[float] = []

    def blk(server, tag):
        target = MYSQL_DRIVER.target(server.client_target(), "sbtest")
        return run_raw_level(target, WORKLOAD, opts, THREADS, block_s, work / f"{tag}.log").qps

    with _Servers(bench) as srv:
        if design == "solo":
            for arm in (a, b):
                s = srv.start(f"solo-{arm}", arms[arm])
                blk(s, f"solo-lead-{arm}")
                rates[arm] = [blk(s, f"solo-{arm}-{i}") for i in range(blocks)]
                srv.stop_all()
        else:
            servers = {arm: srv.start(f"{design}-{arm}", arms[arm]) for arm in (a, b)}
            for arm in (a, b):
                blk(servers[arm], f"{design}-lead-{arm}")
            if design == "alternate":
                order = block_order(blocks // 2 or 1, (a, b))
                for i, arm in enumerate(order):
                    rates[arm].append(blk(servers[arm], f"alt-{i}-{arm}"))
                for x, y in zip(rates[a], rates[b], strict=False):
                    pairs.append(y / x if x > 0 else math.nan)
            else:  # duet: both at once
                for i in range(blocks):
                    got: dict[str, float] = {}

                    def load(arm, i=i, got=got):
                        got[arm] = blk(servers[arm], f"duet-{i}-{arm}")

                    threads = [threading.Thread(target=load, args=(arm,)) for arm in (a, b)]
                    for t in threads:
                        t.start()
                    for t in threads:
                        t.join()
                    if a in got and b in got:
                        rates[a].append(got[a])
                        rates[b].append(got[b])
                        pairs.append(got[b] / got[a] if got[a] > 0 else math.nan)
    # B/A with B the second-named arm whatever the life's order
    first, second = names
    ra = statistics.fmean(rates[first]) if rates[first] else math.nan
    rb = statistics.fmean(rates[second]) if rates[second] else math.nan
    if pairs and swap:  # pairs were taken as (life's a, life's b): put them as second/first
        pairs = [1 / p for p in pairs]
    return {
        "ratio": rb / ra if ra > 0 else math.nan,
        "pairs": [round(p, 4) for p in pairs],
        "swap": swap,
        "wall_s": round(time.monotonic() - t0, 1),
        "rates": {k: [round(x, 1) for x in v] for k, v in rates.items()},
    }


def measure(
    bench, design: str, arms: dict[str, Allocator], lives: int, blocks: int, block_s: int,
    progress: Callable[[str], None] = lambda _s: None,
) -> dict:  # fmt: skip
    out = []
    load = [round(os.getloadavg()[0], 1)]
    for life in range(lives):
        progress(f"{design}, {'/'.join(arms)}: life {life + 1}/{lives}")
        out.append(one_life(bench, design, arms, life % 2 == 1, blocks, block_s))
    load.append(round(os.getloadavg()[0], 1))
    ratios = [x["ratio"] for x in out if x["ratio"] > 0]
    iv = t_interval(ratios)
    minutes = sum(x["wall_s"] for x in out) / 60
    half = iv.get("half_width")
    return {
        "design": design,
        "arms": list(arms),
        "lives": out,
        "interval": iv,
        "half_width_pct": None if half is None else round(half * 100, 2),
        "machine_min": round(minutes, 2),
        "half_width_x_sqrt_min": None if half is None else round(half * 100 * minutes**0.5, 2),
        "load": load,
    }


def run(
    bench, library: Path, spins: int, lives: int, blocks: int, block_s: int,
    progress: Callable[[str], None] = lambda _s: None, which: tuple[str, ...] = DESIGNS,
) -> dict:  # fmt: skip
    glibc = bench.glibc
    pairs = {
        "aa": {"glibc": glibc, "glibc-aa": glibc},
        "control": {"glibc": glibc, "slow": control_allocator(library, spins)},
    }
    figures: dict = {"spins": spins, "workload": WORKLOAD, "threads": THREADS, "block_s": block_s}
    for design in which:
        for key, arms in pairs.items():
            figures[f"{design}/{key}"] = measure(
                bench, design, arms, lives, blocks, block_s, progress
            )
    return figures
