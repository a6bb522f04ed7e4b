"""Verdicts per hugepage setting: each setting against THP `never`, per allocator, paired by round.

The verdicts of analysis/verdicts.py compare allocators at one hugepage setting; these compare
hugepage settings for one allocator. The cell of setting S and the cell of `never` of the same
allocator in the same round form a pair (every round runs every setting of every allocator once,
in alternating order), and the ratio's interval comes from the paired differences, exactly as
analysis/verdicts.py's `_judge` does for allocators (analysis/sequential.py: Student t on the
paired log differences, the look's share of the 5% for a budget's looks):

- throughput at every (workload, threads): log scale, higher is better;
- p95 latency at every (workload, threads): log scale, lower is better;
- memory at server stop: RSS plus the server's hugetlb pages (VmRSS leaves explicit huge pages
  out, so a buffer pool on them would otherwise look like memory saved): log scale, lower is
  better;
- memory growth from server start to stop, the same sum: additive scale, as a ratio to `never`'s
  mean memory at stop, lower is better.

A setting whose THP did not reach the server (Debian's MariaDB turns THP off for itself) is still
judged: that is what such a server does under it; the report says so beside it.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from analysis import memory, study_tables
from analysis.lives import by_life
from analysis.sequential import FASTER, NONE, SLOWER, UNDECIDED
from analysis.stats import median
from analysis.verdicts import _judge, design_of, rounds_of
from rundir.read import Run

BASELINE = "never"  # THP off, small pages: what every hugepage setting is judged against
THROUGHPUT, P95, MEMORY_STOP, MEMORY_GROWTH = "throughput", "p95", "memory_stop", "memory_growth"
METRIC_NAME = {
    THROUGHPUT: "throughput",
    P95: "p95 latency",
    MEMORY_STOP: "memory at stop (RSS + hugetlb)",
    MEMORY_GROWTH: "memory growth",
}
# The verdict in each metric's words ("faster" / "slower" are the sequential rule's own words for
# the better and the worse side).
WORDS = {
    THROUGHPUT: {FASTER: "faster", SLOWER: "slower"},
    P95: {FASTER: "lower p95", SLOWER: "higher p95"},
    MEMORY_STOP: {FASTER: "less memory", SLOWER: "more memory"},
    MEMORY_GROWTH: {FASTER: "grows less", SLOWER: "grows more"},
}


@dataclass(frozen=True)
class HugepageVerdict:
    server: str
    allocator: str
    setting: str  # the cell's thp label ("always", "never+large-pages", "mongodb-8", ...)
    baseline: str
    workload: str  # "" for the memory metrics (a whole server life)
    threads: int | None
    metric: str
    ratio: float
    lo: float
    hi: float
    verdict: str  # the sequential rule's word: faster / slower / none / undecided
    rounds: int
    level: float

    @property
    def word(self) -> str:
        """In the metric's words: "faster", "more memory", "lower p95", "none", "undecided"."""
        return WORDS[self.metric].get(self.verdict, self.verdict)

    @property
    def decided(self) -> bool:
        return self.verdict in (FASTER, SLOWER, NONE)

    @property
    def point(self) -> str:
        return f"{self.workload}@{self.threads}" if self.workload else METRIC_NAME[self.metric]


def baseline_of(run: Run) -> str | None:
    return BASELINE if BASELINE in run.thp_modes else None


def why_none(run: Run) -> str | None:
    """Why the run gives no hugepage verdicts (None: it gives them)."""
    if len(run.thp_modes) < 2:
        return "the run measured one hugepage setting only"
    if baseline_of(run) is None:
        return (
            f"THP '{BASELINE}' (the setting every other is judged against) was not among its "
            f"settings ({', '.join(run.thp_modes)})"
        )
    if rounds_of(run) < 2:
        return (
            "one round only: a single server life per setting says nothing about how much a second"
            " life would differ (run at least 3 rounds: --repeat 3)"
        )
    return None


