"""The report's fragmentation section: growth per hour, release after a burst, and what the
reports claimed against what this run measured (figures: analysis/fragmentation_plots.py).

Everything here comes from analysis/growth_rate.py (growth in MB per hour, per life and per arm),
analysis/growth.py (a burst's release, one value per server life) and the run's verdicts
(analysis/verdicts.py: paired by round against the baseline). A claim is checked only with the
arms this run measured; a claim about an arm the run lacks says so instead of guessing. A claim
is called reproduced only from decided tests: a verdict that is not undecided, or an arm's state
(still growing / levelled off) from its own interval, never from per-life figures alone.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

from analysis import growth as g
from analysis import growth_rate as gr
from analysis import verdicts as vmod
from analysis.metrics import BETTER, NONE, UNDECIDED, WORSE
from analysis.stats import median
from analysis.table_model import Cell, Table, count, num, text
from analysis.verdict_tables import ratio_ci
from rundir.derive.levels import in_use_split
from rundir.read import Run

MB = 1024.0
# bug 95065's "grows to a maximum": the allocator's held part grew by this share of RSS
HELD_PCT = 10.0
REPRODUCED, NOT_REPRODUCED, UNDECIDED_CLAIM, NOT_MEASURED = (
    "reproduced",
    "not reproduced",
    "undecided",
    "not measured here",
)


def _mb(kb: float | None) -> float | None:
    return None if kb is None else kb / MB


def _med(xs) -> float | None:
    vals = [x for x in xs if x is not None]
    return median(vals) if vals else None


def scenario_workloads(run: Run) -> list[str]:
    """The run's scenario workloads, in the order they ran."""
    seen: dict[str, None] = {}
    for r in run.rows:
        if r.get("scenario_cycle") is not None:
            seen.setdefault(r["workload"], None)
    return list(seen)


def lives_by(run: Run) -> dict[tuple[str, str, str, str], list[g.LifeGrowth]]:
    """(server, workload, allocator, thp) -> its lives, in round order."""
    out: dict[tuple, list[g.LifeGrowth]] = defaultdict(list)
    for life in g.life_growth(run):
        out[(life.server, life.workload, life.allocator, life.thp)].append(life)
    for v in out.values():
        v.sort(key=lambda x: x.repeat)
    return dict(out)


def _verdict(judged, metric, workload, allocator) -> vmod.Verdict | None:
    return next(
        (
            v
            for v in judged
            if v.metric == metric and v.workload == workload and v.allocator == allocator
        ),
        None,
    )


def _verdict_cell(v: vmod.Verdict | None) -> Cell:
    if v is None:
        return text("–")
    return Cell(v.ratio, f"{ratio_ci(v)} {v.word}")


def _states(lives: list[gr.LifeRate], margin: float) -> str:
    states = [x.state(margin) for x in lives]
    return ", ".join(f"{s} {states.count(s)}/{len(states)}" for s in dict.fromkeys(states))


def rates_by(run: Run) -> dict[tuple[str, str, str, str], list[gr.LifeRate]]:
    """(server, workload, allocator, thp) -> its lives' rates, in round order."""
    out: dict[tuple, list[gr.LifeRate]] = defaultdict(list)
    for life in gr.life_rates(run):
        out[(life.server, life.workload, life.allocator, life.thp)].append(life)
    for v in out.values():
        v.sort(key=lambda x: x.repeat)
    return dict(out)


def _rate_cell(r: gr.Rate | None, unit: str = "") -> Cell:
    """A combined rate with its 95% interval: "+12.3 [+4.0 – +20.6]"."""
    if r is None:
        return text("–")
    lo, hi = r.interval()
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return Cell(r.value, f"{r.value:+.1f}{unit}")
    return Cell(r.value, f"{r.value:+.1f}{unit} [{lo:+.1f} – {hi:+.1f}]")


def _untouched_mb(run: Run, lives: list[gr.LifeRate]) -> float | None:
    """Median over the lives of what the allocator counted in use at the last cycle's end but the
    kernel never backed (alloc_untouched_kb; re-derived from the heap and in use for a row written
    before the column)."""
    out = []
    for x in lives:
        rows = [r for r in run.rows if r["cell"] == x.cell and r["workload"] == x.workload]
        if not rows:
            continue
        last = max(rows, key=lambda r: r["scenario_cycle"])
        v = last.get("alloc_untouched_kb")
        if v is None:
            v = in_use_split(last.get("heap_resident_kb"), last.get("alloc_in_use_kb"))[1]
        if v is not None:
            out.append(v / MB)
    return median(out) if out else None


