"""`make bench` item 8: the sweep vs raw sysbench, paired within one server life (issue 19).

Why paired: server lives on this machine differ by about +-11% from each other and drift within a
life, so ratios of levels run in different lives (the earlier design) spread by 14-64% and could
not resolve a 2% goal. Here ONE server life runs, for each workload x thread level, a lead-in
block (discarded: it creates the level's server threads and prepared statements for both arms)
and then short blocks in the order A B B A A B ... of two arms:

  ours  our level exactly as a cell runs it: a phase boundary first (snapshot, smaps, status),
        then sysbench through our Lua wrapper (report hooks every second, histogram dump at the
        end), the runner following the records and boosting the report thread, the collectors'
        1 Hz sampler, a window mark at every interval report and every 0.5 s, the mid-level
        Threads_connected read, and the sampler's liveness check after the level;
  raw   `sysbench <stock script> run` with the same options and nothing of ours: the sampler is
        paused (CollectorSession.pause: no reading, no wake-up), no marks, no status read, no wrapper.

Each adjacent pair (ours, raw) gives one ratio; drift slower than a pair cancels in it, and the
alternating order cancels a linear trend and any advantage of going first. The figure per level
is the geometric mean of the pair ratios with its 95% t-interval; the verdict against the goal
is "met" (the whole interval >= goal), "NOT met" (the whole interval below) or "not resolvable"
(the interval straddles the goal: its half-width is the noise this machine allowed).

Both arms settle the same way before each block (Threads_connected back to the status
connection alone) and read the server's Questions counter before and after it, outside sysbench's
run: the server's own count of client statements is set beside what sysbench counted, so a
difference in the work done (not only in its speed) would show.

What pairing cannot see, because it is the same on both sides by construction: how the server was
launched (exec helper, rlimits, THP prctl), the generated my.cnf, the collectors' attach before
exec (a taskstats socket, read only by the sampler and marks). Those are per-life costs; the
earlier life-alternating arm bounded them only to within the +-11% life-to-life noise.
"""

from __future__ import annotations

import math
import os
import resource
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.raw import run_raw_level
from collectors.errors import CollectorError
from collectors.procfs import CLK_TCK, ProcFS
from suites.families.mysql.driver import DRIVER as MYSQL_DRIVER
from suites.families.mysql.plugin import MYSQL
from suites.workloads import sysbench

GOAL = 0.98  # ours / raw QPS, at every level
ARMS = ("ours", "raw")
# The sources figure: each arm adds one of our sources to the one before it, so the ratio of
# neighbours in a cycle is what that one source costs (issue 19's table, and the POINT_SELECT@8
# puzzle: which of our differences could make a level faster or slower than raw sysbench).
SOURCE_ARMS = ("raw", "raw_interval", "wrapper", "ours")
SOURCE_STEPS = {
    "raw_interval": "sysbench's --report-interval=1 --percentile=95 (stock script, no wrapper)",
    "wrapper": "our Lua wrapper (report hooks, histogram dump), the runner following the records "
    "and the report thread's SCHED_FIFO boost",
    "ours": "the collectors: 1 Hz sampler, window marks (every report and 0.5 s), mid-level "
    "Threads_connected read, the phase boundary before the level",
}
RAW_INTERVAL_ARGS = ("--report-interval=1", "--percentile=95")
SETTLE_TIMEOUT_S = 30.0
# A block during which other work kept more than this many cores busy (Block.others_cpu_s / wall)
# is "disturbed". Measured here under other engineers' tests: undisturbed blocks 0.06-0.26 cores,
# bursts 0.46-1.2 cores that stretched a 3 s level by up to 3 s. The verdict stays on every pair;
# the ratio over the pairs with neither block disturbed is printed beside it.
OTHER_LOAD_MAX_CORES = 0.3


