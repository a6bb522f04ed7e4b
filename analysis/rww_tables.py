"""The read-while-writing tables in the Symas 2015 layout, from a run's results.

Per server label (one per engine: "mariadb-10.11.19" is InnoDB, "...+rocksdb" MyRocks), one row
per allocator (and THP mode, when several):
  Load: ops/s, usr, sys, %, wall, RSS  |  Run: write ops/s, read ops/s, usr, sys, %, wall, RSS
where usr/sys are the server process's CPU seconds over the level's measured window (which for
this workload spans the whole load: from the first report at t=0 to the last, when the last
operation returned), % is (usr + sys) / wall, the study's CPU "overhead", wall that window, and
RSS the server's resident memory when the level ended (kB, as the study gave it). Then the RSS
comparison the study drew its conclusion from: each allocator's run-end RSS over glibc's, paired
by round, with its 95% interval and a verdict in memory words (rss_ratios).
Figures are medians over rounds (the study averaged its 3 runs).
"""

from __future__ import annotations

import math
from collections import defaultdict

from analysis.judge import judge
from analysis.metrics import METRICS, RSS_STOP
from analysis.stats import median
from analysis.table_model import Cell, Table, count, num, ratio_text, text
from analysis.verdicts import design_of
from rundir.read import BASELINE_ALLOCATOR, Run

LOAD, RUN = "rww_load", "rww_run"
# Symas 2015, RocksDB (db_bench readwhilewriting, 1 writer + 16 readers, 2M x 4,000 bytes): RSS at
# the end of the run, averaged over 3 runs, kB — the comparison this suite reproduces.
SEED_RSS_KB = {"glibc": 2258294.67, "jemalloc": 1248504.00, "tcmalloc": 1296916.00}


def _med(rows, key):
    vals = [r.get(key) for r in rows if r.get(key) is not None]
    return median(vals) if vals else None


def _pct(rows):
    vals = [r["cpu_overhead"] * 100 for r in rows if r.get("cpu_overhead") is not None]
    return median(vals) if vals else None


def _series(run: Run, server: str) -> list[tuple[str, str]]:
    present = {(r["allocator"], r["thp"]) for r in run.ok_rows if r["server"] == server}
    return sorted(present, key=lambda s: (s[0] != BASELINE_ALLOCATOR, s[0], s[1]))


def _rows(run: Run, server: str, alloc: str, thp: str, workload: str) -> list[dict]:
    return [
        r
        for r in run.ok_rows
        if (r["server"], r["allocator"], r["thp"], r["workload"]) == (server, alloc, thp, workload)
    ]


def _engine(run: Run, server: str) -> str:
    return next(
        (r.get("engine") for r in run.rows if r["server"] == server and r.get("engine")), ""
    )


def symas_tables(run: Run) -> list[Table]:
    """One table per server label (engine) that ran read-while-writing."""
    servers = list(dict.fromkeys(r["server"] for r in run.ok_rows if r["workload"] in (LOAD, RUN)))
    several_thp = len(run.thp_modes) > 1
    out = []
    for server in servers:
        engine = _engine(run, server) or "innodb"
        t = Table(
            f"rww-{server}",
            f"Read-while-writing on {engine} ({server}), in the Symas 2015 layout",
            "Load: one client inserts the rows in key order, a batch per INSERT (ops/s = rows/s). "
            "Run: 1 writer updating random rows and the readers reading random rows, until every "
            "reader has read as many rows as the table holds. usr/sys: the server's CPU seconds "
            "over the level (its measured window), %: (usr + sys) / wall, the study's CPU "
            "overhead; RSS: the server's resident memory when the level ended (kB). Medians over "
            "rounds.",
            (["allocator"] + (["THP"] if several_thp else []))
            + ["Load ops/s", "usr s", "sys s", "%", "wall s", "RSS kB"]
            + ["Run write ops/s", "read ops/s", "usr s", "sys s", "%", "wall s", "RSS kB"],
        )
        for alloc, thp in _series(run, server):
            load = _rows(run, server, alloc, thp, LOAD)
            mixed = _rows(run, server, alloc, thp, RUN)
            cells = [text(alloc)] + ([text(thp)] if several_thp else [])
            for rows, rates in ((load, ("qps",)), (mixed, ("write_ops_s", "read_ops_s"))):
                cells += [num(_med(rows, k)) for k in rates]
                cells += [
                    num(_med(rows, "cpu_user_s")),
                    num(_med(rows, "cpu_sys_s")),
                    num(_pct(rows)),
                    num(_med(rows, "window_s")),
                    count(_med(rows, "rss_end_kb")),
                ]
            t.rows.append(cells)
        rounds = {r["repeat"] for r in run.ok_rows if r["server"] == server}
        t.notes.append(f"{len(rounds)} round(s) per allocator.")
        out.append(t)
    return out


