"""The report's hugepage section: the three questions a DBA asks, answered in words first, then the
verdict table, where the huge pages were, and what the kernel spent making them.

1. Should THP be on for this server with this allocator? Each THP setting against `never`, per
   allocator: throughput and p95 at the heaviest level of each workload, memory at stop and its
   growth (analysis/hugepage_verdicts.py), and whether THP reached the heap at all (a server that
   turns THP off for itself gets huge pages on its buffer pool only).
2. Should the buffer pool use explicit huge pages? The large-pages settings against `never`,
   memory counted as RSS plus hugetlb pages (hugetlb pages are not in RSS), with what the
   reservation takes up front.
3. What does the kernel spend making huge pages? Per server life: THP faults served and fallen
   back, khugepaged's collapses and CPU seconds, compaction stalls and failures (/proc/vmstat:
   system-wide, so read with the machine's other work in mind).
"""

from __future__ import annotations

import math
from collections import defaultdict

from analysis import memory
from analysis.hugepage_tables import cell_process_thp
from analysis.hugepage_verdicts import (
    BASELINE,
    HugepageVerdict,
    baseline_of,
    hugepage_verdicts,
    why_none,
)
from analysis.metrics import (
    BETTER,
    LAT_P95,
    MEMORY_GROWTH,
    MEMORY_STOP,
    METRICS,
    NONE,
    THROUGHPUT,
    UNDECIDED,
    WORSE,
)
from analysis.stats import median
from analysis.table_model import Cell, Table, count, fmt, num, text
from analysis.verdicts import design_of
from rundir.read import Run

LARGE = "large-pages"
QUESTIONS = (
    "Should THP be on for this server with this allocator?",
    "Should the buffer pool use explicit huge pages?",
    "What does the kernel spend making huge pages?",
)
COST_COUNTERS = (
    ("thp_fault_alloc", "THP faults"),
    ("thp_fault_fallback", "fault fallbacks"),
    ("thp_collapse_alloc", "khugepaged collapses"),
    ("compact_stall", "compaction stalls"),
    ("compact_fail", "compaction failures"),
)


def is_large(setting: str) -> bool:
    return setting.endswith("+" + LARGE)


def interval(v: HugepageVerdict) -> str:
    if not (math.isfinite(v.lo) and math.isfinite(v.hi)):
        return f"{v.ratio:.2f}×"
    return f"{v.ratio:.2f}× [{v.lo:.2f}–{v.hi:.2f}]"


def said(v: HugepageVerdict) -> str:
    """One verdict in words: "1.03× [0.98–1.08], no difference beyond 5%"."""
    if v.verdict == NONE:
        tail = "no difference beyond the minimum effect"
    elif v.verdict == UNDECIDED:
        tail = "undecided" if math.isfinite(v.lo) else "one round, no interval"
    else:
        tail = v.word
    return f"{interval(v)}, {tail}"


def _heaviest(vs: list[HugepageVerdict], metric: str) -> list[HugepageVerdict]:
    """Per workload, the verdict at its highest thread level."""
    top: dict[str, HugepageVerdict] = {}
    for v in vs:
        if v.metric == metric and (v.workload not in top or v.threads > top[v.workload].threads):
            top[v.workload] = v
    return list(top.values())


def _tally(vs: list[HugepageVerdict]) -> str:
    n: dict[str, int] = defaultdict(int)
    for v in vs:
        n[v.word] += 1
    return ", ".join(f"{k} {c}" for k, c in sorted(n.items(), key=lambda kv: -kv[1]))


def _advice(vs: list[HugepageVerdict], setting: str, baseline: str) -> str:
    """What the verdicts add up to, as advice (never stronger than they are)."""
    thr = [v for v in vs if v.metric == THROUGHPUT]
    mem = next((v for v in vs if v.metric == MEMORY_STOP), None)
    faster = any(v.verdict == BETTER for v in thr)
    slower = any(v.verdict == WORSE for v in thr)
    more = mem is not None and mem.verdict == WORSE
    less = mem is not None and mem.verdict == BETTER
    decided = all(v.verdict in (BETTER, WORSE, NONE) for v in thr + ([mem] if mem else []))
    if slower and not faster:
        return f"{setting} costs throughput here: keep {baseline}"
    if faster and not slower:
        return (
            f"{setting} buys throughput for memory: a trade, not a free win"
            if more
            else f"{setting} helps here: worth turning on"
        )
    if more and not faster:
        return f"{setting} costs memory and buys no throughput that could be shown: keep {baseline}"
    if less and not (faster or slower):
        return f"{setting} saves memory without a throughput difference that could be shown"
    if decided:
        return f"{setting} makes no difference here beyond the minimum effect"
    return f"not decided: more rounds would tell whether {setting} matters here"


