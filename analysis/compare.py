"""`compare BASE NEW`: did NEW get slower (or hungrier) than BASE, beyond noise and beyond a threshold?

Points are matched by (workload, allocator, threads, THP mode). When each run has one server and
they differ (an upgrade check), points are matched across the two servers by allocator; otherwise
only servers present in both runs are compared.

Throughput: ratio NEW/BASE of geometric means with a 95% Welch t interval on the log scale
(analysis/stats.py explains why). The samples are repeats (independent server lives) when both
sides have at least two; otherwise the per-interval throughput of the single run per side, as
contiguous batch means — this only measures noise *within* one server life, not the run-to-run
variation a restart brings, so such verdicts are marked weak and the output says so. A point with
one figure per side and fewer than MIN_INTERVALS interval samples gets no verdict: nothing tells
a change from noise.

Verdicts: "slower" needs both significance (the interval excludes 1.0) and a change beyond the
threshold (default 5%); "faster" likewise; everything else is "no significant change". The
threshold is the minimum effect that guards against the many-points problem: among dozens of
points a few will be "significant" by chance, rarely also by more than 5%.

Memory: each cell's RSS growth over its measured levels (end of the last minus start of the first),
NEW - BASE, expressed as a percentage of BASE's RSS at the end (a ratio of two growths explodes when
growth is near zero). Compared with repeats only: one server life per side carries no estimate of
run-to-run memory variation, so it gets no verdict (the difference is still shown). A significant
growth beyond the threshold is a regression, like a slowdown.

A MongoDB protocol stand-in is never given a verdict: it proves the harness, not an allocator.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path

from analysis import memory, tables
from analysis.errors import AnalysisError
from analysis.rundir import Run, load_run
from analysis.stats import CONFIDENCE, Estimate, batch_means, diff_ci, median, ratio_ci

FASTER, SLOWER, NO_CHANGE, NO_VERDICT = "faster", "slower", "no significant change", "no verdict"
MORE_MEMORY, LESS_MEMORY = "more memory", "less memory"

# Fewer interval samples than this per side give no verdict: two 1-second intervals of a 3-second
# level measured +18% "significant" between two identical real runs here.
MIN_INTERVALS = 4

HOST_KEYS = ("hostname", "kernel", "cpu_model", "cores", "memory_kb", "glibc")


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
    base: float | None  # median over BASE's repeats (memory: RSS growth, kB)
    new: float | None
    ratio: float | None  # NEW/BASE (memory: 1 + change / BASE's end RSS)
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
    points: list[PointComparison] = field(default_factory=list)
    memory: list[PointComparison] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    unmatched: dict[str, list[str]] = field(default_factory=dict)

    @property
    def regressions(self) -> list[PointComparison]:
        return [p for p in self.points + self.memory if p.regression]

    @property
    def exit_code(self) -> int:
        """0: no significant regression; 1: at least one (the CLI maps errors to 2)."""
        return 1 if self.regressions else 0

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
            "warnings": list(self.warnings),
            "points": [point(p) for p in self.points],
            "memory": [point(p) for p in self.memory],
            "unmatched": self.unmatched,
            "regressions": len(self.regressions),
            "exit_code": self.exit_code,
        }


# -- matching -----------------------------------------------------------------------------------
def _server_pairs(base: Run, new: Run) -> tuple[str, list[tuple[str, str]]]:
    bs, ns = base.servers, new.servers
    if not bs or not ns:
        empty = base if not bs else new
        raise AnalysisError(f"{empty.path}: no measured levels in results.csv; nothing to compare")
    common = [s for s in bs if s in ns]
    if common:
        return "same server", [(s, s) for s in common]
    if len(bs) == 1 and len(ns) == 1:
        return "upgrade", [(bs[0], ns[0])]
    raise AnalysisError(
        f"{base.path} ({', '.join(bs)}) and {new.path} ({', '.join(ns)}) have no server in common"
        " and are not one server each (an upgrade check); compare runs of the same servers"
    )


def _values(run: Run, server: str, metric: str) -> dict[tuple, list[dict]]:
    """ok rows with a value of `metric`, by (workload, allocator, thp, threads)."""
    out: dict[tuple, list[dict]] = defaultdict(list)
    for r in run.ok_rows:
        if r["server"] == server and r.get(metric) is not None:
            out[(r["workload"], r["allocator"], r["thp"], r["threads"])].append(r)
    return out


def _interval_samples(run: Run, rows: list[dict], workload: str, threads: int) -> list[float]:
    """Batch means of every repeat's interval throughput (ramp-up interval dropped)."""
    out: list[float] = []
    for r in rows:
        rates = [x for x in run.interval_rates(r["cell"], workload, threads) if x > 0]
        if len(rates) >= 4:
            rates = rates[1:]
        out += batch_means(rates)
    return out


