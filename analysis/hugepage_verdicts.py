"""Verdicts per hugepage setting: each setting against THP `never`, per allocator, paired by round.

The verdicts of analysis/verdicts.py compare allocators at one hugepage setting; these compare
hugepage settings for one allocator. The cell of setting S and the cell of `never` of the same
allocator in the same round form a pair (every round runs every setting of every allocator once,
in alternating order), and the ratio's interval comes from the paired differences, by the one
judge (analysis/judge.py; analysis/sequential.py: Student t on the paired differences, the look's
share of the 5% for a budget's looks), each metric on its scale from analysis/metrics.py:

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

from analysis import memory, point_tables
from analysis.judge import judge
from analysis.lives import by_life
from analysis.metrics import (
    DECIDED,
    LAT_P95,
    MEMORY_GROWTH,
    MEMORY_STOP,
    METRICS,
    THROUGHPUT,
    UNDECIDED,
)
from analysis.stats import median
from analysis.verdicts import Verdicts, design_of, rounds_of
from rundir.read import Run

BASELINE = "never"  # THP off, small pages: what every hugepage setting is judged against
# The metrics judged here (their words and scales are analysis/metrics.py's).
HUGEPAGE_METRICS = (THROUGHPUT, LAT_P95, MEMORY_STOP, MEMORY_GROWTH)


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
    verdict: str  # metrics.BETTER / WORSE / NONE / UNDECIDED
    rounds: int
    level: float

    @property
    def word(self) -> str:
        """In the metric's words: "faster", "more memory", "lower p95", "none", "undecided"."""
        return METRICS[self.metric].word(self.verdict)

    @property
    def decided(self) -> bool:
        return self.verdict in DECIDED

    @property
    def point(self) -> str:
        return f"{self.workload}@{self.threads}" if self.workload else METRICS[self.metric].text


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


def hugepage_verdicts(run: Run, min_effect_pct: float | None = None) -> Verdicts:
    """Every hugepage setting against `never`, per server, allocator and point (empty when
    why_none says), with the notices of the points the judge refused."""
    if why_none(run):
        return Verdicts()
    design = design_of(run, min_effect_pct)
    base = BASELINE
    out: list[HugepageVerdict] = []
    notices: list[str] = []

    def add(server, alloc, wl, th, metric, values, norm=None):
        where = " ".join(str(x) for x in (server, alloc, wl, th) if x not in ("", None))
        judged = judge(METRICS[metric], values, base, design, norm, where)
        if judged.notice:
            notices.append(judged.notice)
        for setting, j in judged.arms.items():
            out.append(
                HugepageVerdict(
                    server, alloc, setting, base, wl, th, metric, j.ratio, j.lo, j.hi, j.verdict,
                    j.rounds, j.level,
                )
            )  # fmt: skip

    rows = [r for r in run.ok_rows if not run.is_standin(r["cell"])]
    for wl in run.workloads:
        for metric, col in ((THROUGHPUT, point_tables.metric_of(run, wl)), (LAT_P95, "lat_p95_ms")):
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
                add(server, alloc, wl, th, metric, values)

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
        add(server, alloc, "", None, MEMORY_STOP, values)
        base_end = values.get(base) or {}
        norm = sum(base_end.values()) / len(base_end) if base_end else None
        add(server, alloc, "", None, MEMORY_GROWTH, grow[(server, alloc)], norm)
    return Verdicts(out, notices)


def undecided(verdicts: list[HugepageVerdict]) -> list[HugepageVerdict]:
    return [v for v in verdicts if v.verdict == UNDECIDED]
