"""`mallocsweep compare BASE NEW`: is NEW significantly slower than BASE? Exit 1 if so."""

from __future__ import annotations

import json
from pathlib import Path


def add_parser(sub) -> None:
    p = sub.add_parser(
        "compare",
        help="compare two runs; exit 1 on a significant regression",
        description="Match the points of two runs by (workload, allocator, threads, THP mode) — or "
        "by allocator across two server versions, for an upgrade check — and give each a NEW/BASE "
        "ratio with a confidence interval and a verdict. A point is 'slower' only when the change "
        "is both statistically significant and larger than --threshold. Exit codes: 0 no "
        "significant regression, 1 regression, 2 error. Writes compare.md and compare.html into NEW.",
    )
    p.add_argument("base", metavar="BASE_RUN", type=Path)
    p.add_argument("new", metavar="NEW_RUN", type=Path)
    p.add_argument(
        "--threshold",
        type=float,
        default=5.0,
        metavar="PCT",
        help="smallest change called a regression, in percent (default 5)",
    )
    p.add_argument("--json", action="store_true", help="machine-readable verdicts on stdout")
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        metavar="DIR",
        help="where compare.md/compare.html go (default: NEW_RUN)",
    )
    p.set_defaults(func=run)


def run(args) -> int:
    from analysis.compare import compare_runs, render_text, write_outputs
    from analysis.errors import AnalysisError

    if not 0 <= args.threshold < 100:
        raise AnalysisError(f"--threshold {args.threshold}: expected a percentage from 0 to 100")
    cmp = compare_runs(args.base, args.new, threshold_pct=args.threshold)
    out_dir = args.out or args.new
    files = write_outputs(cmp, out_dir)
    if args.json:
        print(json.dumps(cmp.to_json(), indent=2))
    else:
        print(render_text(cmp))
        for f in files:
            print(f"written: {f}")
    return cmp.exit_code
