"""`make bench` item: what counting the allocator's calls costs, and the per-call cost table of the
installed allocators (issue 33, build item 1).

1. The per-call cost of each installed core allocator (servers/callcost.py: small and large
   blocks, 1 thread and one per CPU) and the largest difference between two: the exposure bound
   every run records.
2. The counter's own cost per call, by the same microbenchmark under glibc with the counter
   preloaded (counting) and without it.
3. Its cost in a server, in alternated server lives: the counter's preload switches the whole
   process, so it cannot be paired inside one life. Lives run in the order on off off on on off ...
   (each adjacent pair one ratio; the order cancels a linear drift and going first); in each,
   a discarded lead-in block warms the pool and the level's threads, then one measured block of
   OLTP_RO@8 by plain sysbench. Both arms preload the alloc_stats reader, so only the counter
   differs. The ratio on/off is the geometric mean of the pairs with its t-interval: the goal
   is >= 0.99 (at most 1% of QPS). Life-to-life noise here is ~10%, so a few pairs cannot
   resolve 1%: the figure says so ("not resolvable") rather than claim it. The expected cost
   is also derived from what was measured: the counter's ns per call times the calls and frees
   per query the "on" lives counted, over the server's CPU per query in those lives.
"""

from __future__ import annotations

import os
from pathlib import Path

from bench.bench import Bench, _target
from bench.paired import t_interval, verdict
from bench.raw import run_raw_level
from rundir.write import make_owned_dir
from servers import alloccount, callcost
from servers.allocators import detect_all
from servers.allocstats import AllocStats
from suites.families.mysql.server import MySQLServer

GOAL = 0.99  # counted / not counted QPS
WORKLOAD, THREADS = "oltp_ro", 8


def counter_ns_per_call(size_class: str = "small") -> dict:
    """ns per call under glibc without and with the counter preloaded (1 thread)."""
    glibc = next(a for a in detect_all() if a.name == "glibc")
    base = callcost.measure(glibc, 1, size_class)
    lib = str(alloccount.alloc_count_library())
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    with_counter = callcost.measure_env(
        env | {"LD_PRELOAD": lib, alloccount.ENV: "1"}, 1, size_class, "glibc + counter"
    )
    return {
        "glibc_ns": round(base, 3),
        "with_counter_ns": round(with_counter, 3),
        "counter_ns": round(with_counter - base, 3),
    }


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _life(bench: Bench, arm: str, n: int, block_s: int) -> dict:
    wd = make_owned_dir(bench._workdir(f"expo-{arm}-{n}"))
    bench.cache.restore(bench.key, wd / "datadir")
    stats = AllocStats(wd)
    late, env = stats.prepare()
    first: tuple[str, ...] = ()
    if arm == "on":
        counter, cenv = alloccount.prepare(wd)
        first, env = (counter,), env | cenv
    server = MySQLServer(
        bench.binary, wd, bench.settings, bench.glibc,
        first_preload=first, late_preload=(late,), extra_env=env,
    )  # fmt: skip
    try:
        server.start()
        target = _target(server, "sbtest")
        run_raw_level(target, WORKLOAD, bench.opts, THREADS, block_s, wd / "lead-in.log")
        before, cpu0 = stats.read(), _cpu_s(server.pid)
        block = run_raw_level(target, WORKLOAD, bench.opts, THREADS, block_s, wd / "block.log")
        after, cpu1 = stats.read(), _cpu_s(server.pid)
    finally:
        server.stop()
        stats.close()
    out = {"qps": block.qps, "queries": block.queries, "cpu_us_per_query": None}
    if block.queries:
        out["cpu_us_per_query"] = round((cpu1 - cpu0) * 1e6 / block.queries, 3)
    a, b = alloccount.totals(before), alloccount.totals(after)
    if a and b and block.queries:
        calls = (b["alloc_calls"] - a["alloc_calls"]) + (b["free_calls"] - a["free_calls"])
        out["calls_and_frees_per_query"] = round(calls / block.queries, 3)
    return out


def run(bench: Bench, pairs: int, block_s: int, progress) -> dict:
    """The three figures above; `pairs` pairs of lives."""
    figures: dict = {"goal": GOAL, "load_avg_start": [round(x, 2) for x in os.getloadavg()]}
    progress("per-call cost of the installed allocators")
    figures["call_cost"] = callcost.installed_table([a for a in detect_all() if a.core])
    progress("the counter's own cost per call (glibc, 1 thread)")
    figures["counter_per_call"] = {c: counter_ns_per_call(c) for c in callcost.CLASSES}
    order = [("on", "off") if i % 2 == 0 else ("off", "on") for i in range(pairs)]
    lives: list[dict] = []
    ratios = []
    for i, arms in enumerate(order):
        got = {}
        for arm in arms:
            progress(f"pair {i + 1}/{pairs}: {WORKLOAD}@{THREADS}, counter {arm}")
            got[arm] = _life(bench, arm, i, block_s)
            lives.append({"pair": i, "arm": arm} | got[arm])
        if got["on"]["qps"] and got["off"]["qps"]:
            ratios.append(got["on"]["qps"] / got["off"]["qps"])
    iv = t_interval(ratios)
    figures["lives"] = lives
    figures["paired"] = iv | {"pairs": len(ratios), "verdict": verdict(iv, GOAL)}
    on = [x for x in lives if x["arm"] == "on" and x.get("calls_and_frees_per_query")]
    if on:
        calls = sorted(x["calls_and_frees_per_query"] for x in on)[len(on) // 2]
        cpu = sorted(x["cpu_us_per_query"] for x in on if x["cpu_us_per_query"])[len(on) // 2]
        ns = max(figures["counter_per_call"]["small"]["counter_ns"], 0.0)
        figures["derived"] = {
            "calls_and_frees_per_query": calls,
            "cpu_us_per_query": cpu,
            "counter_ns_per_call": ns,
            "cost_fraction": round(calls * ns / (cpu * 1000.0), 6) if cpu else None,
        }
    figures["load_avg_end"] = [round(x, 2) for x in os.getloadavg()]
    return figures