def growth_table(run: Run, judged: list[vmod.Verdict], base: str) -> Table | None:
    lives = rates_by(run)
    rows = [k for k in lives if any(x.rss for x in lives[k])]
    if not rows:
        return None
    margin = gr.margin_of(run)
    several = len({k[0] for k in rows}) > 1
    t = Table(
        "growth",
        f"Growth by scenario (MB per hour; verdicts against {base})",
        "Each scenario repeats one cycle many times in one server life; RSS is read when each "
        "cycle ends (a phase boundary). Per life, growth is the least-squares slope of RSS "
        "against the wall time each cycle ended, over ALL its cycles, in MB per hour (its error "
        "widened for cycles that follow each other); per 100 cycles: the same slope against the "
        "cycle's number. An arm's figure combines its lives (inverse-variance weights with a "
        "between-life variance; Hartung-Knapp 95% interval). 'State' is the arm's test: the "
        "slope over the last half of the cycles, combined over lives, is still growing (its "
        f"interval above 0 and the slope at least {margin:g} MB/h) or levelled off (the whole "
        f"interval within ±{margin:g} MB/h), else unclear; the lives' own states follow. Held: "
        "the same rate of what the allocator holds resident beyond what it says is in use "
        "(empty where the allocator keeps no totals: mimalloc, TBB); never touched: what the "
        "allocator counts in use at the last cycle's end that the kernel never backed (malloc'ed, "
        "never written: not part of RSS, so held never goes below 0). Server's account: the rate "
        "of what the server says it uses (MariaDB Memory_used, MySQL performance_schema): RSS "
        "growing while this stays flat is memory the allocator keeps, not the server. "
        "Throughput: the scenario's transactions per second, median over cycles and lives. The "
        f"verdict: the arm's growth minus {base}'s in MB/h, paired by round, with its interval "
        f"(no difference: the whole interval within ±{margin:g} MB/h). The scenarios compress "
        "days into minutes: MB per 100 cycles carries over to a server whose cycle is a "
        "nightly dump, MB per hour is this run's clock.",
        (["server"] if several else [])
        + [
            "scenario",
            "allocator",
            "THP",
            "cycles",
            "hours",
            "RSS end (MB)",
            "growth MB/h",
            "growth MB / 100 cycles",
            "state",
            "held MB/h",
            "in use, never touched (MB)",
            "server's account MB/h",
            "throughput",
            "growth vs baseline",
        ],
    )
    order = {w: i for i, w in enumerate(scenario_workloads(run))}
    allocs = {a: i for i, a in enumerate(run.allocators)}
    for key in sorted(rows, key=lambda k: (k[0], order.get(k[1], 99), allocs.get(k[2], 99))):
        server, wl, alloc, thp = key
        ls = [x for x in lives[key] if x.rss]
        hours = _med(x.hours for x in ls)
        row = [
            text(wl),
            text(alloc),
            text(thp),
            count(median([x.cycles for x in ls])),
            num(hours),
            num(_med(x.rss_end_mb for x in ls)),
            _rate_cell(gr.arm_rate(ls, lambda x: x.rss)),
            _rate_cell(gr.arm_rate(ls, lambda x: x.rss_per_100)),
            text(f"{gr.arm_state(ls, margin)} (lives: {_states(ls, margin)})"),
            _rate_cell(gr.arm_rate(ls, lambda x: x.held)),
            num(_untouched_mb(run, ls)),
            _rate_cell(gr.arm_rate(ls, lambda x: x.account)),
            num(_med(x.tps for x in ls)),
            _verdict_cell(_verdict(judged, gr.RSS_GROWTH_MB_PER_HOUR, wl, alloc)),
        ]
        t.rows.append(([text(server)] if several else []) + row)
    return t