def _rss_by_round(run: Run) -> dict[str, dict[str, dict[int, float]]]:
    """server -> allocator -> round -> RSS (kB) when the run level ended (one per server life)."""
    by: dict[str, dict[str, dict[int, float]]] = defaultdict(lambda: defaultdict(dict))
    for r in run.ok_rows:
        if r["workload"] == RUN and r.get("rss_end_kb") is not None:
            by[r["server"]][r["allocator"]][r["repeat"] or 1] = r["rss_end_kb"]
    return by


def rss_ratios(run: Run) -> list[dict]:
    """Each allocator's run-end RSS over glibc's, per server label (engine), glibc first: the
    median RSS, the paired ratio, and with 2+ rounds the 95% interval of the paired block design (rounds are blocks, log
    scale, as the run's memory verdicts) and its verdict in memory words."""

    design = design_of(run)
    out = []
    for server, values in _rss_by_round(run).items():
        base = values.get(BASELINE_ALLOCATOR) or {}
        base_med = median(list(base.values())) if base else None
        judged = judge(METRICS[RSS_STOP], values, BASELINE_ALLOCATOR, design, where=server)
        for alloc, vals in sorted(values.items(), key=lambda kv: kv[0] != BASELINE_ALLOCATOR):
            med = median(list(vals.values()))
            j = judged.arms.get(alloc)
            lo = hi = None
            word = ""
            if j is not None and math.isfinite(j.lo):
                lo, hi, word = j.lo, j.hi, METRICS[RSS_STOP].word(j.verdict)
            out.append(
                {
                    "server": server,
                    "allocator": alloc,
                    "rss_kb": med,
                    "rounds": len(vals),
                    # paired (the geometric mean of the per-round ratios, which the interval
                    # is around); the ratio of medians when no round pairs it with glibc
                    "ratio": j.ratio
                    if j is not None
                    else (med / base_med if base_med and alloc != BASELINE_ALLOCATOR else None),
                    "lo": lo,
                    "hi": hi,
                    "verdict": word,
                    "notice": judged.notice,  # the judge refused the server's point: why
                }
            )
    return out


def rss_ratio_table(run: Run) -> Table | None:
    """Run-end RSS of each allocator over glibc's, per server label (engine), with its interval
    and verdict, beside the study's RocksDB figures."""
    ratios = rss_ratios(run)
    if not ratios:
        return None
    engines = {x["server"]: _engine(run, x["server"]) or "innodb" for x in ratios}
    t = Table(
        "rww-rss",
        "Read-while-writing: RSS at the end of the run against glibc",
        "The study's largest allocator effect was memory: RocksDB ended its read-while-writing "
        "run at 2.26 GB under glibc, 1.25 GB under jemalloc (0.55x) and 1.30 GB under tcmalloc "
        "(0.57x). Here: each allocator's median RSS when the run level ended, and its ratio to "
        "glibc's on the same server and engine (the geometric mean of the per-round ratios); the "
        "interval is the 95% interval of the ratio with rounds as "
        "blocks (each round's RSS paired with glibc's of the same round, log scale), and the "
        'verdict says "less memory" or "more memory" only when the whole interval is on one '
        "side of 1.0 and the ratio is beyond the minimum effect.",
        [
            "server (engine)",
            "allocator",
            "RSS kB",
            "ratio to glibc",
            "95% interval",
            "verdict",
            "Symas 2015 RocksDB ratio",
        ],
    )
    for x in ratios:
        # the study measured RocksDB only: its ratio stands beside MyRocks rows, not InnoDB's
        seed = SEED_RSS_KB.get(x["allocator"]) if engines.get(x["server"]) == "rocksdb" else None
        seed_ratio = seed / SEED_RSS_KB[BASELINE_ALLOCATOR] if seed else None
        if x["allocator"] == BASELINE_ALLOCATOR:
            seed_ratio = None
        interval = (
            f"{x['lo']:.2f}–{x['hi']:.2f}" if x["lo"] is not None and x["hi"] is not None else ""
        )
        t.rows.append(
            [
                text(x["server"]),
                text(x["allocator"]),
                count(x["rss_kb"]),
                Cell(x["ratio"], ratio_text(x["ratio"])),
                text(interval),
                text(x["verdict"]),
                Cell(seed_ratio, ratio_text(seed_ratio)) if seed_ratio else text(""),
            ]
        )
    if any(x["rounds"] < 2 for x in ratios):
        t.notes.append("An allocator with one round has no interval and no verdict.")
    t.notes += list(dict.fromkeys(x["notice"] for x in ratios if x["notice"]))
    return t
