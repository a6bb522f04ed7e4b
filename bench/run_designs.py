"""The runner's designs side by side: `mallocsweep run --design solo` vs `--design alternate` on a
real server, each with the A/A arm (glibc-aa) and the positive control (glibc slowed by
bench/slowmalloc.c, a custom allocator arm), the same suite and rounds, in one bench run.

bench/designs.py measures the designs on raw sysbench levels; this measures them as a user gets
them: the runner's own cells, proofs, warmups, verdicts. Per design: the A/A's and the control's
throughput ratio to glibc with the verdict's interval (verdicts.csv), its half-width, the run's
wall time (machine minutes) and "half-width x sqrt(minutes)" (an interval narrows with the
square root of the time spent: the design with the smaller figure buys more certainty per minute).

Each arm gets the same load per level and round in both designs: a solo level of
`blocks x block_s` seconds, or `blocks` blocks of `block_s` seconds. The machine's load average
is recorded at each run's start and end: on a shared machine the figures are that moment's.

    python -m bench.run_designs [--rounds 4] [--spins 4000] [--out runs]
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
import time
from pathlib import Path

from bench.positive_control import build
from bench.upgrade import _run

WORKLOAD, THREADS = "oltp_ro", 8
SUITE = """\
[suite]
name = "bench-designs-{design}"
description = "bench: the {design} design, glibc vs its A/A arm and the positive control"

[server]
buffer_pool_mb = 128

[allocators]
use = ["glibc", "slow"]

[[allocators.custom]]
name = "slow"
library = "{library}"
env = {{ SLOWMALLOC_SPINS = "{spins}" }}
description = "positive control: glibc + {spins} spins per call"

[dataset]
tables = 4
table_size = 10000

[warmup]
min_s = 3
cap_s = 10
threads = 8

[sysbench]
workloads = ["{workload}"]
threads = [{threads}]
duration_s = {level_s}

[run]
aa = true
design = "{design}"
block_s = {block_s}
blocks = {blocks}
"""


def suite_text(design: str, library: Path, spins: int, block_s: int, blocks: int) -> str:
    return SUITE.format(
        design=design, library=library, spins=spins, workload=WORKLOAD, threads=THREADS,
        level_s=block_s * blocks, block_s=block_s, blocks=blocks,
    )  # fmt: skip


def throughput_verdicts(run_dir: Path) -> dict[str, dict]:
    """allocator -> its throughput verdict at the bench's level, from verdicts.csv."""
    out = {}
    with (run_dir / "verdicts.csv").open() as f:
        for r in csv.DictReader(f):
            if r["metric"] == "throughput" and r["workload"] == WORKLOAD:
                out[r["allocator"]] = {
                    k: float(r[k]) if r[k] else None for k in ("ratio", "lo", "hi")
                } | {"verdict": r["verdict"], "rounds": int(r["rounds"]), "design": r["design"]}
    return out


def half_width_pct(v: dict) -> float | None:
    """The interval's half-width as % of the ratio (on the log scale, as the verdicts are)."""
    if not v.get("lo") or not v.get("hi"):
        return None
    return (math.sqrt(v["hi"] / v["lo"]) - 1) * 100


def measure(
    out: Path, rounds: int, spins: int, block_s: int, blocks: int, designs=("solo", "alternate")
) -> dict:
    """Each design's run, in the order given (the machine's load changes over the minutes a run
    takes: swap the order between repetitions, `--first`, so it does not always favour one)."""
    library = build()
    out = out / f"bench-run-designs-{time.strftime('%Y%m%dT%H%M%S')}"
    out.mkdir(parents=True)
    figures: dict = {
        "spins": spins, "rounds": rounds, "block_s": block_s, "blocks": blocks,
        "order": list(designs),
    }  # fmt: skip
    for design in designs:
        suite = out / f"{design}.toml"
        suite.write_text(suite_text(design, library, spins, block_s, blocks))
        # "--report" is left off: verdicts.csv comes with `mallocsweep report`
        run_dir, took, load = _run(suite, out, rounds)
        _report(run_dir)
        minutes = took / 60
        arms = throughput_verdicts(run_dir)
        for arm in arms.values():
            hw = half_width_pct(arm)
            arm["half_width_pct"] = None if hw is None else round(hw, 2)
            arm["half_width_x_sqrt_min"] = None if hw is None else round(hw * minutes**0.5, 2)
        figures[design] = {
            "run": str(run_dir), "machine_min": round(minutes, 2), "load": load, "arms": arms,
        }  # fmt: skip
    return figures