def release_table(run: Run, judged: list[vmod.Verdict], base: str) -> Table | None:
    lives = lives_by(run)
    keys = [k for k, ls in lives.items() if any(x.returned is not None for x in ls)]
    spikes = [k for k, ls in lives.items() if k[1] == "spike"]
    keys = list(dict.fromkeys(keys + spikes))
    if not keys:
        return None
    t = Table(
        "release",
        f"What a burst gives back (spike and idle; verdicts against {base})",
        "Each cycle runs the largest client count for a short burst, then no client at all "
        "while RSS is read every second. Returned = (RSS at the burst's end − RSS after the "
        "idle time) / (RSS at the burst's end − RSS before the burst): 1 gave everything back, "
        "0 kept it all (empty where the burst grew RSS by less than 1 MB). Back within 10%: "
        "seconds until RSS was within 10% of the pre-burst level (0: the burst's end already "
        "was; a burst that never was counts as never). Medians over bursts, then over lives. The "
        "verdict: ratio − 1 is the difference in the share returned (0.30 = 30 points more).",
        ["allocator", "THP", "bursts", "RSS before", "RSS peak of the burst", "RSS after idle",
         "returned", "back within 10% (s)", "returned vs baseline"],
    )  # fmt: skip
    allocs = {a: i for i, a in enumerate(run.allocators)}
    for key in sorted(keys, key=lambda k: (k[0], k[1], allocs.get(k[2], 99))):
        server, wl, alloc, thp = key
        ls = lives[key]
        rows = [r for r in run.rows if r["workload"] == wl and r["allocator"] == alloc]
        t.rows.append(
            [
                text(alloc),
                text(thp),
                count(median([x.cycles for x in ls])),
                num(_mb(_pre_burst(run, alloc, thp, wl))),
                num(_mb(_med(_burst_end(run, r) for r in rows))),
                num(_mb(_med(r.get("rss_end_kb") for r in rows))),
                num(_med(x.returned for x in ls)),
                _seconds(_med(x.return_s for x in ls)),
                _verdict_cell(_verdict(judged, g.BURST_RETURNED, wl, alloc)),
            ]
        )
    return t


def _seconds(s: float | None) -> Cell:
    if s is not None and math.isinf(s):
        return Cell(s, "not within the idle time")
    return num(s)


def _burst_end(run: Run, row: dict) -> float | None:
    """The burst's RSS: the highest the level saw (the timeline's samples and its boundaries),
    which is at the burst's end unless RSS still rose while idle."""
    return row.get("rss_peak_kb")


def _pre_burst(run: Run, alloc: str, thp: str, wl: str) -> float | None:
    """RSS right before each burst: its level's RSS at start (the phase boundary)."""
    return _med(
        r.get("rss_start_kb")
        for r in run.rows
        if r["workload"] == wl and r["allocator"] == alloc and r["thp"] == thp
    )


# -- the reports' claims --------------------------------------------------------------------
@dataclass
class Claims:
    """What the claims are checked against: the run's lives and verdicts (any baseline)."""

    run: Run
    base: str
    judged: list[vmod.Verdict]
    lives: dict[tuple, list[g.LifeGrowth]]
    rates: dict[tuple, list[gr.LifeRate]]
    margin: float
    _other: dict[str, list[vmod.Verdict]]

    def verdict(self, metric, workload, allocator, baseline=None) -> vmod.Verdict | None:
        b = baseline or self.base
        if b == self.base:
            judged = self.judged
        else:
            if b not in self._other:
                self._other[b] = vmod.run_verdicts(self.run, b)
            judged = self._other[b]
        return _verdict(judged, metric, workload, allocator)

    def lives_of(self, workload: str, allocator: str) -> list[g.LifeGrowth]:
        return [
            x for k, ls in self.lives.items() if k[1] == workload and k[2] == allocator for x in ls
        ]

    def rates_of(self, workload: str, allocator: str) -> list[gr.LifeRate]:
        return [
            x for k, ls in self.rates.items() if k[1] == workload and k[2] == allocator for x in ls
        ]

    def has(self, allocator: str) -> bool:
        return allocator in self.run.allocators

    def judged_workloads(self) -> list[str]:
        """The workloads growth is judged on, in the order they ran: a run's scenario workloads
        (session_churn's one per block); a soak's one series per life, named after its scenario
        when the scenario soaked alone (`all scenarios` when they shared the life)."""
        if gr.is_soak(self.run):
            return list(dict.fromkeys(k[1] for k in self.rates))
        return scenario_workloads(self.run)

    def workloads(self, scenario: str) -> list[str]:
        return [w for w in self.judged_workloads() if gr.scenario_of(w) == scenario]


