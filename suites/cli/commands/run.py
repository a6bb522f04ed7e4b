"""`mallocsweep run SUITE.toml`: run the matrix, write the run directory, the report, a table."""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

from rich.markup import escape
from rich.table import Table

from suites.cli.numbers import ascii_float, ascii_int, parse_float, parse_int
from suites.errors import SuiteError

HELP = """\
Run a suite: for every (allocator x THP mode x repeat) cell, start the server under that allocator,
prove the allocator is in use, warm the buffer pool, run each workload level, stop the server, and
record everything in a new run directory (never overwriting one). Ends with report.html/summary.md,
verdicts.csv and the verdicts: each allocator against the baseline (--baseline, glibc) per workload
and thread level, with a 95% interval: faster / slower / none / undecided. With --budget, rounds
are added after the first --repeat rounds while verdicts are undecided and time allows; the 5% is
spent over the planned looks so the added rounds do not inflate false positives.

With --servers old=SPEC,new=SPEC (an upgrade check) every round runs every server under every
allocator once, paired by round: the run ends with NEW/BASE per allocator (throughput, p95,
memory) and whether each allocator's standing against the baseline carries over to the new build.

Options override the suite file; the suite file documents every setting
(configs/suites/template.toml). Interrupt with Ctrl-C at any time: servers are stopped, THP is
restored, and `--resume RUN_DIR` later runs only the cells that did not finish.
"""


