"""`mallocsweep run SUITE.toml`: run the matrix, write the run directory, the report, a table."""

from __future__ import annotations

import argparse
import csv
import math
import statistics
import sys
from pathlib import Path

from rich.table import Table

from suites.errors import SuiteError

HELP = """\
Run a suite: for every (allocator x THP mode x repeat) cell, start the server under that allocator,
prove the allocator is in use, warm the buffer pool, run each workload level, stop the server, and
record everything in a new run directory (never overwriting one). Ends with report.html/summary.md
and a table of QPS and p95 latency per allocator and thread level.

Options override the suite file; the suite file documents every setting
(configs/suites/template.toml). Interrupt with Ctrl-C at any time: servers are stopped, THP is
restored, and `--resume RUN_DIR` later runs only the cells that did not finish.
"""


def _csv_list(kind):
    def parse(text: str):
        items = [x.strip() for x in text.split(",") if x.strip()]
        if not items:
            raise argparse.ArgumentTypeError("expected a comma-separated list")
        if kind is int:
            try:
                return [int(x) for x in items]
            except ValueError:
                raise argparse.ArgumentTypeError(f"expected integers, got {text!r}") from None
        return items

    return parse


def add_parser(sub) -> None:
    p = sub.add_parser(
        "run",
        help="run a suite and write a run directory",
        description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "suite", metavar="SUITE.toml", type=Path, help="suite file, e.g. configs/suites/quick.toml"
    )
    p.add_argument(
        "--allocators",
        type=_csv_list(str),
        metavar="A,B",
        help="allocator names (see `mallocsweep allocators`), or 'all'",
    )
    p.add_argument(
        "--threads", type=_csv_list(int), metavar="8,64,...", help="client thread levels"
    )
    p.add_argument("--duration", type=float, metavar="S", help="seconds per level")
    p.add_argument(
        "--warmup", type=float, metavar="S", help="warmup cap in seconds (0 = scans only)"
    )
    p.add_argument("--repeat", type=int, metavar="N", help="rounds; allocator order alternates")
    p.add_argument(
        "--thp",
        type=_csv_list(str),
        metavar="MODES",
        help="THP modes: system,always,madvise,never (system = leave as is)",
    )
    p.add_argument(
        "--server",
        metavar="NAME|PATH",
        help="server binary (mariadbd, mysqld of a Percona/MySQL install, mongod); with "
        "--server-root, a path inside the root",
    )
    p.add_argument(
        "--server-root",
        metavar="DIR",
        help="run the server in this root directory (another release's files) under chroot",
    )
    p.add_argument(
        "--out", metavar="DIR", help="parent directory for the run directory (default runs)"
    )
    p.add_argument(
        "--resume",
        type=Path,
        metavar="RUN_DIR",
        help="finish an interrupted run: only cells that are not ok run again",
    )
    p.add_argument("--no-report", action="store_true", help="skip report.html/summary.md")
    p.add_argument("--quiet", action="store_true", help="no progress display")
    p.set_defaults(func=run)


def _median(values) -> float | None:
    """Median of the recorded values (the mean of the middle two for an even count); an empty or
    non-numeric field is a missing value, not a number, so it is left out; None if none remain."""
    nums = []
    for v in values:
        try:
            x = float(v)
        except (TypeError, ValueError):
            continue
        if not math.isnan(x):
            nums.append(x)
    return statistics.median(nums) if nums else None


def final_table(run_dir: Path) -> list[Table]:
    """allocator x threads: QPS and p95 for each workload, from results.csv."""
    path = run_dir / "results.csv"
    rows = list(csv.DictReader(path.open())) if path.exists() else []
    tables = []
    for workload in dict.fromkeys(r["workload"] for r in rows):
        wrows = [r for r in rows if r["workload"] == workload]
        threads = sorted({int(r["threads"]) for r in wrows})
        # iibench's qps are rows inserted and its latencies are per insert batch.
        rate, lat = ("rows/s", "p95 ms per batch") if workload == "iibench" else ("QPS", "p95 ms")
        t = Table(title=f"{workload}: {rate} / {lat} (median over repeats)")
        t.add_column("allocator (thp)")
        for n in threads:
            t.add_column(str(n), justify="right")
        keys = list(dict.fromkeys((r["allocator"], r["thp"]) for r in wrows))
        for alloc, thp in keys:
            cells = []
            for n in threads:
                pts = [
                    r
                    for r in wrows
                    if r["allocator"] == alloc
                    and r["thp"] == thp
                    and int(r["threads"]) == n
                    and r["status"] == "ok"
                ]
                if not pts:
                    cells.append("[red]failed[/red]")
                    continue
                qps = _median(r["qps"] for r in pts)
                p95 = _median(r["lat_p95_ms"] for r in pts)
                qps_text = "?" if qps is None else f"{qps:,.0f}"
                p95_text = "?" if p95 is None else f"{p95:.2f}"
                cells.append(f"{qps_text} / {p95_text}")
            t.add_row(f"{alloc} ({thp})", *cells)
        tables.append(t)
    return tables


def run(args) -> int:
    from suites.config import apply_overrides, load_suite
    from suites.display import Display
    from suites.runner import run_suite

    if args.repeat is not None and args.repeat <= 0:
        raise SuiteError(f"--repeat {args.repeat}: expected a positive number of rounds")
    loaded = load_suite(args.suite)
    overrides = (
        args.allocators,
        args.threads,
        args.duration,
        args.warmup,
        args.repeat,
        args.thp,
        args.server,
        args.server_root,
    )
    if args.resume is not None and all(o is None for o in overrides):
        # Resuming without options: the settings are the ones the run was started with.
        suite = resumed_suite(loaded, args.resume)
    else:
        suite = apply_overrides(
            loaded.suite,
            allocators=args.allocators,
            threads=args.threads,
            duration=args.duration,
            warmup=args.warmup,
            repeat=args.repeat,
            thp=args.thp,
            server=args.server,
            server_root=args.server_root,
            out=args.out,
        )
    display = Display(enabled=not args.quiet)
    code, run_dir = run_suite(loaded, suite, args.resume, display)
    return _finish(args, code, run_dir)


def resumed_suite(loaded, run_dir: Path):
    """The suite as the run recorded it, provided the suite file is still the same."""
    import json

    from suites.config import suite_from_dict

    try:
        m = json.loads((Path(run_dir) / "manifest.json").read_text())
    except (OSError, ValueError):
        m = None
    if not isinstance(m, dict):
        raise SuiteError(
            f"--resume {run_dir}: not a mallocsweep run directory (no readable manifest.json)"
        )
    if m.get("suite_sha256") != loaded.sha256:
        raise SuiteError(
            f"--resume {run_dir}: {loaded.path} changed since the run started "
            f"(it was {m.get('suite_file')}); resume with the same suite file"
        )
    if not isinstance(m.get("suite"), dict):
        raise SuiteError(f"--resume {run_dir}: manifest.json records no suite settings")
    # A setting this version no longer accepts is named, with the reason.
    return suite_from_dict(m["suite"], f"--resume {run_dir}: recorded suite")


def _finish(args, code: int, run_dir: Path) -> int:
    from suites.display import stdout_console

    out = stdout_console()  # logs and CI read this table too
    for t in final_table(run_dir):
        out.print(t)
    if not args.no_report:
        from analysis.report import write_report

        html, md = write_report(run_dir)
        print(f"report:  {html}")
        print(f"summary: {md}")
    print(f"run directory: {run_dir}")
    if code == 3:
        print("some cells or levels failed; see the report's 'Failures' section", file=sys.stderr)
    return code