def _is(v: vmod.Verdict | None, *words: str) -> bool | None:
    """True/False whether the verdict is one of `words` (sequential rule's words), None when it
    is undecided or missing."""
    if v is None or v.verdict == UNDECIDED:
        return None
    return v.verdict in words


def _tested(
    ls: list[gr.LifeRate], get: Callable[[gr.LifeRate], gr.Rate | None], margin: float
) -> bool | None:
    """The arm's rate tested with its own interval (growth_rate.state): still growing True,
    levelled off False, unclear None."""
    st = gr.state(gr.arm_rate(ls, get), margin)
    return {gr.GROWING: True, gr.LEVELLED: False}.get(st)


def _growing(c: Claims, wl: str, alloc: str) -> bool | None:
    """The arm's RSS still growing over the last half of its cycles (the test, not the lives'
    majority): True; levelled off: False; else None."""
    return _tested(c.rates_of(wl, alloc), lambda x: x.tail, c.margin)


def _account_flat(c: Claims, wl: str, alloc: str) -> bool | None:
    """The server's own account levelled off over the whole scenario (its rate's interval within
    the margin): True; still growing: False; else None."""
    t = _tested(c.rates_of(wl, alloc), lambda x: x.account, c.margin)
    return None if t is None else not t


def _outcome(checks: list[bool | None]) -> str:
    if any(c is False for c in checks):
        return NOT_REPRODUCED
    if all(c is True for c in checks):
        return REPRODUCED
    return UNDECIDED_CLAIM


def _growth_text(c: Claims, wl: str, alloc: str) -> str:
    ls = c.rates_of(wl, alloc)
    r = gr.arm_rate(ls, lambda x: x.rss)
    if r is None:
        return f"{alloc}: no growth figure"
    return f"{alloc} {_rate_cell(r).text} MB/h ({gr.arm_state(ls, c.margin)})"


def _vs_text(v: vmod.Verdict | None, alloc: str, baseline: str) -> str:
    return f"{alloc} vs {baseline}: " + (f"{ratio_ci(v)} {v.word}" if v else "no verdict")


def _tcmalloc_baseline(c: Claims) -> bool:
    """The baseline is a tcmalloc: a binary's own (Debian's MySQL 9.7 links gperftools') or
    the preloaded one."""
    if c.base.startswith("tcmalloc"):
        return True
    for cell in c.run.cells.values():
        if (cell.get("allocator") or {}).get("name") == c.base:
            label = str(((cell.get("verification") or {}).get("builtin") or {}).get("label") or "")
            return "tcmalloc" in label
    return False


def _mdev_30889(c: Claims):
    wls = c.workloads("dump")
    if not wls:
        return None
    wl = wls[0]
    if c.has("glibc") and (c.has("tcmalloc") or c.has("jemalloc")):
        checks, said = [_growing(c, wl, "glibc")], [_growth_text(c, wl, "glibc")]
        for alloc, want in (("tcmalloc", (BETTER,)), ("jemalloc", (NONE, WORSE))):
            if c.has(alloc):
                v = c.verdict(gr.RSS_GROWTH_MB_PER_HOUR, wl, alloc, baseline="glibc")
                checks.append(_is(v, *want))
                said.append(_vs_text(v, alloc, "glibc"))
        checked = "dump: glibc still growing; tcmalloc grows less per hour; jemalloc not less"
    elif _tcmalloc_baseline(c) and c.has("jemalloc"):
        # no glibc arm (a binary that links tcmalloc): what can be checked is tcmalloc vs jemalloc
        v = c.verdict(gr.RSS_GROWTH_MB_PER_HOUR, wl, "jemalloc")
        checks = [_is(v, WORSE)]
        said = [
            _growth_text(c, wl, c.base),
            _growth_text(c, wl, "jemalloc"),
            _vs_text(v, "jemalloc", c.base),
        ]
        checked = f"dump (no glibc arm): jemalloc grows more per hour than {c.base} (tcmalloc)"
    else:
        return None
    return (
        "MDEV-30889",
        "a nightly mariadb-dump fragments glibc's heap: RSS grows dump after dump until the OOM "
        "killer; tcmalloc fixed it, jemalloc did not",
        checked,
        "; ".join(said),
        _outcome(checks),
    )


