"""`compare BASE NEW`: did NEW get slower (or hungrier, or crash) where BASE worked?

Points are matched by (workload, allocator, threads, THP mode). When each run has one server and
they differ (an upgrade check), points are matched across the two servers by allocator; otherwise
only servers present in both runs are compared (a server in one run only is warned about).

Throughput: ratio NEW/BASE of geometric means with a 95% Welch t interval on the log scale
(analysis/stats.py explains why); the base/new columns are those geometric means.

Evidence, and what may fail a CI job (exit code 1):
- Repeats (at least MIN_REPEATS = 2 server lives per side): firm. Each repeat is an independent
  server life, so the t interval includes the run-to-run variation a restart brings, and the t
  quantile widens the interval honestly for few values (df = 1 with 2 + 2 repeats: t = 12.7).
  Two per side is the least that estimates that variation at all; 3 or more give useful power
  (README and `mallocsweep compare --help` recommend --repeat 3).
- One run on either side: only the level's per-interval throughput is left, as BATCHES contiguous
  batch means of at least MIN_INTERVALS intervals. That measures noise *within* one server life,
  not between lives: two identical real smoke runs here differed by -24% .. +33% per point, far
  beyond what their intervals suggested. Such verdicts are shown as "possibly slower"/"possibly
  faster" (weak evidence) and do not set exit code 1 unless --allow-weak asks for it.
- Fewer intervals than MIN_INTERVALS (raw 1-second intervals are autocorrelated and give intervals
  far too narrow: two 1-second intervals measured +18% "significant" between identical runs): no
  verdict.

Verdicts: "slower" needs both significance (the interval excludes 1.0) and a change beyond the
threshold (default 5%); "faster" likewise; everything else is "no significant change". The
threshold is the minimum effect that guards against the many-points problem: among dozens of
points a few will be "significant" by chance, rarely also by more than 5%.

Failures: a point BASE measured whose level failed in NEW, or whose NEW cell (server life) failed,
is "failed in NEW" — a regression, whatever the evidence rules say: a server that crashes is worse
than a slow one. A point that failed in BASE but worked in NEW is listed, not judged.

Memory: each ok cell's RSS growth from server start to the last reading before shutdown (the
figures of the report's memory table; when either run predates those readings, both use the end of
the last measured level minus the start of the first, and a warning says so), mean NEW - mean
BASE, expressed as a percentage of BASE's mean RSS at the end (a ratio of two growths explodes
when growth is near zero). The base/new columns are those means, the interval
Welch's on the difference. Compared with repeats only: one server life per side carries no
estimate of run-to-run memory variation, so it gets no verdict (the difference is still shown).
A significant growth beyond the threshold is a regression, like a slowdown.

Exit code: 1 on any regression; 2 when nothing could be judged at all (every point lacks evidence:
a CI job must not pass on a comparison that could not see anything); else 0.

A MongoDB protocol stand-in is never given a verdict: it proves the harness, not an allocator.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path

from scipy import stats as scipy_stats

from analysis import memory, point_tables
from analysis.compare_metadata import differences, same_run
from analysis.errors import AnalysisError
from analysis.lives import life_values
from analysis.metrics import BETTER, MEMORY_CHANGE, METRICS, THROUGHPUT, WORSE, Metric
from analysis.stats import BATCHES, CONFIDENCE, Estimate, batch_means, diff_ci, ratio_ci
from rundir.integrity import GAP_PREFIX
from rundir.read import Run, load_run

# The verdicts' words are the metrics' (analysis/metrics.py): throughput's for the points, the
# memory figures' for memory; "possibly ..." is compare's own, for weak evidence.
FASTER, SLOWER = METRICS[THROUGHPUT].better, METRICS[THROUGHPUT].worse
LESS_MEMORY, MORE_MEMORY = METRICS[MEMORY_CHANGE].better, METRICS[MEMORY_CHANGE].worse
NO_CHANGE, NO_VERDICT = "no significant change", "no verdict"
POSSIBLY_SLOWER, POSSIBLY_FASTER = "possibly " + SLOWER, "possibly " + FASTER
FAILED_IN_NEW, FAILED_IN_BASE = "failed in NEW", "failed in BASE"

MIN_REPEATS = 2  # server lives per side for a firm verdict (see the module docstring)
# Intervals per level needed for weak (single-run) evidence: BATCHES batch means of >= 2 each.
MIN_INTERVALS = 2 * BATCHES
WEAK_NOTE = (
    "weak evidence: 1 run per side — only noise within one server life was measured; not counted"
    " as a regression unless --allow-weak"
)


@dataclass
class PointComparison:
    kind: str  # "throughput" or "memory"
    workload: str  # "" for memory (a whole cell)
    allocator: str
    thp: str
    threads: int | None
    metric: str
    base_server: str
    new_server: str
    base: float | None  # throughput: geometric mean over BASE's repeats; memory: mean growth, kB
    new: float | None
    ratio: float | None  # NEW/BASE (memory: 1 + change / BASE's mean end RSS)
    lo: float | None
    hi: float | None
    evidence: str
    weak: bool
    verdict: str
    regression: bool
    note: str = ""

    @property
    def change_pct(self) -> float | None:
        return None if self.ratio is None else (self.ratio - 1.0) * 100.0


@dataclass
class Comparison:
    base_path: Path
    new_path: Path
    base_id: str
    new_id: str
    mode: str  # "same server" or "upgrade"
    threshold_pct: float
    allow_weak: bool = False
    points: list[PointComparison] = field(default_factory=list)
    memory: list[PointComparison] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    unmatched: dict[str, list[str]] = field(default_factory=dict)
    memory_basis: str = "server"  # memory.SERVER or memory.LEVELS: which start/end figures
    # What each run's source of truth lacks, compared anyway (--allow-incomplete): side -> lines
    incomplete: dict[str, list[str]] = field(default_factory=dict)

    def gap_lines(self) -> list[str]:
        """The gaps, as the output's first lines."""
        sides = (("BASE", self.base_path), ("NEW", self.new_path))
        return [
            f"{GAP_PREFIX} ({side} {path}): {gap}"
            for (side, path), key in zip(sides, ("base", "new"), strict=True)
            for gap in self.incomplete.get(key) or []
        ]

    @property
    def regressions(self) -> list[PointComparison]:
        return [p for p in self.points + self.memory if p.regression]

    @property
    def possible_regressions(self) -> list[PointComparison]:
        """Weak 'possibly slower' points that do not count (without --allow-weak)."""
        return [p for p in self.points if p.verdict == POSSIBLY_SLOWER and not p.regression]

    @property
    def judged(self) -> list[PointComparison]:
        """Points with any evidence (firm or weak), or a failure in NEW."""
        return [p for p in self.points if p.verdict not in (NO_VERDICT, FAILED_IN_BASE)]

    @property
    def nothing_judged(self) -> bool:
        """Every real (non-stand-in) point lacked evidence: the comparison saw nothing."""
        real = [p for p in self.points if p.note != point_tables.STANDIN_LABEL]
        return bool(real) and not self.judged

    @property
    def exit_code(self) -> int:
        """0: no significant regression; 1: at least one; 2: nothing could be judged."""
        if self.regressions:
            return 1
        return 2 if self.nothing_judged else 0

    def to_json(self) -> dict:
        def point(p: PointComparison) -> dict:
            d = asdict(p)
            d["change_pct"] = p.change_pct
            return d

        return {
            "base": {"path": str(self.base_path), "run_id": self.base_id},
            "new": {"path": str(self.new_path), "run_id": self.new_id},
            "mode": self.mode,
            "threshold_pct": self.threshold_pct,
            "confidence": CONFIDENCE,
            "allow_weak": self.allow_weak,
            "incomplete": {k: list(v) for k, v in self.incomplete.items() if v},
            "warnings": list(self.warnings),
            "points": [point(p) for p in self.points],
            "memory": [point(p) for p in self.memory],
            "memory_basis": self.memory_basis,
            "unmatched": self.unmatched,
            "regressions": len(self.regressions),
            "possible_regressions": len(self.possible_regressions),
            "nothing_judged": self.nothing_judged,
            "exit_code": self.exit_code,
        }


