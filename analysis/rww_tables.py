"""The read-while-writing tables in the Symas 2015 layout, from a run's results.

Per server label (one per engine: "mariadb-10.11.19" is InnoDB, "...+rocksdb" MyRocks), one row
per allocator (and THP mode, when several):
  Load: ops/s, usr, sys, %, wall, RSS  |  Run: write ops/s, read ops/s, usr, sys, %, wall, RSS
where usr/sys are the server process's CPU seconds over the level's measured window (which for
this workload spans the whole load: from the first report at t=0 to the last, when the last
operation returned), % is (usr + sys) / wall, the study's CPU "overhead", wall that window, and
RSS the server's resident memory when the level ended (kB, as the study gave it). Then the RSS
comparison the study drew its conclusion from: each allocator's run-end RSS over glibc's.
Figures are medians over rounds (the study averaged its 3 runs).
"""

from __future__ import annotations

from collections import defaultdict

from analysis.stats import median
from analysis.table_model import Cell, Table, count, num, ratio_text, text
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


def rss_ratio_table(run: Run) -> Table | None:
    """Run-end RSS of each allocator over glibc's, per server label (engine), beside the study's
    RocksDB figures."""
    by: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in run.ok_rows:
        if r["workload"] == RUN and r.get("rss_end_kb") is not None:
            by[(r["server"], r["allocator"])].append(r["rss_end_kb"])
    if not by:
        return None
    t = Table(
        "rww-rss",
        "Read-while-writing: RSS at the end of the run against glibc",
        "The study's largest allocator effect was memory: RocksDB ended its read-while-writing "
        "run at 2.26 GB under glibc, 1.25 GB under jemalloc (0.55x) and 1.30 GB under tcmalloc "
        "(0.57x). Here: each allocator's median RSS when the run level ended, over glibc's on the "
        "same server and engine.",
        ["server (engine)", "allocator", "RSS kB", "ratio to glibc", "Symas 2015 RocksDB ratio"],
    )
    for server in dict.fromkeys(s for s, _ in by):
        base = by.get((server, BASELINE_ALLOCATOR))
        base_med = median(base) if base else None
        for (s, alloc), vals in by.items():
            if s != server:
                continue
            med = median(vals)
            ratio = med / base_med if base_med else None
            seed = SEED_RSS_KB.get(alloc)
            seed_ratio = seed / SEED_RSS_KB[BASELINE_ALLOCATOR] if seed else None
            t.rows.append(
                [
                    text(server),
                    text(alloc),
                    count(med),
                    Cell(ratio, ratio_text(ratio)),
                    Cell(seed_ratio, ratio_text(seed_ratio)) if seed_ratio else text(""),
                ]
            )
    return t
