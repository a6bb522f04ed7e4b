"""`mallocsweep compare BASE NEW`: is NEW significantly slower than BASE? Exit 1 if so.

Both runs pass the integrity check first (rundir.integrity; --allow-incomplete reads an incomplete
one, its gaps first in every output), and a run is never compared with itself (the same directory,
a copy, a run holding the other's cells). compare-BASE-vs-NEW.md and .html are written both or
neither before the verdict is printed: a comparison that cannot be written is an error (exit 2).
Exit codes stay 0/1/2 whatever happens: an internal error becomes a one-line error with exit code 2
(MALLOCSWEEP_DEBUG=1 shows the traceback).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from analysis.errors import AnalysisError
from collectors.errors import CollectorError
from rundir.errors import RunDirError
from servers.errors import ServerError
from suites.cli.numbers import ascii_float
from suites.errors import SuiteError

USER_ERRORS = (AnalysisError, RunDirError, SuiteError, ServerError, CollectorError)

MIN_REPEATS_HELP = (
    "Firm verdicts need at least 2 repeats per side (run both with --repeat 3); with one run per "
    "side a slowdown is only 'possibly slower' (weak evidence) and exits 0 unless --allow-weak."
)


def add_parser(sub) -> None:
    p = sub.add_parser(
        "compare",
        help="compare two runs; exit 1 on a significant regression",
        description="Match the points of two runs by (workload, allocator, threads, THP mode) — or "
        "by allocator across two server versions, for an upgrade check — and give each a NEW/BASE "
        "ratio with a confidence interval and a verdict. A point is 'slower' only when the change "
        "is both statistically significant and larger than --threshold; a point BASE measured that "
        f"failed in NEW is a regression too. {MIN_REPEATS_HELP} Exit codes: 0 no significant "
        "regression, 1 regression, 2 error or nothing could be judged. Writes "
        "compare-BASE-vs-NEW.md and .html into NEW (or --out), never replacing an earlier one.",
    )
    p.add_argument("base", metavar="BASE_RUN", type=Path)
    p.add_argument("new", metavar="NEW_RUN", type=Path)
    p.add_argument(
        "--threshold",
        type=ascii_float,
        default=5.0,
        metavar="PCT",
        help="smallest change called a regression, in percent (default 5)",
    )
    p.add_argument(
        "--allow-weak",
        action="store_true",
        help="also exit 1 on 'possibly slower' points judged from one run per side (weak evidence)",
    )
    p.add_argument("--json", action="store_true", help="machine-readable verdicts on stdout")
    p.add_argument(
        "--allow-incomplete",
        action="store_true",
        help="compare a run whose records lack something (a cell record, rows, a column) with "
        "what is there; the gaps come first in the output and under 'incomplete' in --json",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        metavar="DIR",
        help="where compare-BASE-vs-NEW.md/.html go (default: NEW_RUN)",
    )
    p.set_defaults(func=run)


def run(args) -> int:
    from analysis.errors import AnalysisError

    if not 0 <= args.threshold < 100:
        raise AnalysisError(f"--threshold {args.threshold}: expected a percentage from 0 to 100")
    try:
        return _run(args)
    except USER_ERRORS:
        raise  # one line, exit 2 (suites.cli.main)
    except Exception as e:  # a bug of ours must not read as "no regression" (0) or "regression" (1)
        if os.environ.get("MALLOCSWEEP_DEBUG"):
            raise
        first = str(e).splitlines()[0] if str(e) else ""
        raise AnalysisError(
            f"internal error while comparing ({type(e).__name__}: {first}); no verdict. Rerun with"
            " MALLOCSWEEP_DEBUG=1 for the traceback"
        ) from None


def _run(args) -> int:
    from analysis.compare import compare_runs
    from analysis.compare_output import render_text, write_outputs
    from suites.runner.leftovers import settle_killed_runner

    cmp = compare_runs(
        args.base,
        args.new,
        threshold_pct=args.threshold,
        allow_weak=args.allow_weak,
        allow_incomplete=args.allow_incomplete,
        settle=settle_killed_runner,
    )
    # Both files or neither, before a verdict is said: a comparison that could not be written is
    # an error (exit 2), never a verdict whose evidence is half on disk.
    files = write_outputs(cmp, args.out or args.new)
    if args.json:
        print(json.dumps(cmp.to_json(), indent=2))
        for w in [*cmp.gap_lines(), *cmp.warnings]:  # people watching CI logs read stderr
            print(f"mallocsweep compare: WARNING: {w}", file=sys.stderr)
    else:
        print(render_text(cmp))
        for f in files:
            print(f"written: {f}")
    return cmp.exit_code