def _verdict(est: Estimate, threshold_pct: float, higher_is_better: bool = True) -> tuple[str, str]:
    thr = threshold_pct / 100.0
    if not est.excludes(1.0):
        return NO_CHANGE, ""
    if est.value < 1.0 - thr:
        return (SLOWER if higher_is_better else FASTER), ""
    if est.value > 1.0 + thr:
        return (FASTER if higher_is_better else SLOWER), ""
    return NO_CHANGE, f"significant but within ±{threshold_pct:g}%"


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
) -> PointComparison:
    workload, allocator, thp, threads = key
    bvals, nvals = [r[metric] for r in brows], [r[metric] for r in nrows]
    standin = any(base.is_standin(r["cell"]) for r in brows) or any(
        new.is_standin(r["cell"]) for r in nrows
    )
    p = PointComparison(
        "throughput",
        workload,
        allocator,
        thp,
        threads,
        metric,
        bserver,
        nserver,
        median(bvals),
        median(nvals),
        None,
        None,
        None,
        "none",
        True,
        NO_VERDICT,
        False,
    )
    if min(bvals) <= 0 or min(nvals) <= 0:
        p.note = "zero throughput on one side"
        p.ratio = median(nvals) / median(bvals) if median(bvals) > 0 else None
        if p.ratio is not None and p.ratio < 1 - threshold_pct / 100 and not standin:
            p.verdict, p.regression, p.weak = SLOWER, True, False
        return p
    est: Estimate | None = None
    if len(bvals) >= 2 and len(nvals) >= 2:
        est = ratio_ci(bvals, nvals)
        p.evidence, p.weak = f"repeats {len(bvals)}+{len(nvals)}", False
    else:
        bi = _interval_samples(base, brows, workload, threads)
        ni = _interval_samples(new, nrows, workload, threads)
        if len(bi) >= MIN_INTERVALS and len(ni) >= MIN_INTERVALS:
            est = ratio_ci(bi, ni)
            p.evidence = f"intervals {len(bi)}+{len(ni)} (weak)"
    if est is None:
        p.ratio = p.new / p.base
        p.note = (
            f"one figure per side and fewer than {MIN_INTERVALS} interval samples: cannot tell a"
            " change from noise"
        )
        return p
    p.ratio, p.lo, p.hi = est.value, est.lo, est.hi
    if standin:
        p.note = tables.STANDIN_LABEL
        return p
    p.verdict, p.note = _verdict(est, threshold_pct)
    p.regression = p.verdict == SLOWER
    return p