def _sentence(run: Run, server: str, alloc: str, setting: str, vs: list[HugepageVerdict]) -> str:
    parts = []
    for v in _heaviest(vs, THROUGHPUT):
        parts.append(f"throughput at {v.point} {said(v)}")
    for v in _heaviest(vs, LAT_P95):
        parts.append(f"p95 at {v.point} {said(v)}")
    for metric in (MEMORY_STOP, MEMORY_GROWTH):
        v = next((x for x in vs if x.metric == metric), None)
        if v is not None:
            parts.append(f"{METRICS[metric].text} {said(v)}")
    thr = [v for v in vs if v.metric == THROUGHPUT]
    over = (
        f" (over all {len(thr)} levels: {_tally(thr)})"
        if len(thr) > len(_heaviest(vs, THROUGHPUT))
        else ""
    )
    reach = _reach(run, server, alloc, setting)
    return (
        f"On {server} with {alloc}, {setting} against {BASELINE}: "
        + "; ".join(parts)
        + over
        + (f". {reach}" if reach else "")
        + f". {_advice(vs, setting, BASELINE).capitalize()}."
    )


def _cells(run: Run, server: str, alloc: str, setting: str) -> list[str]:
    return sorted(
        {
            r["cell"]
            for r in run.rows
            if r["server"] == server and r["allocator"] == alloc and r["thp"] == setting
        }
    )


def _reach(run: Run, server: str, alloc: str, setting: str) -> str:
    """Where THP could reach, when that is not the whole process."""
    states = {cell_process_thp(run, c) for c in _cells(run, server, alloc, setting)}
    enabled = {
        ((run.cell(c).get("thp") or {}).get("in_force") or {}).get("enabled")
        for c in _cells(run, server, alloc, setting)
    }
    if states == {0} and enabled & {"always", "madvise"}:
        return (
            "The server turned THP off for itself (THP_enabled 0), so THP reached its buffer pool"
            " only, never the allocator's heap"
        )
    return ""


def _pool_text(run: Run, server: str, alloc: str, setting: str) -> str:
    """What the large-pages cells reserved and proved."""
    proofs, reserved = [], []
    for c in _cells(run, server, alloc, setting):
        lp = (run.cell(c).get("thp") or {}).get("large_pages") or {}
        if lp.get("proof"):
            proofs.append(lp["proof"])
        if lp.get("needed"):
            reserved.append(lp["needed"] * lp.get("page_kb", 2048) / 1024)
    if not proofs:
        return ""
    p = proofs[0]
    mb = f"{max(reserved):,.0f} MB" if reserved else "its pages"
    return (
        f"Its buffer pool was proven on hugetlb pages in {len(proofs)} of"
        f" {len(_cells(run, server, alloc, setting))} lives ({p.get('pool_mappings')} mapping(s) of"
        f" {fmt((p.get('pool_kb') or 0) / 1024)} MB, KernelPageSize {p.get('pool_page_kb')} kB);"
        f" the cell reserved {mb} of explicit huge pages up front, which no other process could"
        " use meanwhile"
    )


def answers(run: Run, verdicts: list[HugepageVerdict]) -> list[dict]:
    """The three questions, each with its answers in words (one sentence per server, allocator
    and setting); a question the run did not study says so."""
    groups: dict[tuple, list[HugepageVerdict]] = defaultdict(list)
    for v in verdicts:
        groups[(v.server, v.allocator, v.setting)].append(v)
    thp, large = [], []
    for (server, alloc, setting), vs in groups.items():
        text_ = _sentence(run, server, alloc, setting, vs)
        if is_large(setting):
            pool = _pool_text(run, server, alloc, setting)
            large.append(text_ + (f" {pool}." if pool else ""))
        else:
            thp.append(text_)
    why = why_none(run)
    settings = [s for s in run.thp_modes if s != BASELINE]
    if why:
        thp = thp or [f"No verdicts: {why}."]
    if not [s for s in settings if not is_large(s)]:
        thp = [f"Not studied: this run had no THP setting besides {BASELINE}."]
    if not [s for s in settings if is_large(s)]:
        large = [
            "Not studied: no cell put the buffer pool on explicit huge pages ([thp] large_pages)."
        ]
    elif why and not large:
        large = [f"No verdicts: {why}."]
    return [
        {"question": QUESTIONS[0], "answers": thp},
        {"question": QUESTIONS[1], "answers": large},
        {"question": QUESTIONS[2], "answers": cost_words(run)},
    ]