def _operator_1808(c: Claims):
    wls = c.workloads("dump")
    ref = next((a for a in ("glibc", "jemalloc") if c.has(a)), None)
    if not wls or not c.has("jemalloc-bg") or ref is None:
        return None
    wl = wls[0]
    v = c.verdict(gr.RSS_GROWTH_MB_PER_HOUR, wl, "jemalloc-bg", baseline=ref)
    checks = [_growing(c, wl, ref), _is(v, BETTER)]
    said = [
        _growth_text(c, wl, ref),
        _growth_text(c, wl, "jemalloc-bg"),
        _vs_text(v, "jemalloc-bg", ref),
    ]
    return (
        "mariadb-operator #1808",
        "RSS climbs after each backup until jemalloc with background_thread and 5 s dirty/muzzy "
        "decay (a physical backup there; a logical dump here)",
        f"dump: {ref} still growing; jemalloc-bg grows less per hour than {ref}",
        "; ".join(said),
        _outcome(checks),
    )


def _kb_memory_used(c: Claims):
    wls = c.workloads("session_churn")
    if not wls:
        return None
    checks, said = [], []
    for wl in wls:
        grows, flat = _growing(c, wl, c.base), _account_flat(c, wl, c.base)
        checks.append(None if grows is None or flat is None else (grows and flat))
        srv = gr.arm_rate(c.rates_of(wl, c.base), lambda x: x.account)
        said.append(
            f"{wl}: {_growth_text(c, wl, c.base)}, server's account "
            + (f"{_rate_cell(srv).text} MB/h" if srv else "not read")
        )
    return (
        "MariaDB KB (allocator choice)",
        "if Memory_used does not grow but the process does, replace malloc",
        "session churn: the baseline's RSS still growing while the server's own account is flat",
        "; ".join(said),
        _any_block(checks),
    )


def _any_block(checks: list[bool | None]) -> str:
    """Reproduced when one block (thread cache size) shows it, not when every block is decided
    against it, else undecided."""
    if any(x is True for x in checks):
        return REPRODUCED
    if checks and all(x is False for x in checks):
        return NOT_REPRODUCED
    return UNDECIDED_CLAIM


def _bug_95065(c: Claims):
    """Grows to a maximum and is not freed: over the whole scenario (its first half included:
    that is where the heap fills), the allocator's held part grows by at least HELD_PCT of RSS in
    most lives, its rate over all cycles is still growing by its own test, and the server's own
    account's rate is levelled off by its test."""
    wls = c.workloads("fulltext")
    if not wls:
        return None
    wl = wls[0]
    ls = c.lives_of(wl, c.base)
    held = [x.over_scenario(x.held_kb) for x in ls]
    account = [x.over_scenario(x.account_kb) for x in ls]
    ends = [x.rss_end_kb for x in ls]
    kept = [
        None if h is None or not e else h >= HELD_PCT / 100 * e
        for h, e in zip(held, ends, strict=True)
    ]
    rates = c.rates_of(wl, c.base)
    held_grows = _tested(rates, lambda x: x.held, c.margin)
    said = (
        f"{c.base}: over the {ls[0].cycles if ls else 0} cycles the allocator's held part "
        + ", ".join(f"{h / MB:+.0f}" for h in held if h is not None)
        + " MB, the server's own account "
        + ", ".join(f"{a / MB:+.1f}" for a in account if a is not None)
        + f" MB (per life); {_growth_text(c, wl, c.base)}; held "
        + _rate_cell(gr.arm_rate(rates, lambda x: x.held)).text
        + " MB/h"
    )
    return (
        "bug 95065 / PS-5312",
        "fulltext queries leave RSS grown to a maximum and not freed for long: fragmentation "
        "of InnoDB's query heap (up to ~80 MB of small blocks), not a leak",
        f"fulltext: over the scenario the allocator holds {HELD_PCT:g}% of RSS more while the "
        "server's own account stays flat",
        said,
        _outcome([_most(kept), held_grows, _account_flat(c, wl, c.base)]),
    )


