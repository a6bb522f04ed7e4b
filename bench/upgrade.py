"""Item 10: an upgrade check in ONE run (both builds interleaved and paired by round) against two
separate runs compared afterwards (`compare`, Welch's interval over each side's lives), on the same
two builds, the same suite and the same number of server lives, so the same wall time: the median
half-width of each design's NEW/BASE throughput intervals, and their ratio (in-run / separate).
Then the server A/A: one build under two names in one run, whose NEW/BASE verdicts must never
call a difference.

Each design is a real `mallocsweep run` (a process of its own, like a user's), in this order: the
in-run check, the old build alone, the new build alone. What drifts on the machine between the two
separate runs is what the separate design cannot cancel; within the in-run check it cancels in the
pairs. Both designs' wall times are printed beside the ratio.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from analysis.compare import compare_runs
from analysis.upgrade import THROUGHPUT, aa_alarm, upgrade_verdicts
from rundir.read import load_run
from servers.acquire import fetch

SUITE = """\
[suite]
name = "bench-upgrade"
description = "make bench: an upgrade check in one run vs two separate runs"

[server]
buffer_pool_mb = 64

[allocators]
use = ["glibc", "jemalloc"]

[dataset]
tables = 2
table_size = 2000

[warmup]
min_s = 1
cap_s = 4
threads = 4

[sysbench]
workloads = {workloads}
threads = [4, 16]
duration_s = 3
"""


def half_width_pct(lo: float | None, hi: float | None) -> float | None:
    """An interval's half-width as a % of its ratio, on the log scale it is built on."""
    if lo is None or hi is None or not lo > 0 or not hi > 0:
        return None
    return ((hi / lo) ** 0.5 - 1) * 100


def _run(suite: Path, out: Path, rounds: int, *extra: str) -> tuple[Path, float, list[float]]:
    """One `mallocsweep run` (its own process); (run directory, wall seconds, the machine's
    1-minute load average at its start and end: what else ran beside it)."""
    before = set(out.iterdir()) if out.exists() else set()
    load = [round(os.getloadavg()[0], 1)]
    t0 = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "suites.cli.main", "run", str(suite), "--out", str(out),
         "--repeat", str(rounds), "--quiet", "--no-report", *extra],
        capture_output=True, text=True, timeout=6 * 3600,
    )  # fmt: skip
    took = time.monotonic() - t0
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise RuntimeError(f"mallocsweep run {' '.join(extra)} exited {done.returncode}: {tail[0]}")
    (run_dir,) = set(out.iterdir()) - before
    return run_dir, took, [*load, round(os.getloadavg()[0], 1)]


def run(
    work: Path,
    out: Path,
    spec: str = "mariadb-10.11.18",
    rounds: int = 4,
    quick: bool = False,
    progress: Callable[[str], None] = lambda _s: None,
) -> dict:
    old = fetch.fetch(spec, say=progress)  # the older build, fetched once (cached)
    suite = work / "bench-upgrade.toml"
    workloads = '["point_select"]' if quick else '["oltp_ro", "point_select"]'
    suite.write_text(SUITE.format(workloads=workloads))
    # The run directories are kept (under --out): each design can be read, reported, compared.
    out = out / f"bench-upgrade-{time.strftime('%Y%m%dT%H%M%S')}"
    out.mkdir(parents=True)
    progress(f"in one run: old={spec} (fetched), new=host, {rounds} rounds (into {out})")
    inrun, inrun_s, inrun_load = _run(
        suite, out, rounds, "--servers", f"old=fetched:{spec},new=host"
    )
    progress(f"two separate runs of {rounds} rounds: {spec}, then the host's server")
    base, base_s, base_load = _run(suite, out, rounds, "--server", f"fetched:{spec}")
    new, new_s, new_load = _run(suite, out, rounds)
    progress(f"server A/A: the host's server as a and b, {rounds} rounds")
    aa, aa_s, aa_load = _run(suite, out, rounds, "--servers", "a=host,b=host")

    uv = [v for v in upgrade_verdicts(load_run(inrun)) if v.metric == THROUGHPUT]
    cmp = compare_runs(base, new)
    sep = [p for p in cmp.points if p.lo is not None and p.evidence.startswith("repeats")]
    h_in = [h for h in (half_width_pct(v.lo, v.hi) for v in uv) if h is not None]
    h_sep = [h for h in (half_width_pct(p.lo, p.hi) for p in sep) if h is not None]
    med_in = statistics.median(h_in) if h_in else None
    med_sep = statistics.median(h_sep) if h_sep else None
    aa_run = load_run(aa)
    aa_uv = upgrade_verdicts(aa_run)
    alarm = aa_alarm(aa_run, aa_uv)
    return {
        "old": spec,
        "old_version": old.version,
        "rounds": rounds,
        "inrun": {
            "run": str(inrun),
            "wall_s": round(inrun_s, 1),
            "load": inrun_load,
            "points": len(h_in),
            "median_half_width_pct": med_in,
            "significant": sum(v.significant for v in uv),
            "verdicts": [
                {
                    "workload": v.workload,
                    "allocator": v.allocator,
                    "threads": v.threads,
                    "ratio": v.ratio,
                    "lo": v.lo,
                    "hi": v.hi,
                    "verdict": v.verdict,
                }
                for v in uv
            ],  # fmt: skip
        },
        "separate": {
            "runs": [str(base), str(new)],
            "wall_s": round(base_s + new_s, 1),
            "load": [*base_load, *new_load],
            "points": len(h_sep),
            "median_half_width_pct": med_sep,
            "significant": sum(p.verdict in ("faster", "slower") for p in sep),
            "points_detail": [
                {
                    "workload": p.workload,
                    "allocator": p.allocator,
                    "threads": p.threads,
                    "ratio": p.ratio,
                    "lo": p.lo,
                    "hi": p.hi,
                    "verdict": p.verdict,
                }
                for p in sep
            ],  # fmt: skip
        },
        "ratio": (med_in / med_sep) if med_in is not None and med_sep else None,
        "aa": {
            "run": str(aa),
            "wall_s": round(aa_s, 1),
            "load": aa_load,
            "verdicts": len([v for v in aa_uv if v.metric != "interaction"]),
            "called_different": len(alarm),
            "median_half_width_pct": statistics.median(
                [
                    h
                    for v in aa_uv
                    if v.metric == THROUGHPUT
                    for h in [half_width_pct(v.lo, v.hi)]
                    if h is not None
                ]  # fmt: skip
                or [float("nan")]
            ),
        },
    }