# -- the kernel's cost and where the huge pages were ------------------------------------------
def _life(run: Run, cid: str) -> dict:
    """One server life's hugepage figures (whole life: startup to stop)."""
    cell = run.cell(cid)
    delta = (cell.get("thp") or {}).get("vmstat_delta") or {}
    coll = cell.get("collectors") or {}
    khuge = coll.get("khugepaged_cpu_s") if isinstance(coll, dict) else None
    mem = (cell.get("memory") or {}).get("server_stop") or {}
    wall = None
    phases = coll.get("phases") if isinstance(coll, dict) else None
    if isinstance(phases, dict):
        walls = [p.get("wall_s") for p in phases.values() if isinstance(p, dict)]
        wall = sum(w for w in walls if w is not None) or None
    return {
        **{k: delta.get(k) for k, _ in COST_COUNTERS},
        "khugepaged_cpu_s": khuge,
        "life_s": wall,
        "anon_huge_kb": mem.get("anon_huge_kb"),
        "heap_anon_huge_kb": mem.get("heap_anon_huge_kb"),
        "pool_anon_huge_kb": mem.get("pool_anon_huge_kb"),
        "hugetlb_kb": mem.get("hugetlb_kb"),
        "rss_kb": mem.get("rss_kb"),
    }


def _med(values) -> float | None:
    vals = [v for v in values if v is not None]
    return median(vals) if vals else None


def _series(run: Run) -> list[tuple[str, str, str]]:
    order = {s: i for i, s in enumerate(run.thp_modes)}
    keys = {(r["server"], r["allocator"], r["thp"]) for r in run.rows}
    allocs = {a: i for i, a in enumerate(run.allocators)}
    return sorted(keys, key=lambda k: (k[0], allocs.get(k[1], 99), order.get(k[2], 99)))


def _lives(run: Run, key: tuple[str, str, str]) -> list[dict]:
    ok = memory.complete_cells(run)
    return [_life(run, c) for c in _cells(run, *key) if c in ok]


def cost_table(run: Run) -> Table:
    t = Table(
        "hugepage-cost",
        "What the kernel spent making huge pages",
        "Per server life (median over lives): THP faults served with a huge page and those that "
        "fell back to small pages, small pages collapsed into huge ones by khugepaged, direct "
        "compaction stalls (a page fault waited while the kernel moved pages to make a 2 MB "
        "block) and compactions that failed, from /proc/vmstat over the server's whole life; and "
        "khugepaged's own CPU seconds (the kernel stops it under THP never, which shows as 0), also "
        "as a share of one CPU over the life. /proc/vmstat counts the whole machine: another "
        "process's huge pages count too, so read small numbers with that in mind. Per-level figures "
        "are in results.csv (compact_stall, compact_fail, khugepaged_cpu_s, thp_*).",
        ["server", "allocator", "hugepage setting", "lives"]
        + [name for _, name in COST_COUNTERS]
        + ["khugepaged CPU s", "khugepaged % of a CPU"],
    )
    for key in _series(run):
        lives = _lives(run, key)
        if not lives:
            continue
        cpu = _med(x["khugepaged_cpu_s"] for x in lives)
        share = _med(
            100 * x["khugepaged_cpu_s"] / x["life_s"]
            for x in lives
            if x["khugepaged_cpu_s"] is not None and x["life_s"]
        )
        t.rows.append(
            [text(key[0]), text(key[1]), text(key[2]), count(len(lives))]
            + [count(_med(x[k] for x in lives)) for k, _ in COST_COUNTERS]
            + [num(cpu), num(share)]
        )
    return t


def where_table(run: Run) -> Table:
    t = Table(
        "hugepage-where",
        "Where the huge pages were, at server stop",
        "Medians over server lives, MB, read from /proc/PID/smaps just before each server was asked"
        " to stop. THP huge pages (AnonHugePages) are split between the buffer pool's mapping and "
        "everything else (the heap's share: what the allocator got). hugetlb is the server's "
        "explicit huge pages (the buffer pool with large pages, plus a hugetlb heap such as "
        "glibc.malloc.hugetlb=2's): the kernel leaves them out of RSS, so memory is counted as "
        "RSS + hugetlb. 'process THP' is THP_enabled read back from the server's "
        "/proc/PID/status (0: the server turned THP off for itself).",
        ["server", "allocator", "hugepage setting", "process THP", "AnonHugePages",
         "of it the heap's", "of it the pool's", "hugetlb", "RSS", "RSS + hugetlb"],
    )  # fmt: skip
    for key in _series(run):
        lives = _lives(run, key)
        if not lives:
            continue
        states = sorted({str(cell_process_thp(run, c)) for c in _cells(run, *key)})

        def mb(k, lives=lives):
            v = _med(x[k] for x in lives)
            return num(None if v is None else v / 1024)

        total = _med(x["rss_kb"] + (x["hugetlb_kb"] or 0) for x in lives if x["rss_kb"] is not None)
        t.rows.append(
            [text(key[0]), text(key[1]), text(key[2]), text(", ".join(states))]
            + [mb("anon_huge_kb"), mb("heap_anon_huge_kb"), mb("pool_anon_huge_kb")]
            + [mb("hugetlb_kb"), mb("rss_kb"), num(None if total is None else total / 1024)]
        )
    return t