def _most(flags: list[bool | None]) -> bool | None:
    known = [f for f in flags if f is not None]
    if not known:
        return None
    if sum(known) * 2 > len(known):
        return True
    if (len(known) - sum(known)) * 2 > len(known):
        return False
    return None


def _callaghan_2025(c: Claims):
    arm = next((a for a in ("glibc-arena1", "glibc-arena2") if c.has(a)), None)
    if arm is None or c.base not in ("glibc",):
        return None
    fewer = slower = seen = open_g = open_t = 0
    for wl in c.judged_workloads():
        gv = c.verdict(gr.RSS_GROWTH_MB_PER_HOUR, wl, arm)
        tv = next(
            (
                v
                for v in c.judged
                if v.metric == vmod.THROUGHPUT and v.workload == wl and v.allocator == arm
            ),
            None,
        )
        if gv is None and tv is None:
            continue
        seen += 1
        fewer += bool(gv and gv.verdict == BETTER)
        slower += bool(tv and tv.verdict == WORSE)
        open_g += bool(gv is None or gv.verdict == UNDECIDED)
        open_t += bool(tv is None or tv.verdict == UNDECIDED)
    if not seen:
        return None
    checks = [
        True if fewer else (None if open_g else False),
        True if slower else (None if open_t else False),
    ]
    return (
        "Callaghan 2025",
        "glibc with one arena: the bloat mostly gone, throughput poor",
        f"{arm} (the deployed arena cap) grows less per hour and is slower than glibc",
        f"{arm}: grows less in {fewer} and is slower in {slower} of {seen} scenario(s)",
        _outcome(checks),
    )


def _idle_keeps(c: Claims):
    wls = c.workloads("spike")
    pairs = [
        (a, b)
        for a, b in (("jemalloc-bg", "jemalloc"), ("tcmalloc-release", "tcmalloc"))
        if c.has(a) and c.has(b)
    ]
    if not wls or not pairs:
        return None
    wl = wls[0]
    checks, said = [], []
    for tuned, plain in pairs:
        v = c.verdict(g.BURST_RETURNED, wl, tuned, baseline=plain)
        checks.append(_is(v, BETTER))
        said.append(_vs_text(v, tuned, plain))
    return (
        "docs/facts.md (idle servers)",
        "an idle server gives nothing back: jemalloc's decay without a background thread and "
        "gperftools' page heap keep what they hold",
        "spike: the tuned arm (background thread; release rate 10) returns more of the burst "
        "than the same allocator untuned",
        "; ".join(said),
        _outcome(checks),
    )


CLAIMS: tuple[Callable[[Claims], tuple | None], ...] = (
    _mdev_30889,
    _operator_1808,
    _kb_memory_used,
    _bug_95065,
    _callaghan_2025,
    _idle_keeps,
)


def claims_table(run: Run, judged: list[vmod.Verdict], base: str) -> Table | None:
    if not scenario_workloads(run):
        return None
    c = Claims(run, base, judged, lives_by(run), rates_by(run), gr.margin_of(run), {})
    t = Table(
        "claims",
        "What the reports claimed vs what this run measured",
        "Each report's claim, what of it this run can check (its scenario and arms), what it "
        "measured, and the outcome: reproduced (every check holds), not reproduced (a check "
        "fails), undecided (a verdict or a state's test is undecided: more rounds or longer "
        "lives would tell). Every check is a decided test (a verdict, or an arm's state from "
        "its own interval), so a claim is never called reproduced beside an undecided verdict. "
        "A claim about an arm this run lacks is left out. Verdicts "
        f"are paired by round against {base} unless another arm is named.",
        ["report", "claimed", "checked here", "measured", "outcome"],
    )
    if vmod.why_no_verdicts(run, base):
        t.notes.append(f"No verdicts: {vmod.why_no_verdicts(run, base)}; claims cannot be checked.")
        return t
    for claim in CLAIMS:
        row = claim(c)
        if row is not None:
            t.rows.append([text(x) for x in row])
    return t