# -- what each run measured, and what failed ----------------------------------------------------
def cell_series(run: Run, cell_id: str) -> tuple[str, str, str]:
    """(server, allocator, THP mode) of a cell, also for a cell that failed before any level."""
    row = next((r for r in run.rows if r["cell"] == cell_id), None)
    if row is not None:
        return row["server"], row["allocator"], row["thp"]
    c = run.cell(cell_id)
    server = (c.get("server") or {}).get("label") or cell_id.split("__")[0]
    return (
        str(server),
        str((c.get("allocator") or {}).get("name") or ""),
        str((c.get("thp") or {}).get("requested") or ""),
    )


def _failed_cells(run: Run) -> list[str]:
    return [cid for cid, c in run.cells.items() if c.get("status") == "failed"]


def _servers(run: Run) -> list[str]:
    """Servers that were measured or at least started (a run whose every cell failed has some)."""
    return list(dict.fromkeys(run.servers + [cell_series(run, c)[0] for c in _failed_cells(run)]))


def _values(run: Run, server: str, metric: str) -> dict[tuple, list[dict]]:
    """ok rows with a value of `metric`, by (workload, allocator, thp, threads)."""
    out: dict[tuple, list[dict]] = defaultdict(list)
    for r in run.ok_rows:
        if r["server"] == server and r.get(metric) is not None:
            out[(r["workload"], r["allocator"], r["thp"], r["threads"])].append(r)
    return out