def _cpu_self() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def t_interval(ratios: list[float], level: float = 0.95) -> dict:
    """Geometric mean of `ratios` with its two-sided t-interval (on log ratios)."""
    from analysis.stats import mean_interval

    if not ratios or any(r <= 0 for r in ratios):
        return {"ratio": None, "lo": None, "hi": None, "half_width": None, "sd": None}
    logs = [math.log(r) for r in ratios]
    m = statistics.fmean(logs)
    if len(logs) < 2:
        return {"ratio": math.exp(m), "lo": None, "hi": None, "half_width": None, "sd": None}
    sd = statistics.stdev(logs)
    _, half = mean_interval(logs, level)
    return {
        "ratio": math.exp(m),
        "lo": math.exp(m - half),
        "hi": math.exp(m + half),
        "half_width": math.expm1(half),  # relative: +-x of the ratio
        "sd": sd,  # of one pair's log ratio: the block-to-block noise of this machine
    }


def verdict(iv: dict, goal: float = GOAL) -> str:
    """'met', 'not met' or 'not resolvable' (the interval straddles the goal, or is missing)."""
    if iv.get("lo") is None:
        return "not resolvable"
    if iv["lo"] >= goal:
        return "met"
    if iv["hi"] < goal:
        return "not met"
    return "not resolvable"


def block_order(cycles: int, arms: tuple[str, ...] = ARMS) -> list[str]:
    """A B B A A B B A ... (or A B C D D C B A ...): each cycle runs every arm once, in the
    opposite order of the cycle before, so a linear drift cancels over two cycles."""
    out: list[str] = []
    for k in range(cycles):
        out += list(arms) if k % 2 == 0 else list(reversed(arms))
    return out


@dataclass
class Block:
    arm: str
    qps: float
    sysbench_queries: float  # what sysbench counted
    server_questions: float | None  # what the server counted over the block (our 2 reads removed)
    sysbench_cpu_s: float
    wall_s: float
    runner_cpu_s: float | None = None  # our levels only: our process's CPU over the block
    sampler_reads: int | None = None  # readings the 1 Hz sampler took during the block
    server_cpu_s: float | None = None  # the server's CPU over the block (/proc stat, read outside)
    # CPU the machine spent over the same span on anything but the server, sysbench and us
    # (other users' processes, the kernel's own threads, hypervisor steal): the load that makes
    # a block slow for reasons neither arm controls.
    others_cpu_s: float | None = None

    @property
    def disturbed(self) -> bool:
        """Other work kept more than OTHER_LOAD_MAX_CORES busy during this block."""
        return (
            self.others_cpu_s is not None
            and self.wall_s > 0
            and self.others_cpu_s / self.wall_s > OTHER_LOAD_MAX_CORES
        )

    def to_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items()} | {"disturbed": self.disturbed}


def _server_us_per_query(b: Block) -> float | None:
    return (
        b.server_cpu_s * 1e6 / b.sysbench_queries if b.server_cpu_s and b.sysbench_queries else None
    )