def footprint(mark: dict | None) -> float | None:
    """RSS plus the server's explicit huge pages at a memory mark (hugetlb: not in VmRSS)."""
    if not mark or mark.get("rss_kb") is None:
        return None
    return mark["rss_kb"] + (mark.get("hugetlb_kb") or 0)


def cell_footprint(run: Run, cell_id: str, rows: list[dict]) -> tuple[float | None, float | None]:
    """(memory at stop, growth) of one cell: RSS + hugetlb at server start and stop when the run
    recorded them there, else (older runs) the memory table's figures with the last level's
    hugetlb pages added at the end."""
    marks = memory.server_marks(run, cell_id)
    if marks is not None:
        start, stop = (footprint(m) for m in marks)
        return stop, (None if start is None or stop is None else stop - start)
    m = memory.cell_memory(run, cell_id, rows, memory.LEVELS)
    huge = next((r["hugetlb_kb"] for r in reversed(rows) if r.get("hugetlb_kb") is not None), 0)
    end = None if m.rss_end_kb is None else m.rss_end_kb + huge
    return end, m.rss_growth_kb


def hugepage_verdicts(run: Run, min_effect_pct: float | None = None) -> list[HugepageVerdict]:
    """Every hugepage setting against `never`, per server, allocator and point (empty when
    why_none says)."""
    if why_none(run):
        return []
    design = design_of(run, min_effect_pct)
    base = BASELINE
    out: list[HugepageVerdict] = []

    def add(server, alloc, wl, th, metric, judged):
        for setting, (ratio, lo, hi, v, n, level) in judged.items():
            out.append(
                HugepageVerdict(
                    server, alloc, setting, base, wl, th, metric, ratio, lo, hi, v, n, level
                )
            )

    rows = [r for r in run.ok_rows if not run.is_standin(r["cell"])]
    for wl in run.workloads:
        for metric, col, better in (
            (THROUGHPUT, study_tables.metric_of(run, wl), True),
            (P95, "lat_p95_ms", False),
        ):
            lives = by_life(
                (r for r in rows if r["workload"] == wl),
                lambda r: (r["server"], r["allocator"], r["threads"], r["thp"], r["repeat"] or 1),
                lambda r, col=col: r.get(col),
            )
            points: dict[tuple, dict[str, dict[int, float]]] = defaultdict(
                lambda: defaultdict(dict)
            )
            for (server, alloc, th, setting, rnd), per_cell in lives.items():
                points[(server, alloc, th)][setting][rnd] = median(list(per_cell.values()))
            for (server, alloc, th), values in sorted(points.items()):
                judged = _judge(values, base, design, "log", None, better)
                add(server, alloc, wl, th, metric, judged)

    stop: dict[tuple, dict[str, dict[int, float]]] = defaultdict(lambda: defaultdict(dict))
    grow: dict[tuple, dict[str, dict[int, float]]] = defaultdict(lambda: defaultdict(dict))
    for cid, cell_rows in memory.complete_cells(run).items():
        if run.is_standin(cid):
            continue
        r0 = cell_rows[0]
        end, growth = cell_footprint(run, cid, cell_rows)
        key, setting, rnd = (r0["server"], r0["allocator"]), r0["thp"], r0["repeat"] or 1
        if end is not None:
            stop[key][setting][rnd] = end
        if growth is not None:
            grow[key][setting][rnd] = growth
    for (server, alloc), values in sorted(stop.items()):
        add(server, alloc, "", None, MEMORY_STOP, _judge(values, base, design, "log", None, False))
        base_end = values.get(base) or {}
        norm = sum(base_end.values()) / len(base_end) if base_end else None
        judged = _judge(grow[(server, alloc)], base, design, "add", norm, False)
        add(server, alloc, "", None, MEMORY_GROWTH, judged)
    return out


def undecided(verdicts: list[HugepageVerdict]) -> list[HugepageVerdict]:
    return [v for v in verdicts if v.verdict == UNDECIDED]
