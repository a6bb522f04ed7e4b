"""`mallocsweep tune SUITE --allocator NAME --budget TIME --out DIR`: the settings to deploy."""

from __future__ import annotations

import argparse
from pathlib import Path

from suites.cli.numbers import ascii_int, ascii_int_in

HELP = """\
Search an allocator's settings for the least memory at no resolved throughput cost, and end with
the files a DBA installs.

Each trial is a real run of the suite with two arms, the allocator's defaults and one setting
(MALLOC_CONF for jemalloc, GLIBC_TUNABLES for glibc, TCMALLOC_* / MIMALLOC_* variables), paired
round by round; every life is proven as in `run`, and the setting is read back from the live
server (/proc/PID/environ) before it is measured. Objectives, against the defaults in the same
trial: RSS at stop (a ratio) and RSS growth per hour (MB/h above the defaults') in the
fragmentation scenarios the suite's [fragmentation] table names, run as a second paired run per
trial (configs/suites/tune.toml names the dump scenario); both minimised (optuna NSGA-II,
seeded); constraint: no throughput point resolved as slower than the defaults. The
recommendation is the largest resolved memory gain (RSS at stop first, then growth per hour) at
no resolved cost, confirmed on fresh lives; "resolved" means the interval lies wholly on one
side of the defaults, at any size (for gain and cost alike).

The search space of each allocator is declared beside its registry entry
(configs/allocators.toml, [allocator.NAME.tune]), with presets: settings DBAs deploy (jemalloc's
background thread with 5 s decays, glibc's arena_max=2, ...), tried first, each setting its named
knobs only (the others stay the allocator's defaults). A --space file narrows the space:

  [space.jemalloc]
  dirty_decay_ms = [0, 30000]        # a range inside the declared one
  background_thread = ["true"]       # some of the choices
  narenas = 8                        # one value: fixed

and for a glibc tune, `[space.glibc] mmap_threshold = "unset"` leaves an optional knob at glibc's
own default in every trial.

Written to --out DIR (a new or empty directory; never another one): tune.json, study.journal
(optuna's journal: --resume continues a killed tune with its trials), trials/NNNN/<run>,
pareto.csv (every trial: setting, an empty knob left at the allocator's default; memory, growth,
throughput, each with its interval; the front first), pareto.png, recommendation.txt, and, after
a final paired run on fresh lives confirms the recommendation: mallocsweep-tune.conf (a systemd drop-in: [Service] Environment=LD_PRELOAD=...,
MALLOC_CONF=... or GLIBC_TUNABLES=...) and mallocsweep-tune.env (the same for a container). If no
setting beats the defaults, recommendation.txt says so and both files only preload the allocator.

The budget covers every trial and the confirming run; a trial starts only if it and that run
still fit. Few rounds resolve only large differences (~10% per life on a 2-core VM): a 2-hour
budget with --rounds 5 or more is the real use; a few minutes shows how it works.

examples:
  mallocsweep tune configs/suites/tune.toml --allocator jemalloc --budget 2h --out tune-je
  mallocsweep tune configs/suites/fragmentation.toml --allocator glibc --budget 2h \\
      --space my-space.toml --out tune-glibc --seed 7
  mallocsweep tune configs/suites/tune.toml --allocator jemalloc --budget 2h --out tune-je --resume
"""


def add_parser(sub) -> None:
    p = sub.add_parser(
        "tune",
        help="search an allocator's settings: least memory at no resolved throughput cost",
        description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("suite", metavar="SUITE.toml", type=Path, help="the suite each trial runs")
    p.add_argument(
        "--allocator",
        required=True,
        metavar="NAME",
        help="the allocator to tune: glibc, jemalloc, tcmalloc, tcmalloc-minimal, mimalloc",
    )
    p.add_argument(
        "--budget",
        required=True,
        metavar="TIME",
        help="wall time for the trials and the confirming run, e.g. 2h, 30m",
    )
    p.add_argument("--out", required=True, type=Path, metavar="DIR", help="the tune's directory")
    p.add_argument("--space", type=Path, metavar="FILE", help="a TOML file narrowing the space")
    p.add_argument(
        "--seed", type=ascii_int_in(0, 2**32 - 1), default=0, metavar="N",
        help="the sampler's seed, 0..4294967295 (0)",
    )  # fmt: skip
    p.add_argument(
        "--rounds",
        type=ascii_int,
        metavar="N",
        help="paired rounds per trial (default: the suite's repeat, at least 3; at least 2)",
    )
    p.add_argument(
        "--trials", type=ascii_int, metavar="N", help="at most N trials (within the budget)"
    )
    p.add_argument(
        "--resume", action="store_true", help="continue the tune in --out (a killed one too)"
    )
    p.add_argument("--quiet", action="store_true", help="no progress display")
    p.set_defaults(func=run)


def run(args) -> int:
    from suites.cli.commands.run import duration_arg
    from suites.tune.study import TuneOptions, tune

    opts = TuneOptions(
        suite=args.suite,
        allocator=args.allocator,
        budget_s=duration_arg(args.budget),
        budget_text=args.budget,
        out=args.out,
        space=args.space,
        seed=args.seed,
        resume=args.resume,
        rounds=args.rounds,
        trials=args.trials,
        quiet=args.quiet,
    )
    return tune(opts)