@dataclass
class PairedPoint:
    workload: str
    threads: int
    cycles: int = 0  # how many cycles (pairs, with two arms) to run
    arms: tuple[str, ...] = ARMS
    blocks: list[Block] = field(default_factory=list)
    lead_in_qps: float | None = None

    def cycle_ratios(
        self, num: str = "ours", den: str = "raw", key=None, undisturbed: bool = False
    ) -> list[float]:
        """num / den of `key` (QPS by default) within each cycle (consecutive runs of len(arms)
        blocks, which hold one block of each arm): adjacent blocks, so slow drift cancels.
        `undisturbed`: only cycles where neither block was disturbed by other load."""
        key = key or (lambda b: b.qps)
        n = len(self.arms)
        out = []
        for k in range(0, len(self.blocks) - n + 1, n):
            by_arm = {b.arm: b for b in self.blocks[k : k + n]}
            if undisturbed and any(by_arm[a].disturbed for a in (num, den) if a in by_arm):
                continue
            if num in by_arm and den in by_arm:
                a, b = key(by_arm[num]), key(by_arm[den])
                if a and b:
                    out.append(a / b)
        return out

    def pair_ratios(self) -> list[float]:
        return self.cycle_ratios("ours", "raw")

    def steps(self) -> list[dict]:
        """Each arm against the one before it (SOURCE_ARMS): what the source it adds costs."""
        out = []
        for den, num in zip(self.arms, self.arms[1:], strict=False):
            ratios = self.cycle_ratios(num, den)
            iv = t_interval(ratios)
            out.append(
                {"arm": num, "versus": den, "source": SOURCE_STEPS.get(num, num)}
                | iv
                | {"verdict": verdict(iv), "cycles": len(ratios)}
            )
        return out

    def summary(self) -> dict:
        ratios = self.pair_ratios()
        iv = t_interval(ratios)
        med = statistics.median

        def of(arm: str) -> list[Block]:
            return [b for b in self.blocks if b.arm == arm]

        def us_per_query(arm: str) -> float | None:
            bs = [b for b in of(arm) if b.sysbench_queries]
            return med([b.sysbench_cpu_s * 1e6 / b.sysbench_queries for b in bs]) if bs else None

        def server_counted(arm: str) -> float | None:
            bs = [b for b in of(arm) if b.server_questions is not None and b.sysbench_queries]
            return med([b.server_questions / b.sysbench_queries for b in bs]) if bs else None

        ours_runner = [b.runner_cpu_s / b.wall_s for b in of("ours") if b.runner_cpu_s is not None]
        server_us = {
            a: [b.server_cpu_s * 1e6 / b.sysbench_queries for b in of(a) if b.server_cpu_s]
            for a in self.arms
        }
        others = [b.others_cpu_s / b.wall_s for b in self.blocks if b.others_cpu_s is not None]
        cpu_iv = t_interval(self.cycle_ratios("ours", "raw", key=_server_us_per_query))
        v = verdict(iv)
        return {
            "workload": self.workload,
            "threads": self.threads,
            "arms": list(self.arms),
            "qps_by_arm": {a: [round(b.qps, 1) for b in of(a)] for a in self.arms},
            "steps": self.steps() if len(self.arms) > 2 else [],
            "pairs": len(ratios),
            "pair_ratios": [round(r, 4) for r in ratios],
            **iv,
            "verdict": v,
            "met": {"met": True, "not met": False}.get(v),
            "ours_qps": [round(b.qps, 1) for b in of("ours")],
            "raw_qps": [round(b.qps, 1) for b in of("raw")],
            "lead_in_qps": self.lead_in_qps,
            "runner_core_fraction": med(ours_runner) if ours_runner else None,
            # The server's CPU per query (ours / raw, paired like QPS): more work per query in the
            # server because of us would show here. Measured under others' load it was about as
            # noisy as QPS (pair sd 10-27%), not steadier as hoped: read it with its interval.
            "server_us_per_query": {a: med(v) if v else None for a, v in server_us.items()},
            "server_cpu_per_query_ratio": cpu_iv,
            # Cores busy with other work during the blocks (median; see Block.others_cpu_s).
            "others_cores": med(others) if others else None,
            "disturbed_blocks": sum(b.disturbed for b in self.blocks),
            "undisturbed": t_interval(self.cycle_ratios(undisturbed=True))
            | {"pairs": len(self.cycle_ratios(undisturbed=True))},
            # Must be 0: nothing of ours read the server while a raw block ran.
            "sampler_reads_in_other_arms": sum(
                b.sampler_reads or 0 for b in self.blocks if b.arm != "ours"
            ),
            "ours_client_us_per_query": us_per_query("ours"),
            "raw_client_us_per_query": us_per_query("raw"),
            "ours_server_per_sysbench_query": server_counted("ours"),
            "raw_server_per_sysbench_query": server_counted("raw"),
            "blocks": [b.to_dict() for b in self.blocks],
        }


def _settle(server, base: float) -> float:
    """Wait until the server holds no client connection but ours (the previous block's clients
    have all disconnected); the seconds it took. Both arms wait the same way."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < SETTLE_TIMEOUT_S:
        if server.global_status(("Threads_connected",)).get("Threads_connected", 0) <= base:
            break
        time.sleep(0.02)  # a bounded poll for a state, between blocks (nothing is timed here)
    return time.monotonic() - t0


def _questions(server) -> float | None:
    return server.global_status(("Questions",)).get("Questions")


def _machine_busy_s() -> float | None:
    """All CPUs' busy time so far (/proc/stat `cpu`: everything but idle and iowait), seconds."""
    try:
        with open("/proc/stat") as f:
            parts = f.readline().split()
    except OSError:
        return None
    if not parts or parts[0] != "cpu":
        return None
    j = [int(x) for x in parts[1:9]]
    return (sum(j) - j[3] - j[4]) / CLK_TCK


