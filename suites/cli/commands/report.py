"""`mallocsweep report RUN_DIR [--rederive]`: (re)write report.html and summary.md from the run's
files; with --rederive, derive every cell's figures again from its raw record first."""

from __future__ import annotations

import sys
from pathlib import Path


def add_parser(sub) -> None:
    p = sub.add_parser(
        "report",
        help="write RUN_DIR/report.html and RUN_DIR/summary.md",
        description="Render a run directory into a self-contained HTML report (plots embedded; "
        "opens offline) and a Markdown summary. Reads only the run's files: works on a machine "
        "without any server installed, and on a run that is unfinished or had failed cells.",
    )
    p.add_argument("run_dir", metavar="RUN_DIR", type=Path)
    p.add_argument(
        "--baseline",
        metavar="NAME",
        help="allocator the verdicts compare with (default: the run's, glibc)",
    )
    p.add_argument(
        "--rederive",
        action="store_true",
        help="derive every cell's per-level figures again from its raw record (raw/<cell>.json, "
        "format 3) with this mallocsweep, and rewrite results.csv from them before rendering; "
        "raw records and cells/ are never touched; cells of older runs keep their figures",
    )
    p.add_argument(
        "--allow-incomplete",
        action="store_true",
        help="report a run whose records lack something (a cell record, rows, a column) with "
        "what is there; the gaps come first in the report and on the terminal",
    )
    p.set_defaults(func=run)


def run(args) -> int:
    from analysis.errors import AnalysisError
    from analysis.notices import run_problems
    from analysis.report import write_report
    from rundir.read import load_run

    if args.rederive:
        from rundir.integrity import check_run
        from rundir.rederive import rederive_run

        # Derived again only from a run whose records are all there (or the user allows it).
        found = check_run(args.run_dir)
        if found.gaps and not args.allow_incomplete:
            from rundir.errors import RunDirError

            raise RunDirError(found.refusal())
        from rundir.rederive import KEPT

        # A raw record holding a rate no level had is refused before anything is rewritten;
        # with --allow-incomplete its cell keeps its recorded figures (said below)
        outcomes = rederive_run(args.run_dir, allow_damaged=args.allow_incomplete)
        for outcome in outcomes:
            print(f"rederive: {outcome.line()}")
        # A level whose raw record can no longer give its steady rate (a block failed) leaves
        # its life out of a verdict: said on the terminal, by cell and level
        for outcome in outcomes:
            for line in outcome.lost:
                print(f"mallocsweep report: WARNING: --rederive: {line}", file=sys.stderr)
        # Said where warnings go too, by name: a cell whose raw record is damaged (truncated)
        # keeps its old figures, and a user reading only the report must know which.
        unusable = [o.cell for o in outcomes if o.outcome == KEPT and "unusable" in o.note]
        if unusable:
            print(
                f"mallocsweep report: WARNING: --rederive could not derive {len(unusable)} "
                f"cell(s) again (raw record unusable): {', '.join(unusable)}; their figures are "
                "the recorded ones",
                file=sys.stderr,
            )
    run = load_run(args.run_dir, allow_incomplete=args.allow_incomplete)
    _killed_runner(run)
    if args.baseline is not None and args.baseline not in run.allocators:
        raise AnalysisError(
            f"--baseline {args.baseline}: not an allocator of {args.run_dir} "
            f"({', '.join(run.allocators)})"
        )
    html, md = write_report(args.run_dir, args.baseline, run=run)
    print(f"report:  {html}")
    print(f"summary: {md}")
    # What the report puts first is said on the terminal too: an incomplete run, a THP left
    # changed (it affects the machine, not only this run).
    for problem in run_problems(run):
        print(f"mallocsweep report: WARNING: {problem}", file=sys.stderr)
    return 0


def _killed_runner(run) -> None:
    """A run whose runner is gone is reported as interrupted, with the command that finishes it
    (analysis.notices.run_problems says it). The manifest on disk is not touched."""
    from suites.runner.leftovers import settle_killed_runner

    settle_killed_runner(run.manifest)