def _report(run_dir: Path) -> None:
    import subprocess

    subprocess.run(
        [sys.executable, "-m", "suites.cli.main", "report", str(run_dir)],
        capture_output=True, check=True, timeout=600,
    )  # fmt: skip


def rows(t, figures: dict) -> None:
    """make bench's table: one row per design and arm."""
    for design in figures.get("order") or ():
        d = figures[design]
        for name in ("glibc-aa", "slow"):
            v = d["arms"].get(name) or {}
            what = "A/A (glibc-aa)" if name == "glibc-aa" else f"control ({figures['spins']} spins)"
            iv = "n/a" if v.get("lo") is None else f"{v['ratio']:.3f} [{v['lo']:.3f}-{v['hi']:.3f}]"
            t.add_row(
                f"runner design {design}, {what}, {WORKLOAD.upper()}@{THREADS}, "
                f"{figures['rounds']} rounds",
                f"{iv} {v.get('verdict', 'n/a')}, +-{_f(v.get('half_width_pct'))}% in "
                f"{d['machine_min']:.1f} machine min; load average {d['load'][0]}-{d['load'][1]}",
                f"+-{_f(v.get('half_width_x_sqrt_min'))}% x sqrt(min)",
                "narrowest per machine minute; A/A never called",
                "",
            )


def table(figures: dict) -> str:
    """The designs side by side, one line per design and arm."""
    lines = [
        f"{WORKLOAD.upper()}@{THREADS}, {figures['rounds']} rounds, control at "
        f"{figures['spins']} spins per call, load per arm and level "
        f"{figures['blocks']} x {figures['block_s']} s; run in the order "
        f"{', '.join(figures.get('order') or ())}",
        f"{'design':<10} {'arm':<9} {'ratio [interval]':<26} {'verdict':<10} {'+-%':>6} "
        f"{'min':>5} {'hw x sqrt(min)':>14}  load average",
    ]
    for design in ("solo", "alternate"):
        d = figures.get(design)
        if not d:
            continue
        for name in ("glibc-aa", "slow"):
            v = d["arms"].get(name) or {}
            iv = (
                f"{v['ratio']:.3f} [{v['lo']:.3f}-{v['hi']:.3f}]"
                if v.get("lo") is not None and v.get("ratio") is not None
                else "n/a"
            )
            lines.append(
                f"{design:<10} {name:<9} {iv:<26} {v.get('verdict', 'n/a'):<10} "
                f"{_f(v.get('half_width_pct')):>6} {d['machine_min']:>5.1f} "
                f"{_f(v.get('half_width_x_sqrt_min')):>14}  {d['load'][0]}-{d['load'][1]}"
            )
    return "\n".join(lines)


def _f(x) -> str:
    return "n/a" if x is None else f"{x:.1f}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.run_designs", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("--rounds", type=int, default=4, help="rounds of each design (default 4)")
    p.add_argument("--spins", type=int, default=4000, help="the control's spins per call")
    p.add_argument("--block-s", type=int, default=5, help="seconds per block (default 5)")
    p.add_argument("--blocks", type=int, default=2, help="blocks per arm and level (default 2)")
    p.add_argument("--out", type=Path, default=Path("runs"))
    p.add_argument("--first", choices=("solo", "alternate"), default="solo",
                   help="which design runs first (swap it between repetitions)")  # fmt: skip
    args = p.parse_args(argv)
    order = ("solo", "alternate") if args.first == "solo" else ("alternate", "solo")
    figures = measure(args.out, args.rounds, args.spins, args.block_s, args.blocks, order)
    print(table(figures))
    import json

    print(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