def _others(busy0, busy1, *own: float | None) -> float | None:
    if busy0 is None or busy1 is None or any(x is None for x in own):
        return None
    return busy1 - busy0 - sum(own)


def _delta(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else b - a


def _server_cpu(server) -> float | None:
    """The server's whole-process CPU seconds now (utime + stime from /proc/PID/stat)."""
    try:
        st = ProcFS().stat(server.pid)
    except CollectorError:
        return None
    return st.utime_s + st.stime_s


def one_life(
    server,
    coll,
    opts,
    points: list[PairedPoint],
    block_s: int,
    work: Path,
    progress=None,
) -> None:
    """Run every point's lead-in and `pt.cycles` cycles of blocks on a started server with
    collectors attached (the caller starts and stops both). `coll` is paused except during
    "ours" blocks."""
    target = MYSQL_DRIVER.target(server.client_target(), "sbtest")
    base = server.global_status(("Threads_connected",)).get("Threads_connected", 1)
    n = 0
    for pt in points:
        if progress:
            progress(
                f"{pt.workload}@{pt.threads}: lead-in + {pt.cycles} cycles of "
                f"{'/'.join(pt.arms)}, {block_s} s blocks"
            )
        coll.pause()
        _settle(server, base)
        lead = run_raw_level(
            target,
            pt.workload,
            opts,
            pt.threads,
            block_s,
            work / f"lead-{'-'.join(pt.arms)}-{pt.workload}-{pt.threads}.log",
        )
        pt.lead_in_qps = lead.qps
        for arm in block_order(pt.cycles, pt.arms):
            n += 1
            log = work / f"{n:03d}-{arm}-{pt.workload}-{pt.threads}.log"
            _settle(server, base)
            q0 = _questions(server)
            if arm in ("raw", "raw_interval"):
                cpu0, busy0, self0 = _server_cpu(server), _machine_busy_s(), _cpu_self()
                extra = RAW_INTERVAL_ARGS if arm == "raw_interval" else ()
                w0, reads0 = time.monotonic(), coll.samples_taken
                r = run_raw_level(target, pt.workload, opts, pt.threads, block_s, log, extra)
                wall, reads = time.monotonic() - w0, coll.samples_taken - reads0
                q1 = _questions(server)
                pt.blocks.append(
                    Block(
                        arm,
                        r.qps,
                        r.queries,
                        None if q0 is None or q1 is None else q1 - q0 - 1,
                        r.sysbench_cpu_s,
                        wall,
                        sampler_reads=reads,
                        server_cpu_s=_delta(cpu0, _server_cpu(server)),
                    )
                )
                b = pt.blocks[-1]
                b.others_cpu_s = _others(
                    busy0, _machine_busy_s(), b.server_cpu_s, r.sysbench_cpu_s, _cpu_self() - self0
                )
                continue
            pt.blocks.append(
                _our_level_block(server, coll, target, opts, pt, block_s, log, n, q0, arm == "ours")
            )


def _our_level_block(server, coll, target, opts, pt, block_s, log, n, q0, collect) -> Block:
    """Our level. `collect` ("ours"): exactly as a cell runs it (suites.runner.matrix's order: boundary,
    level with a mark at each report, sampler check). Without ("wrapper"): the same level with
    the collectors left paused: no boundary, no marks, no sampler, no status read."""
    if collect:
        coll.resume()
        coll.begin_phase(f"{pt.workload}@{pt.threads}#{n}")
    # From here, as for raw: the boundary's reads are outside any measured window in a cell too.
    cpu0, busy0 = _server_cpu(server), _machine_busy_s()

    def interval(_t, tps, qps):
        coll.set_throughput(tps, qps)
        coll.mark_window()

    c0, s0, w0, reads0 = (
        resource.getrusage(resource.RUSAGE_CHILDREN),
        _cpu_self(),
        time.monotonic(),
        coll.samples_taken,
    )
    res = sysbench.run_level(
        target,
        pt.workload,
        pt.threads,
        block_s,
        opts,
        log,
        on_interval=interval if collect else None,
    )
    runner_cpu, wall = _cpu_self() - s0, time.monotonic() - w0
    reads = coll.samples_taken - reads0
    c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    sysbench_cpu = (c1.ru_utime + c1.ru_stime) - (c0.ru_utime + c0.ru_stime)
    if res.status != "ok":
        raise RuntimeError(f"{pt.workload}@{pt.threads} (our level) failed: {res.error}")
    if collect:
        coll.check_sampling()
        coll.pause()  # the mid-level status read is waited for here, outside the next block
    server_cpu, busy1 = _delta(cpu0, _server_cpu(server)), _machine_busy_s()
    q1 = _questions(server)
    queries = _sysbench_queries(log) or res.qps * res.duration_s
    return Block(
        "ours" if collect else "wrapper",
        res.qps,
        queries,
        # With collectors, the server's count includes our own two reads inside the block (the
        # boundary's SHOW GLOBAL STATUS and the mid-level Threads_connected).
        None if q0 is None or q1 is None else q1 - q0 - 1,
        sysbench_cpu,
        wall,
        runner_cpu,
        reads,
        server_cpu,
        _others(busy0, busy1, server_cpu, sysbench_cpu, runner_cpu),
    )


def _sysbench_queries(log: Path) -> float | None:
    from bench.raw import printed_summary

    try:
        return float(printed_summary(log.read_text(errors="replace"))["queries"])
    except (OSError, ValueError):
        return None


def run(bench, pairs: int, block_s: int, high: int, source_cycles: int = 0, progress=None) -> dict:
    """The whole figure: one server life on a fresh copy of the bench's dataset, collectors
    attached before exec as in a cell, scans, then every point's blocks; with `source_cycles`,
    then the sources figure at POINT_SELECT@8 (where the earlier "ours faster than raw" came
    from) in the same life."""
    from collectors.collector_session import CollectorSession
    from rundir.format import SAMPLE_COLUMNS
    from suites.workloads.sysbench.options import stock_tables
    from suites.workloads.sysbench.warm import scan_tables

    points = [PairedPoint(w, t, pairs) for w in ("oltp_ro", "point_select") for t in (8, high)]
    sources = PairedPoint("point_select", 8, source_cycles, SOURCE_ARMS) if source_cycles else None
    server = bench.restored("paired")
    coll = CollectorSession(bench.work / "samples-paired.csv", list(SAMPLE_COLUMNS))

    def attach(pid: int) -> None:
        coll.on_spawn(pid)
        coll.start(pid, "startup")

    exit_info = None
    t0, load0 = time.monotonic(), os.getloadavg()
    try:
        server.start(on_spawn=attach, before_reap=coll.before_reap)
        coll.set_status_source(
            server.global_status, server.connection_status, MYSQL.counters("innodb")
        )
        coll.begin_phase("warmup", mark="server_start")
        scan_tables(
            server.connect, MYSQL_DRIVER, "sbtest", stock_tables(bench.opts.tables), stock=True
        )
        every = points + ([sources] if sources is not None else [])
        one_life(server, coll, bench.opts, every, block_s, server.workdir, progress)
        coll.resume()
        coll.begin_phase("shutdown", mark="server_stop")
        exit_info = server.stop()
    finally:
        exit_info = exit_info or server.stop()
        coll.stop(exit_info.rusage if exit_info else None)
    return {
        "design": "one server life; per level a discarded lead-in, then blocks A B B A ... of "
        "ours and raw; ratio = geometric mean of the pairs' ours/raw with a 95% t-interval",
        "pairs": pairs,
        "block_s": block_s,
        "goal": GOAL,
        "wall_s": round(time.monotonic() - t0, 1),
        "loadavg_at_start": [round(x, 2) for x in load0],
        "loadavg_at_end": [round(x, 2) for x in os.getloadavg()],
        "sampler_paused_s": round(coll.sampler_paused_s, 1),
        "sampler_cpu_s": round(coll.sampler_cpu_s, 3),
        "points": [p.summary() for p in points],
        "sources": sources.summary() | {"cycles": source_cycles} if sources else None,
    }