def _csv_list(kind):
    def parse(text: str):
        items = [x.strip() for x in text.split(",")]
        if not any(items):
            raise argparse.ArgumentTypeError("expected a comma-separated list")
        if not all(items):  # "glibc,,jemalloc": a name was lost; never guess which
            raise argparse.ArgumentTypeError(f"{text!r} has an empty item; remove the extra comma")
        if kind is int:
            try:
                return [parse_int(x) for x in items]
            except ValueError:
                raise argparse.ArgumentTypeError(
                    f"expected whole numbers in ASCII digits (0-9), got {text!r}"
                ) from None
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
    p.add_argument(
        "--duration",
        type=ascii_float,
        metavar="S",
        help="seconds per level (under design alternate: seconds per block, run.block_s)",
    )
    p.add_argument(
        "--warmup", type=ascii_float, metavar="S", help="warmup cap in seconds (0 = scans only)"
    )
    p.add_argument(
        "--repeat", type=ascii_int, metavar="N", help="rounds; allocator order alternates"
    )
    p.add_argument(
        "--budget",
        metavar="TIME",
        help="time budget (e.g. 20m, 90s, 1h): keep adding rounds while verdicts are undecided "
        "and one more round fits; --repeat is then the first look",
    )
    p.add_argument(
        "--soak",
        metavar="TIME",
        help="fragmentation suites: run the scenarios' cycles over and over in ONE server life "
        "per arm for this long (e.g. 30m, 2h, 6h; the suite key [fragmentation] soak). The arms' "
        "servers live side by side and take turns in blocks of cycles; cycles are checkpointed "
        "(--resume continues a killed soak and marks the break); it stops early once every "
        "growth verdict (MB/h) is decided, spending the 5%% over its looks",
    )
    p.add_argument(
        "--scenarios",
        type=_csv_list(str),
        metavar="S,S",
        help="fragmentation suites: run only these scenarios (dump, session_churn, table_cache, "
        "fulltext, spike). A soak of several scenarios judges growth once per arm (they share "
        "its life); soak one scenario per run (--soak 1h --scenarios dump) to say which "
        "scenario makes memory grow",
    )
    p.add_argument(
        "--baseline", metavar="NAME", help="allocator every verdict compares with (glibc)"
    )
    p.add_argument(
        "--min-effect",
        type=ascii_float,
        metavar="PCT",
        help="smallest difference called faster/slower, in %% (default 5)",
    )
    p.add_argument(
        "--design",
        choices=("solo", "alternate"),
        help="how arms are compared (run.design): solo = each server life alone, levels whole "
        "(scaling curves, memory at stop, per-op CPU); alternate = a round's servers alive "
        "together, each level run on them in turn in short blocks, so the machine's drift hits "
        "every arm alike (throughput verdicts on a shared machine; docs/designs.md)",
    )
    p.add_argument(
        "--thp",
        type=_csv_list(str),
        metavar="MODES",
        help="THP modes: system,always,madvise,never (system = leave as is)",
    )
    p.add_argument(
        "--engines",
        type=_csv_list(str),
        metavar="ENGINES",
        help="storage engines of the tables: innodb,rocksdb (MyRocks), a matrix dimension",
    )
    p.add_argument(
        "--server",
        metavar="NAME|PATH",
        help="server binary (mariadbd, mysqld of a Percona/MySQL install, mongod); with "
        "--server-root, a path inside the root",
    )
    p.add_argument(
        "--servers",
        metavar="NAME=SPEC,...",
        help="several servers in one run, interleaved and paired by round like the allocators "
        "(an upgrade check): e.g. old=fetched:mariadb-10.11.18,new=host; each SPEC is host, "
        "fetched:SPEC, root:DIR, basedir:DIR or a server binary. Verdicts NEW/BASE per allocator "
        "and whether the best allocator changes",
    )
    p.add_argument(
        "--baseline-server",
        metavar="NAME",
        help="the server of --servers every other is compared with (default: the first)",
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
    p.add_argument(
        "--shard",
        metavar="K/N",
        help="run only the K-th of N shares of the matrix (whole rounds, dealt 1..N then N..1), "
        "for a fleet of identical hosts; join the shards with `mallocsweep merge`",
    )
    p.add_argument(
        "--client-host",
        metavar="USER@HOST",
        help="run sysbench on this host over SSH against [clients] server_address",
    )
    p.add_argument("--no-report", action="store_true", help="skip report.html/summary.md")
    p.add_argument("--quiet", action="store_true", help="no progress display")
    p.set_defaults(func=run)


_UNITS = {"s": 1, "m": 60, "h": 3600}


def duration_arg(text: str | None, flag: str = "--budget") -> float | None:
    """'20m', '90s', '1.5h' or plain seconds -> seconds; a bad value is a one-line user error."""
    if text is None:
        return None
    t = text.strip().lower()
    unit = _UNITS.get(t[-1:], None)
    number = t[:-1] if unit else t
    try:
        value = parse_float(number) * (unit or 1)
    except ValueError:
        raise SuiteError(f"{flag} {text}: expected a duration like 20m, 90s or 1h") from None
    if not math.isfinite(value) or value <= 0:
        raise SuiteError(f"{flag} {text}: expected a positive, finite duration like 20m")
    return value


def final_table(run_dir: Path) -> list[Table]:
    """allocator x threads: QPS and p95 for each workload, the medians over repeats computed by
    analysis (the report's own points), so the console and the report cannot disagree."""
    from analysis.point_tables import points, series_of
    from rundir.read import load_run
    from suites.workloads.registry import REGISTRY, Workload

    run = load_run(run_dir)
    plugin = REGISTRY.get(run.kind, Workload())  # a kind this version lacks: plain headings
    tables = []
    for workload in run.workloads:
        threads = run.threads(workload)
        qps, p95 = points(run, workload, "qps"), points(run, workload, "lat_p95_ms")
        ok = {
            (r["server"], r["allocator"], r["thp"], r["threads"])
            for r in run.ok_rows
            if r["workload"] == workload
        }
        rate, lat = plugin.console_units(workload)
        t = Table(title=f"{workload}: {rate} / {lat} (median over repeats)")
        t.add_column("allocator (thp)")
        for n in threads:
            t.add_column(str(n), justify="right")
        for s in series_of(run):
            if not any(
                r["workload"] == workload
                and r["allocator"] == s.allocator
                and r["thp"] == s.thp
                and r["server"] == s.server
                for r in run.rows
            ):
                continue  # fmt: skip
            cells = []
            for n in threads:
                if (s.server, s.allocator, s.thp, n) not in ok:
                    cells.append("[red]failed[/red]")
                    continue
                q, p = qps.get((s, n)), p95.get((s, n))
                q_text = "?" if q is None else f"{q.median:,.0f}"
                p_text = "?" if p is None else f"{p.median:.2f}"
                cells.append(f"{q_text} / {p_text}")
            label = f"{s.allocator} ({s.thp})" + (f" {s.server}" if len(run.servers) > 1 else "")
            t.add_row(label, *cells)
        tables.append(t)
    return tables


def run(args) -> int:
    from suites.runner.display import Display
    from suites.runner.matrix import run_suite
    from suites.runner.shard import parse_shard
    from suites.suite.model import load_suite
    from suites.suite.overrides import apply_overrides

    if args.repeat is not None and args.repeat <= 0:
        raise SuiteError(f"--repeat {args.repeat}: expected a positive number of rounds")
    budget = duration_arg(args.budget)
    shard = parse_shard(args.shard)
    if shard is not None and args.resume is not None:
        raise SuiteError(f"--shard {args.shard} with --resume: a resumed shard keeps its own cells")
    # The suite file and every option are checked before any run directory is looked at: a
    # resume of a finished run does not hide a missing suite file or a bad option.
    loaded = load_suite(args.suite)
    overrides = dict(
        allocators=args.allocators,
        threads=args.threads,
        duration=args.duration,
        warmup=args.warmup,
        repeat=args.repeat,
        thp=args.thp,
        server=args.server,
        servers=args.servers,
        baseline_server=args.baseline_server,
        budget=budget,
        soak=duration_arg(args.soak, "--soak"),
        scenarios=args.scenarios,
        baseline=args.baseline,
        min_effect=args.min_effect,
        server_root=args.server_root,
        client_host=args.client_host,
        engines=args.engines,
        design=args.design,
    )
    given = any(v is not None for v in overrides.values())
    suite = apply_overrides(loaded.suite, **overrides, out=args.out)
    if args.resume is not None:
        from suites.runner.resume import check_run_dir

        found = check_run_dir(args.resume)
        if _complete(args.resume, found.manifest):
            return 0
        if not given:
            # Resuming without options: the settings are the ones the run was started with.
            suite = resumed_suite(loaded, args.resume)
    if shard is not None:
        if suite.run.budget_s:
            raise SuiteError(
                f"--shard {args.shard} with a time budget: every shard would add rounds of its "
                "own; shard a fixed number of rounds (--repeat)"
            )
        shard.check_rounds(suite.run.repeat)
    display = Display(enabled=not args.quiet)
    code, run_dir = run_suite(loaded, suite, args.resume, display, shard=shard)
    return _finish(args, code, run_dir)


def _complete(run_dir: Path, manifest: dict) -> bool:
    """A run that finished with every cell ok has nothing to resume: say so and touch nothing
    (its finished_at, preflight record and report stay as they were)."""
    cells = manifest["cells"]
    if manifest.get("status") != "finished" or any(c.get("status") != "ok" for c in cells):
        return False  # --resume runs the cells that are not ok
    print(
        f"{run_dir}: the run is complete ({len(cells)} cells ok, finished "
        f"{manifest.get('finished_at')}); nothing to resume, nothing changed"
    )
    return True


def resumed_suite(loaded, run_dir: Path):
    """The suite as the run recorded it, provided the suite file is still the same."""
    import json

    from suites.suite.model import suite_from_dict

    try:
        m = json.loads((Path(run_dir) / "manifest.json").read_text(encoding="utf-8"))
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


# By the verdict's outcome (analysis/metrics.py), whatever the metric's words.
# outcome -> colour; "cannot matter" is analysis.exposure.CANNOT_MATTER (decided from exposure)
STYLE = {
    "better": "green",
    "worse": "red",
    "none": "dim",
    "undecided": "yellow",
    "cannot matter": "dim",
}


def verdict_tables(run_dir: Path, baseline: str | None = None) -> tuple[list[Table], list[str]]:
    """The end-of-run tables: per workload, allocator x threads, each cell the ratio to the
    baseline, its interval and the verdict; memory likewise. With one round there is no verdict:
    ([], [why]) and the caller shows the raw single figures, labelled as such."""
    from analysis.metrics import THROUGHPUT, UNDECIDED
    from analysis.verdict_tables import aa_alarm_text, forecast_text, ratio_ci
    from analysis.verdicts import (
        FORECAST_PCT,
        aa_alarm,
        baseline_of,
        forecast,
        noise_floor,
        paired_noise,
        run_verdicts,
        why_no_verdicts,
    )
    from rundir.read import load_run

    run = load_run(run_dir)
    base = baseline_of(run, baseline)
    why = why_no_verdicts(run, base)
    if why:
        return [], [f"no verdicts: {why}"]
    judged = run_verdicts(run, base)
    out, notes = upgrade_tables(run, judged, base)
    for label in [*run.workloads, "memory"]:
        vs = [v for v in judged if (v.workload or "memory") == label]
        if not vs:
            continue
        # a thread level per throughput point; a metric's name for memory, and for a
        # fragmentation scenario's growth and release beside its throughput
        cols = sorted({v.threads for v in vs if v.threads is not None}) + list(
            dict.fromkeys(v.metric for v in vs if v.threads is None)
        )
        # growth in MB/h is a difference (no ratio); a soak's is one life per arm, not rounds
        what = "difference from" if all(v.unit for v in vs) else "ratio to"
        lives = (
            "one life per arm (soak)"
            if (run.manifest.get("soak") or {}).get("seconds")
            else f"{vs[0].rounds} rounds"
        )
        t = Table(title=f"{label}: {what} {base} \\[interval] verdict, {lives}")
        t.add_column("allocator (thp)")
        for c in cols:
            t.add_column(str(c), justify="right")
        # Several servers (one per engine: "...+rocksdb") each get their own rows.
        several = len({v.server for v in vs}) > 1
        for server, alloc, thp in dict.fromkeys((v.server, v.allocator, v.thp) for v in vs):
            cells = []
            for c in cols:
                v = next(
                    (
                        x
                        for x in vs
                        if (x.server, x.allocator, x.thp) == (server, alloc, thp)
                        and (x.threads if x.threads is not None else x.metric) == c
                    ),
                    None,
                )
                cells.append(
                    "–"
                    if v is None
                    else f"{ratio_ci(v)} [{STYLE.get(v.verdict, 'bold')}]{v.word}[/]"
                )
            t.add_row(f"{alloc} ({thp})" + (f" {server}" if several else ""), *cells)
        out.append(t)
    nf = noise_floor(run, judged)
    if nf.aa_points:
        notes.append(
            f"noise floor: A/A ratios {nf.aa_ratio_min:.2f}-{nf.aa_ratio_max:.2f}, interval "
            f"±{nf.aa_half_width_pct_median:.1f}% median (±{nf.aa_half_width_pct_max:.1f}% widest)"
        )
    paired = paired_noise(run, base)
    if paired is not None:
        notes.append(
            f"noise the verdicts saw: ±{(math.exp(paired.sigma) - 1) * 100:.1f}% per server life "
            "(paired differences to the baseline)"
        )
    fc = forecast(run, base)
    if fc is not None and any(
        v.metric == THROUGHPUT and v.verdict == UNDECIDED for v in judged
    ):  # what deciding would take, where the run left a throughput point undecided
        notes.append(f"rounds for a ±{FORECAST_PCT:g}% interval at this noise: {forecast_text(fc)}")
    if nf.life_spread_pct_median is not None:
        notes.append(
            f"spread of repeated server lives: ±{nf.life_spread_pct_median:.1f}% median "
            f"(±{nf.life_spread_pct_max:.1f}% largest)"
        )
    alarm = aa_alarm(judged)
    if alarm:
        notes.insert(0, aa_alarm_text(alarm))
    soak = run.manifest.get("soak") or {}
    if soak.get("seconds"):
        # why the soak stopped (its time, every growth verdict decided, an arm that ended), and
        # what its one life per arm can and cannot decide
        from analysis.verdicts import SOAK_ONE_LIFE

        looks = soak.get("looks") or []
        how = f"{len(looks)} look(s) of {soak.get('looks_planned')} planned"
        if soak.get("stages"):  # scenarios apart: each stage its own time and looks
            how = ", ".join(
                f"{x['scenario']} {len(x.get('looks') or [])}/{x.get('looks_planned') or 0} looks "
                f"in {float(x.get('ran_s') or 0) / 3600:.2f} h"
                for x in soak["stages"]
            )
        notes.insert(
            0,
            f"soak: {soak.get('stopped') or 'not finished'}; {how}, "
            f"{soak.get('done_s', 0) / 3600:.2f} h soaked",
        )
        notes += [n for n in judged.notices if n == SOAK_ONE_LIFE]
    return out, notes


def upgrade_tables(run, judged, base: str) -> tuple[list[Table], list[str]]:
    """A run with several servers: the upgrade's glance (per allocator, NEW/BASE and whether its
    standing against the baseline allocator carries over) and the throughput NEW/BASE and
    interaction tables, as the report has them (analysis/upgrade.py); ([], []) otherwise."""
    from analysis import upgrade

    if not upgrade.several(run):
        return [], []
    uv = upgrade.upgrade_verdicts(run, base)
    glance = upgrade.glance_table(run, judged, uv, base)
    shown = [glance, *upgrade.verdict_tables(run, uv, (upgrade.THROUGHPUT, upgrade.INTERACTION))]
    differs = upgrade.differences_table(run)
    if differs is not None:
        shown.append(differs)
    return [_rich(t) for t in shown if t.rows], list(glance.notes)


def _rich(t) -> Table:
    """An analysis.table_model.Table on the console (its figures as the report shows them)."""
    out = Table(title=t.title)
    for c in t.columns:
        out.add_column(c)
    for row in t.rows:
        out.add_row(*(escape(c.text) for c in row))
    return out


def _finish(args, code: int, run_dir: Path) -> int:
    """Tables, report and verdicts of a run whose data is already written. A failure to render
    them (a bug, a damaged file, a full disk) never changes the run's exit code or its data: one
    line says how to render them again."""
    try:
        _render(args, run_dir)
    except Exception as e:  # noqa: BLE001 - the run's outcome is decided; this is its view
        if os.environ.get("MALLOCSWEEP_DEBUG"):
            raise
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        print(
            f"mallocsweep: the report could not be rendered ({first}); the run's data is intact:"
            f" render it again with `mallocsweep report {run_dir}`",
            file=sys.stderr,
        )
    print(f"run directory: {run_dir}")
    if code == 3:
        print("some cells or levels failed; see the report's 'Failures' section", file=sys.stderr)
    return code


def _render(args, run_dir: Path) -> None:
    from suites.runner.display import stdout_console

    out = stdout_console()  # logs and CI read this table too
    tables, notes = verdict_tables(run_dir)
    for t in tables or final_table(run_dir):
        out.print(t)
    for n in notes:
        out.print(n, markup=False, highlight=False)
    if not args.no_report:
        from analysis.report import write_report

        html, md = write_report(run_dir)
        print(f"report:  {html}")
        print(f"summary: {md}")
    else:
        from analysis.report import write_verdicts
        from rundir.read import load_run

        write_verdicts(load_run(run_dir))
    print(f"verdicts: {run_dir / 'verdicts.csv'}")