def failures_at(run: Run, server: str, key: tuple) -> list[str]:
    """Why attempts at a point failed: failed levels, and failed cells that never measured it."""
    wl, alloc, thp, threads = key
    out = []
    for r in run.rows:
        if (r["server"], r["workload"], r["allocator"], r["thp"], r["threads"]) == (
            server,
            wl,
            alloc,
            thp,
            threads,
        ) and (r.get("status") or "ok") != "ok":
            out.append(f"level failed in {r['cell']}: {r.get('error') or 'no reason recorded'}")
    for cid in _failed_cells(run):
        if cell_series(run, cid) != (server, alloc, thp):
            continue
        tried = any(
            r["cell"] == cid and r["workload"] == wl and r["threads"] == threads for r in run.rows
        )
        if not tried:
            out.append(f"cell {cid} failed: {run.cell(cid).get('error') or 'no reason recorded'}")
    return out


def _interval_samples(run: Run, rows: list[dict], workload: str, threads: int) -> list[float]:
    """Batch means of every repeat's interval throughput (each visit's ramp-up interval dropped);
    a life with fewer than MIN_INTERVALS intervals at the level contributes nothing (see the module
    docstring). A thread-churn life visits the level once per cycle, each visit a phase of its own
    ("<workload>@<threads>#c<cycle>", suites.workloads.sysbench.churn): its visits' intervals, in timeline order, are
    that life's series (asking only for the plain "<workload>@<threads>" phase found none, and a
    single-run churn compare had no evidence at all)."""
    out: list[float] = []
    for cell in dict.fromkeys(r["cell"] for r in rows):  # a churn life's rows: one timeline
        visits = run.level_visits(cell, workload, threads)
        rates = [x for visit in visits for x in [y for y in visit if y > 0][1:]]
        if len(rates) >= MIN_INTERVALS:
            out += batch_means(rates)
    return out


def geomean(values: list[float]) -> float:
    """The geometric mean of positive values (scipy's); a value <= 0 has none, and is an error
    here: the callers say what they show instead (the arithmetic mean, labelled)."""
    if min(values) <= 0:
        raise ValueError("geomean of a value <= 0")
    return float(scipy_stats.gmean(values))


def typical(values: list[float]) -> tuple[float, bool]:
    """(the geometric mean, True) of positive values, else (the arithmetic mean, False): a point
    with a zero throughput shows its arithmetic mean, and its note says so."""
    if min(values) > 0:
        return geomean(values), True
    return float(sum(values) / len(values)), False


# -- verdicts -----------------------------------------------------------------------------------
def _verdict(est: Estimate, threshold_pct: float, metric: Metric) -> tuple[str, str]:
    """The metric's word for a NEW/BASE estimate: better or worse beyond the threshold and
    significant, else no significant change."""
    thr = threshold_pct / 100.0
    if not est.excludes(1.0):
        return NO_CHANGE, ""
    if est.value < 1.0 - thr:
        return metric.word(WORSE if metric.higher_is_better else BETTER), ""
    if est.value > 1.0 + thr:
        return metric.word(BETTER if metric.higher_is_better else WORSE), ""
    return NO_CHANGE, f"significant but within ±{threshold_pct:g}%"


def _new_point(kind, key, metric, bserver, nserver, base, new) -> PointComparison:
    workload, allocator, thp, threads = key
    return PointComparison(
        kind, workload, allocator, thp, threads, metric, bserver, nserver, base, new,
        None, None, None, "none", True, NO_VERDICT, False,
    )  # fmt: skip