def cost_words(run: Run) -> list[str]:
    """Question 3 in words: per setting, the medians over every allocator's lives."""
    by_setting: dict[str, list[dict]] = defaultdict(list)
    for key in _series(run):
        by_setting[key[2]].extend(_lives(run, key))
    out = []
    for setting in run.thp_modes:
        lives = by_setting.get(setting) or []
        if not lives:
            continue
        fig = {k: _med(x[k] for x in lives) for k, _ in COST_COUNTERS}
        cpu = _med(x["khugepaged_cpu_s"] for x in lives)
        if not any(fig.values()) and not cpu:
            out.append(f"Under {setting}: nothing (no THP faults, collapses or compaction stalls).")
            continue
        bits = [f"{round(fig[k]):,} {name}" for k, name in COST_COUNTERS if fig[k] is not None]
        if cpu is not None:
            bits.append(f"khugepaged {fmt(cpu)} CPU s")
        out.append(f"Under {setting}, per server life (median of {len(lives)}): {', '.join(bits)}.")
    if not out:
        out.append("Not recorded: this run predates the kernel-cost readings (format 5).")
    else:
        out.append(
            "These counters are system-wide (/proc/vmstat): the machine's other work counts too."
        )
    return out


def verdict_table(run: Run, verdicts: list[HugepageVerdict]) -> Table:
    t = Table(
        "hugepage-verdicts",
        f"Hugepage settings against THP {BASELINE}, per allocator",
        f"Each setting's ratio to the same allocator under THP {BASELINE} (small pages, no THP), "
        "paired by round (each round ran every setting of every allocator once), with its "
        "interval: throughput and p95 at every level (above 1.00× = more throughput, or a higher "
        "p95), memory at server stop as RSS + hugetlb pages, and its growth from server start "
        "(additive, as a share of the baseline's memory at stop). The verdict says it in the "
        "metric's words: faster/slower, lower/higher p95, less/more memory, grows less/more; "
        "none = within the minimum effect; undecided = the interval still allows a difference "
        "beyond it.",
        ["server", "allocator", "setting", "point", "ratio [interval]", "verdict", "rounds"],
    )
    why = why_none(run)
    if why:
        t.notes.append(f"No verdicts: {why}.")
        return t
    order = {THROUGHPUT: 0, LAT_P95: 1, MEMORY_STOP: 2, MEMORY_GROWTH: 3}
    for v in sorted(
        verdicts,
        key=lambda v: (v.server, v.allocator, v.setting, order[v.metric], v.workload,
                       v.threads or 0),
    ):  # fmt: skip
        point = f"{METRICS[v.metric].text} {v.point}" if v.workload else v.point
        t.rows.append(
            [
                text(v.server),
                text(v.allocator),
                text(v.setting),
                text(point),
                Cell(v.ratio, interval(v)),
                Cell(v.word, v.word, warn=v.verdict in (BETTER, WORSE)),
                count(v.rounds),
            ]
        )
    m = design_of(run).min_effect_pct
    t.notes.append(
        f"Minimum effect {m:g}%; intervals at the look's level (95% for a fixed design)."
    )
    t.notes += getattr(verdicts, "notices", [])  # points the judge refused (analysis/judge.py)
    return t


def hugepage_section(run: Run) -> dict | None:
    """The section's context, or None when the run studied one hugepage setting only."""
    if len(run.thp_modes) < 2 and not any(is_large(s) for s in run.thp_modes):
        return None
    verdicts = hugepage_verdicts(run)
    return {
        "baseline": baseline_of(run),
        "answers": answers(run, verdicts),
        "verdict_table": verdict_table(run, verdicts),
        "where_table": where_table(run),
        "cost_table": cost_table(run),
        "why_none": why_none(run),
    }