def _memory_points(base: Run, new: Run, pairs, threshold_pct: float) -> list[PointComparison]:
    out = []
    bmem, nmem = memory.memory_by_series(base), memory.memory_by_series(new)
    for bserver, nserver in pairs:
        for s in tables.series_of(base):
            if s.server != bserver:
                continue
            ns = tables.Series(nserver, s.allocator, s.thp)
            bcells = [
                c
                for c in bmem.get(s, [])
                if c.rss_end_kb is not None and c.rss_start_kb is not None
            ]
            ncells = [
                c
                for c in nmem.get(ns, [])
                if c.rss_end_kb is not None and c.rss_start_kb is not None
            ]
            if not bcells or not ncells:
                continue
            bg = [c.rss_end_kb - c.rss_start_kb for c in bcells]
            ng = [c.rss_end_kb - c.rss_start_kb for c in ncells]
            ref = median([c.rss_end_kb for c in bcells])
            p = PointComparison(
                "memory",
                "",
                s.allocator,
                s.thp,
                None,
                "rss_growth_kb",
                bserver,
                nserver,
                median(bg),
                median(ng),
                1.0 + (median(ng) - median(bg)) / ref,
                None,
                None,
                "none",
                True,
                NO_VERDICT,
                False,
            )
            standin = base.is_standin(_first_cell(base, s)) or new.is_standin(_first_cell(new, ns))
            if standin:
                p.note = tables.STANDIN_LABEL
            elif len(bg) >= 2 and len(ng) >= 2:
                d = diff_ci(bg, ng)
                p.ratio, p.lo, p.hi = 1 + d.value / ref, 1 + d.lo / ref, 1 + d.hi / ref
                p.evidence, p.weak = f"repeats {len(bg)}+{len(ng)}", False
                verdict, p.note = _verdict(
                    Estimate(p.ratio, p.lo, p.hi, len(bg), len(ng)),
                    threshold_pct,
                    higher_is_better=False,
                )
                p.verdict = {SLOWER: MORE_MEMORY, FASTER: LESS_MEMORY}.get(verdict, verdict)
                p.regression = p.verdict == MORE_MEMORY
            else:
                p.note = "one server life per side: run-to-run memory variation unknown"
            out.append(p)
    return out


def _first_cell(run: Run, s: tables.Series) -> str:
    return next(
        (
            r["cell"]
            for r in run.rows
            if (r["server"], r["allocator"], r["thp"]) == (s.server, s.allocator, s.thp)
        ),
        "",
    )


# -- metadata checks ----------------------------------------------------------------------------
def _differences(base: Run, new: Run, mode: str) -> list[str]:
    """Loud warnings: anything besides the server version that differs makes a verdict doubtful."""
    out = []
    for k in HOST_KEYS:
        b, n = base.host.get(k), new.host.get(k)
        if b != n:
            out.append(
                f"host {k} differs: {b!r} (base) vs {n!r} (new) — the runs are not from the same machine setup"
            )
    bt, nt = base.host.get("thp") or {}, new.host.get("thp") or {}
    for k in ("enabled", "defrag"):
        if bt.get(k) != nt.get(k):
            out.append(f"system THP {k} differs: {bt.get(k)!r} vs {nt.get(k)!r}")
    if base.dataset != new.dataset:
        out.append(f"dataset differs: {base.dataset} vs {new.dataset}")
    if base.kind != new.kind:
        out.append(f"suite kind differs: {base.kind} vs {new.kind}")
    for section, key in (
        ("sysbench", "duration_s"),
        ("server", "buffer_pool_mb"),
        ("server", "settings"),
    ):
        b = (base.suite.get(section) or {}).get(key)
        n = (new.suite.get(section) or {}).get(key)
        if b != n:
            out.append(f"suite {section}.{key} differs: {b!r} vs {n!r}")
    bf, nf = _thp_in_force(base), _thp_in_force(new)
    for mode_name in sorted(set(bf) & set(nf)):
        if bf[mode_name] != nf[mode_name]:
            out.append(
                f"THP mode {mode_name!r} meant different settings: {sorted(bf[mode_name])} vs {sorted(nf[mode_name])}"
            )
    bv, nv = _alloc_versions(base), _alloc_versions(new)
    for name in sorted(set(bv) & set(nv)):
        if bv[name] != nv[name]:
            out.append(f"allocator {name} version differs: {bv[name]} vs {nv[name]}")
    for run, side in ((base, "base"), (new, "new")):
        if run.status != "finished":
            out.append(
                f"{side} run {run.run_id} is {run.status}: only its finished cells are compared"
            )
        if run.has_standin:
            out.append(f"{side} run uses a MongoDB protocol stand-in: {tables.STANDIN_LABEL}")
    if mode == "upgrade":
        out.append(
            f"upgrade check: {base.servers[0]} -> {new.servers[0]}; points matched by allocator"
        )
    return out