def _failed_point(key, metric, bserver, nserver, brows, nrows, reasons) -> PointComparison:
    """BASE measured it, NEW failed at it (all attempts, or some: a crash is not noise)."""
    b, _ = typical(life_values(brows, lambda r: r[metric]))
    n = typical(life_values(nrows, lambda r: r[metric]))[0] if nrows else None
    p = _new_point("throughput", key, metric, bserver, nserver, b, n)
    if n is not None and b > 0:
        p.ratio = n / b  # what the attempts that worked measured, shown beside the failure
    p.verdict, p.regression, p.weak = FAILED_IN_NEW, True, False
    p.evidence = f"{len(reasons)} failed attempt(s) in NEW"
    p.note = "; ".join(dict.fromkeys(reasons))
    return p


def _throughput_point(
    base: Run,
    new: Run,
    key: tuple,
    brows: list[dict],
    nrows: list[dict],
    metric: str,
    bserver: str,
    nserver: str,
    threshold_pct: float,
    allow_weak: bool,
) -> PointComparison:
    workload, allocator, thp, threads = key
    # one value per server life: a churn life's cycles are not repeats (analysis/lives.py)
    bvals = life_values(brows, lambda r: r[metric])
    nvals = life_values(nrows, lambda r: r[metric])
    standin = any(base.is_standin(r["cell"]) for r in brows) or any(
        new.is_standin(r["cell"]) for r in nrows
    )
    (b, bgeo), (n, ngeo) = typical(bvals), typical(nvals)
    p = _new_point("throughput", key, metric, bserver, nserver, b, n)
    if not (bgeo and ngeo):
        p.note = "zero throughput on one side (base and new are arithmetic means)"
        p.ratio = p.new / p.base if p.base > 0 else None
        if p.ratio is not None and p.ratio < 1 - threshold_pct / 100 and not standin:
            p.verdict, p.regression, p.weak = SLOWER, True, False
        return p
    est: Estimate | None = None
    if len(bvals) >= MIN_REPEATS and len(nvals) >= MIN_REPEATS:
        est = ratio_ci(bvals, nvals)
        p.evidence, p.weak = f"repeats {len(bvals)}+{len(nvals)}", False
    else:
        bi = _interval_samples(base, brows, workload, threads)
        ni = _interval_samples(new, nrows, workload, threads)
        if len(bi) >= BATCHES and len(ni) >= BATCHES:
            est = ratio_ci(bi, ni)
            p.evidence = f"1 run per side: {len(bi)}+{len(ni)} batch means (weak)"
    if est is None:
        p.ratio = p.new / p.base
        p.note = (
            f"1 run per side, levels < {MIN_INTERVALS} intervals: cannot tell a change from noise"
        )
        return p
    p.ratio, p.lo, p.hi = est.value, est.lo, est.hi
    if standin:
        p.note = point_tables.STANDIN_LABEL
        return p
    p.verdict, p.note = _verdict(est, threshold_pct, METRICS[THROUGHPUT])
    if p.weak and p.verdict in (SLOWER, FASTER):
        p.verdict = POSSIBLY_SLOWER if p.verdict == SLOWER else POSSIBLY_FASTER
        p.note = WEAK_NOTE
        p.regression = p.verdict == POSSIBLY_SLOWER and allow_weak
    else:
        p.regression = p.verdict == SLOWER
    return p


def memory_basis(base: Run, new: Run) -> tuple[str, str | None]:
    """The memory figures both runs have (see analysis/memory.py), and a warning when one run
    recorded server start/stop memory and the other did not (then both use level figures)."""
    b, n = memory.memory_basis(base), memory.memory_basis(new)
    if b == n:
        return b, None
    older = "base" if b == memory.LEVELS else "new"
    return memory.LEVELS, (
        f"memory compared over the measured levels (start of the first to end of the last), not"
        f" from server start to stop: the {older} run predates the server start/stop readings"
    )


# Memory figures compared per cell, each as a change relative to BASE's mean end RSS (so a verdict
# means the same share of the server's memory whichever figure moved): RSS growth over the life,
# and the allocator's own in-use and cached bytes at the end of the load (runs that have them).
MEMORY_METRICS = ("rss_growth_kb", "alloc_in_use_kb", "alloc_cached_kb")


