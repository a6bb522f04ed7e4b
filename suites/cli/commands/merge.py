"""`mallocsweep merge RUN... --out DIR`: join the shards of one matrix into one run directory."""

from __future__ import annotations

from pathlib import Path

HELP = """\
Join the run directories of `mallocsweep run SUITE --shard K/N` (one per host of a fleet) into one
run directory that `report` and `compare` read like any run. Refused, before anything is written:
shards of different suites, designs (error rate, minimum effect, looks, baseline), tool versions,
server builds (version, the binary's sha256), server settings (what each cell's server ran with),
allocator builds (sha256) or host kinds (CPU, cores, memory, kernel, glibc, THP), a shard given
twice or missing, a run merged with itself, an unfinished shard, the same server life in two
shards. Host differences that do not change what
an allocator does (names, governor) are listed. The shards are copied, never changed.
"""


def add_parser(sub) -> None:
    import argparse

    p = sub.add_parser(
        "merge",
        help="join the shards of a fleet run into one run directory",
        description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("runs", metavar="RUN_DIR", type=Path, nargs="+", help="the shards' run dirs")
    p.add_argument(
        "--out", metavar="DIR", type=Path, required=True, help="the merged run directory (new)"
    )
    p.set_defaults(func=run)


def run(args) -> int:
    from suites.runner.merge import merge_shards

    out, noted = merge_shards(args.runs, args.out)
    for line in noted:
        print(f"note: {line}")
    print(f"merged {len(args.runs)} shards into {out}")
    print(f"run directory: {out}")
    return 0