def _thp_in_force(run: Run) -> dict[str, set]:
    out: dict[str, set] = defaultdict(set)
    for c in run.cells.values():
        thp = c.get("thp") or {}
        f = thp.get("in_force") or {}
        if thp.get("requested") and f:
            out[thp["requested"]].add(f"enabled={f.get('enabled')}, defrag={f.get('defrag')}")
    return out


def _alloc_versions(run: Run) -> dict[str, str]:
    return {
        str(c["allocator"]["name"]): str(c["allocator"].get("version"))
        for c in run.cells.values()
        if (c.get("allocator") or {}).get("name")
    }


# -- entry points -------------------------------------------------------------------------------
def compare_runs(base: Path, new: Path, threshold_pct: float = 5.0) -> Comparison:
    if not 0 <= threshold_pct < 100:
        raise AnalysisError(f"threshold {threshold_pct}: expected a percentage from 0 to 100")
    brun, nrun = load_run(Path(base)), load_run(Path(new))
    mode, pairs = _server_pairs(brun, nrun)
    cmp = Comparison(brun.path, nrun.path, brun.run_id, nrun.run_id, mode, threshold_pct)
    cmp.warnings = _differences(brun, nrun, mode)
    base_only, new_only = [], []
    for bserver, nserver in pairs:
        for workload in _unique(brun.workloads + nrun.workloads):
            metric = tables.metric_of(brun, workload)
            bvals = {k: v for k, v in _values(brun, bserver, metric).items() if k[0] == workload}
            nvals = {k: v for k, v in _values(nrun, nserver, metric).items() if k[0] == workload}
            for key in sorted(set(bvals) | set(nvals), key=lambda k: _order(brun, nrun, k)):
                if key not in nvals:
                    base_only.append(_key_text(key))
                elif key not in bvals:
                    new_only.append(_key_text(key))
                else:
                    cmp.points.append(
                        _throughput_point(
                            brun,
                            nrun,
                            key,
                            bvals[key],
                            nvals[key],
                            metric,
                            bserver,
                            nserver,
                            threshold_pct,
                        )
                    )
    if not cmp.points:
        raise AnalysisError(
            f"{brun.path} and {nrun.path} have no point in common (workload, allocator, threads, THP"
            " mode): nothing to compare"
        )
    cmp.unmatched = {"base_only": base_only, "new_only": new_only}
    if base_only or new_only:
        cmp.warnings.append(
            f"{len(base_only)} point(s) only in base and {len(new_only)} only in new: not compared"
        )
    if brun.workloads == nrun.workloads and all(
        brun.threads(w) == nrun.threads(w) for w in brun.workloads
    ):
        cmp.memory = _memory_points(brun, nrun, pairs, threshold_pct)
    else:
        cmp.warnings.append(
            "memory not compared: the two runs swept different workloads or threads"
        )
    weak = [p for p in cmp.points if p.weak and p.verdict != NO_VERDICT]
    if weak:
        cmp.warnings.append(
            f"{len(weak)} verdict(s) rest on one server life per side (interval samples): they capture"
            " noise within a run, not between runs. Re-run both sides with --repeat 3 for a firm answer."
        )
    none = [p for p in cmp.points if p.verdict == NO_VERDICT and p.evidence == "none"]
    if none:
        cmp.warnings.append(
            f"{len(none)} point(s) have one figure per side and too few interval samples: no verdict"
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


def render_text(cmp: Comparison) -> str:
    """The terminal table (plain text, no colour codes)."""
    from analysis.compare_output import render_text as _render

    return _render(cmp)


def write_outputs(cmp: Comparison, out_dir: Path) -> list[Path]:
    """compare.md and compare.html into out_dir; returns their paths."""
    from analysis.compare_output import write_outputs as _write

    return _write(cmp, Path(out_dir))