def _memory_points(
    base: Run, new: Run, pairs, threshold_pct: float, basis: str
) -> list[PointComparison]:
    out = []
    bmem, nmem = memory.memory_by_series(base, basis), memory.memory_by_series(new, basis)
    for bserver, nserver in pairs:
        for s, metric in ((s, m) for s in point_tables.series_of(base) for m in MEMORY_METRICS):
            if s.server != bserver:
                continue
            ns = point_tables.Series(nserver, s.allocator, s.thp)
            bcells = [c for c in bmem.get(s, []) if getattr(c, metric) is not None]
            ncells = [c for c in nmem.get(ns, []) if getattr(c, metric) is not None]
            if not bcells or not ncells or any(c.rss_end_kb is None for c in bcells):
                continue
            bg = [getattr(c, metric) for c in bcells]
            ng = [getattr(c, metric) for c in ncells]
            ref = _mean([c.rss_end_kb for c in bcells])
            key = ("", s.allocator, s.thp, None)
            p = _new_point("memory", key, metric, bserver, nserver, _mean(bg), _mean(ng))
            p.ratio = 1.0 + (p.new - p.base) / ref
            standin = base.is_standin(_first_cell(base, s)) or new.is_standin(_first_cell(new, ns))
            if standin:
                p.note = point_tables.STANDIN_LABEL
            elif len(bg) >= MIN_REPEATS and len(ng) >= MIN_REPEATS:
                d = diff_ci(bg, ng)
                p.ratio, p.lo, p.hi = 1 + d.value / ref, 1 + d.lo / ref, 1 + d.hi / ref
                p.evidence, p.weak = f"repeats {len(bg)}+{len(ng)}", False
                p.verdict, p.note = _verdict(
                    Estimate(p.ratio, p.lo, p.hi, len(bg), len(ng)),
                    threshold_pct,
                    METRICS[MEMORY_CHANGE],
                )
                p.regression = p.verdict == MORE_MEMORY
            else:
                p.note = "one server life per side: run-to-run memory variation unknown"
            out.append(p)
    return out


def _mean(values: list[float]) -> float:
    return float(sum(values) / len(values))


def _first_cell(run: Run, s: point_tables.Series) -> str:
    return next(
        (
            r["cell"]
            for r in run.rows
            if (r["server"], r["allocator"], r["thp"]) == (s.server, s.allocator, s.thp)
        ),
        "",
    )


# -- matching -----------------------------------------------------------------------------------
def _server_pairs(base: Run, new: Run) -> tuple[str, list[tuple[str, str]], list[str]]:
    """(mode, server pairs, warnings about servers left out)."""
    bs, ns = base.servers, _servers(new)
    if not bs or not ns:
        empty = base if not bs else new
        raise AnalysisError(f"{empty.path}: no measured levels in results.csv; nothing to compare")
    common = [s for s in bs if s in ns]
    if common:
        left = [f"{s} (base only)" for s in bs if s not in ns]
        left += [f"{s} (new only)" for s in ns if s not in bs]
        warn = [f"server(s) in one run only, not compared: {', '.join(left)}"] if left else []
        return "same server", [(s, s) for s in common], warn
    if len(bs) == 1 and len(ns) == 1:
        return "upgrade", [(bs[0], ns[0])], []
    raise AnalysisError(
        f"{base.path} ({', '.join(bs)}) and {new.path} ({', '.join(ns)}) have no server in common"
        " and are not one server each (an upgrade check); compare runs of the same servers"
    )


# -- entry points -------------------------------------------------------------------------------
def compare_runs(
    base: Path,
    new: Path,
    threshold_pct: float = 5.0,
    allow_weak: bool = False,
    allow_incomplete: bool = False,
    settle=None,
) -> Comparison:
    """BASE against NEW. AnalysisError/RunDirError (one line) for runs that cannot be compared:
    unreadable, incomplete (unless allow_incomplete: then the gaps come first in the output and
    in its JSON), or one run twice (the same directory, a copy, a run holding the other's cells).
    `settle(manifest)`: the caller's reading of what the files cannot say (a "running" run whose
    runner is gone is interrupted: only the runner's side can tell, analysis never imports it)."""
    if not 0 <= threshold_pct < 100:
        raise AnalysisError(f"threshold {threshold_pct}: expected a percentage from 0 to 100")
    brun = load_run(Path(base), allow_incomplete=allow_incomplete)
    nrun = load_run(Path(new), allow_incomplete=allow_incomplete)
    if settle is not None:
        settle(brun.manifest)
        settle(nrun.manifest)
    same = same_run(brun, nrun)
    if same:
        raise AnalysisError(f"{same}: a run compared with itself has nothing to tell; no verdict")
    mode, pairs, server_warnings = _server_pairs(brun, nrun)
    cmp = Comparison(
        brun.path, nrun.path, brun.run_id, nrun.run_id, mode, threshold_pct, allow_weak
    )
    cmp.incomplete = {"base": list(brun.gaps), "new": list(nrun.gaps)}
    cmp.warnings = [
        *(n for n in brun.notices if not n.startswith(GAP_PREFIX)),
        *(n for n in nrun.notices if not n.startswith(GAP_PREFIX)),
        *differences(brun, nrun, mode, pairs),
        *server_warnings,
    ]
    base_only, new_only, failed_base = [], [], []
    for bserver, nserver in pairs:
        for workload in _unique(brun.workloads + nrun.workloads):
            metric = point_tables.metric_of(brun, workload)
            bvals = {k: v for k, v in _values(brun, bserver, metric).items() if k[0] == workload}
            nvals = {k: v for k, v in _values(nrun, nserver, metric).items() if k[0] == workload}
            for key in sorted(set(bvals) | set(nvals), key=lambda k: _order(brun, nrun, k)):
                nfail = failures_at(nrun, nserver, key)
                bfail = failures_at(brun, bserver, key)
                if key in bvals and nfail and not bfail:
                    cmp.points.append(
                        _failed_point(
                            key, metric, bserver, nserver, bvals[key], nvals.get(key, []), nfail
                        )
                    )
                elif key not in nvals:
                    base_only.append(_key_text(key))
                elif key not in bvals:
                    (failed_base if bfail else new_only).append(_key_text(key))
                else:
                    p = _throughput_point(
                        brun, nrun, key, bvals[key], nvals[key], metric, bserver, nserver,
                        threshold_pct, allow_weak,
                    )  # fmt: skip
                    if bfail or nfail:
                        p.note = "; ".join(
                            x for x in (p.note, "failed attempts on both sides") if x
                        )
                    cmp.points.append(p)
    if not cmp.points:
        raise AnalysisError(
            f"{brun.path} and {nrun.path} have no point in common (workload, allocator, threads, THP"
            " mode): nothing to compare"
        )
    cmp.unmatched = {"base_only": base_only, "new_only": new_only, "failed_in_base": failed_base}
    failed_new = [p for p in cmp.points if p.verdict == FAILED_IN_NEW]
    if failed_new:
        cmp.warnings.append(
            f"{len(failed_new)} point(s) measured in BASE failed in NEW (a level or the server"
            " failed): counted as regressions"
        )
    if base_only or new_only:
        cmp.warnings.append(
            f"{len(base_only)} point(s) only in base and {len(new_only)} only in new: not compared"
        )
    if failed_base:
        cmp.warnings.append(
            f"{len(failed_base)} point(s) failed in BASE but worked in NEW: not compared"
        )
    if brun.workloads == nrun.workloads and all(
        brun.threads(w) == nrun.threads(w) for w in brun.workloads
    ):
        basis, warning = memory_basis(brun, nrun)
        cmp.memory_basis = basis
        cmp.memory = _memory_points(brun, nrun, pairs, threshold_pct, basis)
        if warning:
            cmp.warnings.append(warning)
    else:
        cmp.warnings.append(
            "memory not compared: the two runs swept different workloads or threads"
        )
    weak = [p for p in cmp.points if p.weak and p.verdict != NO_VERDICT]
    if weak:
        counted = "counted as regressions (--allow-weak)" if allow_weak else "not counted"
        cmp.warnings.append(
            f"{len(weak)} verdict(s) rest on one server life per side (batch means of interval"
            f" samples): they capture noise within a run, not between runs; 'possibly slower' is"
            f" {counted}. Re-run both sides with --repeat 3 for a firm answer."
        )
    none = [p for p in cmp.points if p.verdict == NO_VERDICT and p.evidence == "none"]
    if none:
        cmp.warnings.append(
            f"{len(none)} of {len(cmp.points)} point(s) have one run per side and levels too short"
            f" for batch means (< {MIN_INTERVALS} intervals): no verdict"
        )
    if cmp.nothing_judged:
        cmp.warnings.append(
            "NOTHING COULD BE JUDGED: no point had enough evidence; exit code 2. Re-run both sides"
            " with --repeat 3 (or longer levels) to get a verdict."
        )
    return cmp


def _unique(items) -> list:
    return list(dict.fromkeys(items))


def _order(base: Run, new: Run, key: tuple) -> tuple:
    allocs = _unique(base.allocators + new.allocators)
    thps = _unique(base.thp_modes + new.thp_modes)
    wl, alloc, thp, threads = key
    return (
        thps.index(thp) if thp in thps else 99,
        allocs.index(alloc) if alloc in allocs else 99,
        threads,
    )


def _key_text(key: tuple) -> str:
    wl, alloc, thp, threads = key
    return f"{wl} {alloc} THP {thp} @{threads}"
