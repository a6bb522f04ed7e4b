"""Did the upgrade change the answer? Several servers in one run, compared paired by round.

A run with several servers ([server] servers, `--servers old=...,new=...`) runs every server x
allocator arm once per round, in a balanced order (suites/runner/plan.py). Each server other than
the baseline server (BASE; the first unless `baseline_server` says) is compared with it here:

NEW/BASE per allocator. For allocator a at a point (workload, THP mode, threads; or the whole
life for memory) and round r, d[a, r] = log y(NEW, a, r) - log y(BASE, a, r): the two lives of
one allocator in the same round, so drift that hits the round cancels, as in the allocator
verdicts (analysis/sequential.py). The allocators of a point have independent differences (no
life is in two of them), so their spread is pooled with a (R - 1) degrees of freedom per
allocator (block_contrasts with `independent`: the paired t test when one allocator has the
point; an allocator far noisier than the others is judged on its own differences), and the
interval is a Student t interval at the look's level (the same spending of the 5% over the
planned looks as every verdict of the run). Throughput and p95 latency are compared on the log
scale, RSS at stop too; RSS growth (which can be zero or negative) on the additive scale, as a
share of BASE's mean RSS at stop, as `compare` and the allocator verdicts do.

The interaction: does the upgrade change which allocator wins? For allocator a and the run's
baseline allocator g (glibc), the ratio of ratios (NEW_a / NEW_g) / (BASE_a / BASE_g) =
exp(mean_r (d[a, r] - d[g, r])): how much a's advantage over g moved with the upgrade. Its
interval comes from the same block contrasts the allocator verdicts use, over the allocators'
NEW - BASE differences with g as the baseline (the shared g differences make Satterthwaite's
degrees of freedom right). "carries over": the whole interval lies within the minimum effect;
"changes": significant and beyond it (a gains or loses on g with the upgrade); else undecided.

Verdict words are the allocator verdicts' (faster / slower / none / undecided, said in each
metric's words) and every verdict is a row of verdicts.csv with server = NEW and baseline_server =
BASE. The same build listed under two names (`--servers a=host,b=host`) is a server A/A check: it
must never be called different, and the report says so loudly if it is.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

from analysis import memory
from analysis.judge import Judged, judge_scaled, on_scale
from analysis.metrics import (
    BETTER,
    DECIDED,
    INTERACTION,
    LAT_P95,
    METRICS,
    NONE,
    RSS_GROWTH,
    RSS_STOP,
    THROUGHPUT,
    UNDECIDED,
    WORSE,
)
from analysis.sequential import Design
from analysis.table_model import Cell, Table, text
from analysis.verdicts import (
    Verdict,
    Verdicts,
    aa_name,
    baseline_of,
    design_of,
    rounds_of,
    throughput_points,
)
from rundir.read import Run

CARRIES_OVER = METRICS[INTERACTION].same
CHANGES = METRICS[INTERACTION].better  # either direction of the interaction is a change
_ZERO = "\0zero"  # the exact baseline of the NEW - BASE differences (block_contrasts)


@dataclass(frozen=True)
class UpgradeVerdict(Verdict):
    """A verdict between two servers: NEW/BASE of one allocator (allocator == baseline), or the
    interaction of an allocator with the baseline allocator (metric INTERACTION)."""

    @property
    def meaning(self) -> str:
        if self.metric == INTERACTION:
            g = self.baseline
            if self.verdict == NONE:
                return (
                    f"the allocator choice carries over: {self.allocator} against {g} moved by "
                    "less than the minimum effect"
                )
            if self.verdict == UNDECIDED:
                return "not decided: the interval still allows a change beyond the minimum effect"
            gained = "gains on" if self.verdict == BETTER else "loses to"
            return f"the allocator choice changes: {self.allocator} {gained} {g} with the upgrade"
        if self.verdict in (NONE, UNDECIDED):
            return super().meaning
        return self.word + " after the upgrade"


@dataclass(frozen=True)
class Pair:
    """Two servers of the run compared: BASE (the baseline server) and NEW, on one engine."""

    base_name: str
    new_name: str
    base: str  # the labels their rows carry
    new: str

    @property
    def text(self) -> str:
        return f"{self.base} → {self.new}"


# -- the run's servers ------------------------------------------------------------------------------
def servers(run: Run) -> list[dict]:
    """The run's server records (manifest servers[], format 5), baseline first."""
    found = [s for s in run.manifest.get("servers") or [] if isinstance(s, dict)]
    base = baseline_server(run)
    return sorted(found, key=lambda s: s.get("name") != base)


def baseline_server(run: Run) -> str | None:
    """The name of the server the others are compared with; None for a run of one server."""
    return (run.manifest.get("design") or {}).get("baseline_server")


def several(run: Run) -> bool:
    """Whether the run compares servers ([server] servers with more than one)."""
    return len([s for s in run.manifest.get("servers") or [] if s.get("name")]) > 1


def _row_server(run: Run) -> dict[str, tuple[str, str]]:
    """Each row label -> (server name, engine), from the cells that carry it."""
    out: dict[str, tuple[str, str]] = {}
    for r in run.rows:
        c = run.cell(r["cell"])
        name = str((c.get("server") or {}).get("name") or "")
        out.setdefault(r["server"], (name, str(r.get("engine") or c.get("engine") or "innodb")))
    return out


def pairs(run: Run) -> list[Pair]:
    """(BASE, NEW) for every other server and engine, in the run's order."""
    if not several(run):
        return []
    base = baseline_server(run)
    by = _row_server(run)
    out = []
    for label, (name, engine) in by.items():
        if name == base:
            continue
        base_label = next((x for x, (n, e) in by.items() if n == base and e == engine), None)
        if base_label is not None:
            out.append(Pair(base, name, base_label, label))
    return out


def _records(run: Run, pair: Pair) -> tuple[dict, dict]:
    """The server records (manifest servers[]) of BASE and NEW."""
    recs = {s.get("name"): s for s in servers(run)}
    return recs.get(pair.base_name) or {}, recs.get(pair.new_name) or {}


def same_build(run: Run, pair: Pair) -> bool:
    """Both names run one build (binary, version string and root): a server A/A check."""
    a, b = _records(run, pair)

    def build(s: dict) -> tuple:
        return s.get("binary"), s.get("version_string"), (s.get("root") or {}).get("path")

    return bool(a) and build(a) == build(b)


def same_flavor(run: Run, pair: Pair) -> bool:
    """Both servers of one flavor (an upgrade); else a choice between servers."""
    a, b = _records(run, pair)
    return a.get("flavor") == b.get("flavor")


# -- the statistics -------------------------------------------------------------------------------
def _judge(
    metric: str,
    base: dict[str, dict[int, float]],
    new: dict[str, dict[int, float]],
    design: Design,
    where: str,
    norms: dict[str, float] | None = None,
) -> tuple[Judged, dict[str, dict[int, float]]]:
    """(NEW/BASE per allocator, the NEW - BASE differences on the metric's scale) at one point:
    each allocator's differences over the rounds both servers ran, judged against an exact 0 as
    independent arms (module docstring). A LOG metric's non-positive value refuses the point
    (analysis/judge.py); DIFF metrics are divided by each allocator's norm (BASE's mean RSS at
    stop)."""
    metric_ = METRICS[metric]
    b, notice = on_scale(metric_, base, f"{where} (BASE)")
    n, notice_new = on_scale(metric_, new, f"{where} (NEW)")
    if b is None or n is None:
        return Judged(notice=notice or notice_new), {}
    diffs: dict[str, dict[int, float]] = {}
    for a in b:
        if a in n:
            d = {r: n[a][r] - b[a][r] for r in sorted(set(b[a]) & set(n[a]))}
            if len(d) >= 2:
                diffs[a] = d
    if not diffs:
        return Judged(), {}
    rounds = sorted({r for d in diffs.values() for r in d})
    values = {_ZERO: {r: 0.0 for r in rounds}, **diffs}
    judged = judge_scaled(metric_, values, _ZERO, design, norms, independent=True, where=where)
    return judged, diffs


def _interaction(diffs: dict[str, dict[int, float]], g: str, design: Design) -> Judged:
    """allocator -> ratio of ratios against allocator g, from the log NEW - BASE differences."""
    if g not in diffs or len(diffs) < 2:
        return Judged()
    return judge_scaled(METRICS[INTERACTION], diffs, g, design)


def why_no_upgrade_verdicts(run: Run) -> str | None:
    if not several(run):
        return "the run measured one server"
    if rounds_of(run) < 2:
        return (
            "one round only: a single life per server and allocator says nothing about how much "
            "a second would differ (run at least 3 rounds)"
        )
    if not pairs(run):
        return "the baseline server has no measured level to compare with"
    return None


def upgrade_verdicts(
    run: Run, baseline: str | None = None, min_effect_pct: float | None = None
) -> Verdicts:
    """Every NEW/BASE verdict (throughput, p95, RSS at stop, RSS growth) per allocator and the
    interactions, for every server paired with the baseline server, with the notices of the
    points the judge refused; empty when why_no_upgrade_verdicts says."""
    if why_no_upgrade_verdicts(run):
        return Verdicts()
    design = design_of(run, min_effect_pct)
    g = baseline_of(run, baseline)
    out = Verdicts()
    tp = _by_point(throughput_points(run))
    lat = _by_point(throughput_points(run, "lat_p95_ms"))
    stop, growth = memory.lives_by_point(run)
    notices: list[str] = []
    for pair in pairs(run):

        def add(wl, thp, th, metric, judged: Judged, base_alloc=None, pair=pair, skip=()):
            if judged.notice:
                notices.append(judged.notice)
            for a in run.allocators:
                if a in judged.arms and a not in skip:
                    j = judged.arms[a]
                    out.append(
                        UpgradeVerdict(
                            pair.new, wl, a, base_alloc or a, thp, th, metric, j.ratio, j.lo,
                            j.hi, j.verdict, j.rounds, j.level, a == aa_name(g), pair.base,
                        )
                    )  # fmt: skip

        for (wl, thp, th), by_server in tp.items():
            where = f"{pair.text} {wl} {thp} {th}"
            if pair.base in by_server and pair.new in by_server:
                judged, diffs = _judge(
                    THROUGHPUT, by_server[pair.base], by_server[pair.new], design, where
                )
                add(wl, thp, th, THROUGHPUT, judged)
                add(wl, thp, th, INTERACTION, _interaction(diffs, g, design), g, skip=(g,))
            by_lat = lat.get((wl, thp, th)) or {}
            if pair.base in by_lat and pair.new in by_lat:
                judged, _ = _judge(LAT_P95, by_lat[pair.base], by_lat[pair.new], design, where)
                add(wl, thp, th, LAT_P95, judged)
        for thp in dict.fromkeys(k[1] for k in stop):
            b, n = stop.get((pair.base, thp)), stop.get((pair.new, thp))
            if not b or not n:
                continue
            where = f"{pair.text} {thp}"
            judged, _ = _judge(RSS_STOP, b, n, design, where)
            add("", thp, None, RSS_STOP, judged)
            norms = {a: sum(vs.values()) / len(vs) for a, vs in b.items() if vs}
            gb, gn = growth.get((pair.base, thp)) or {}, growth.get((pair.new, thp)) or {}
            judged, _ = _judge(RSS_GROWTH, gb, gn, design, where, norms)
            add("", thp, None, RSS_GROWTH, judged)
    out.notices = notices
    return out


def _by_point(points) -> dict[tuple, dict[str, dict[str, dict[int, float]]]]:
    """(workload, thp, threads) -> server label -> allocator -> round -> value."""
    out: dict[tuple, dict] = defaultdict(dict)
    for (server, wl, thp, th), values in points:
        out[(wl, thp, th)][server] = values
    return out


# -- what the answer is -----------------------------------------------------------------------------
def recommended(allocator_verdicts: list[Verdict], server: str) -> tuple[str | None, str]:
    """The allocator the run's verdicts favour on `server`, and why in words: the one with the
    most throughput points called faster than the baseline allocator and none called slower
    (ties: the larger geometric mean of its ratios); the baseline allocator when none is. None
    when the server has no throughput verdicts."""
    vs = [
        v
        for v in allocator_verdicts
        if v.server == server and v.metric == THROUGHPUT and not v.aa_arm
    ]
    if not vs:
        return None, "no throughput verdicts"
    base = vs[0].baseline
    score: dict[str, tuple[int, float]] = {}
    for a in dict.fromkeys(v.allocator for v in vs):
        mine = [v for v in vs if v.allocator == a]
        if any(v.verdict == WORSE for v in mine):
            continue
        faster = sum(v.verdict == BETTER for v in mine)
        if faster:
            gm = math.exp(sum(math.log(v.ratio) for v in mine) / len(mine))
            score[a] = (faster, gm)
    if not score:
        return base, "no other allocator was called faster at some point and slower at none"
    best = max(score, key=lambda a: score[a])
    n = score[best][0]
    points = len({(v.workload, v.thp, v.threads) for v in vs})
    return (
        best,
        f"{best} faster than {base} at {n} of {points} points, slower at none",
    )


@dataclass(frozen=True)
class Answer:
    """The job in one line: does the best allocator change with the upgrade?"""

    pair: Pair
    base_best: str | None
    new_best: str | None
    base_why: str
    new_why: str
    changes: list[UpgradeVerdict]  # significant interactions
    open_: list[UpgradeVerdict]  # undecided interactions
    carries: list[UpgradeVerdict]  # interactions within the minimum effect

    @property
    def verdict(self) -> str:
        if self.changes:
            return CHANGES
        if not self.open_ and self.carries:
            return CARRIES_OVER
        return UNDECIDED

    def sentence(self) -> str:
        same = self.base_best == self.new_best
        rec = (
            f"the verdicts favour {self.base_best} on both"
            if same
            else f"the verdicts favour {self.base_best} on {self.pair.base} and {self.new_best} on "
            f"{self.pair.new}"
        )
        if self.verdict == CHANGES:
            named = "; ".join(f"{v.allocator} {_ratio(v)} at {_where(v)}" for v in self.changes[:4])
            return f"The allocator choice changes with the upgrade ({named}); {rec}."
        if self.verdict == CARRIES_OVER:
            return (
                f"The allocator choice carries over: at every point each allocator's ratio to "
                f"{self.carries[0].baseline} moved by less than the minimum effect; {rec}."
            )
        if not (self.changes or self.open_ or self.carries):
            return f"Whether the allocator choice changes cannot be told (no interaction could be computed); {rec}."
        return (
            f"Not decided whether the allocator choice changes: {len(self.open_)} of "
            f"{len(self.open_) + len(self.carries)} interactions still allow a change beyond the "
            f"minimum effect (more rounds would tell); {rec}."
        )


def answers(run: Run, allocator_verdicts: list[Verdict], uv: list[UpgradeVerdict]) -> list[Answer]:
    out = []
    for pair in pairs(run):
        inter = [v for v in uv if v.metric == INTERACTION and v.server == pair.new and not v.aa_arm]
        b, bw = recommended(allocator_verdicts, pair.base)
        n, nw = recommended(allocator_verdicts, pair.new)
        out.append(
            Answer(
                pair, b, n, bw, nw,
                [v for v in inter if v.verdict in (BETTER, WORSE)],
                [v for v in inter if v.verdict == UNDECIDED],
                [v for v in inter if v.verdict == NONE],
            )
        )  # fmt: skip
    return out


def aa_alarm(run: Run, uv: list[UpgradeVerdict]) -> list[UpgradeVerdict]:
    """NEW/BASE verdicts called different between two names of one build (a server A/A check):
    the machine was too noisy in this run for any verdict to be trusted."""
    same = {p.new for p in pairs(run) if same_build(run, p)}
    return [v for v in uv if v.server in same and v.metric != INTERACTION and v.significant]


# -- what differs besides the server ------------------------------------------------------------------
def differences(run: Run, pair: Pair) -> list[tuple[str, str, str]]:
    """What else changed between BASE and NEW, as (what, BASE's, NEW's): flavor and version, the
    Debian release and glibc under each, the binary, allocator builds, and the server's own
    settings recorded per life (cells[].server.variables, RECORDED_VARIABLES: a name one server
    lacks shows "(none)") and what our my.cnf made of the suite (cells[].server.settings)."""
    b, n = _records(run, pair)
    out: list[tuple[str, str, str]] = []

    def root(s, key):
        return (s.get("root") or {}).get(key) or "the host's"

    for what, get in (
        ("server", lambda s: f"{s.get('flavor')} {s.get('version_string') or s.get('version')}"),
        ("Debian release", lambda s: root(s, "release")),
        ("glibc", lambda s: s.get("glibc") or root(s, "glibc")),
        ("binary", lambda s: s.get("binary")),
    ):
        if get(b) != get(n):
            out.append((what, str(get(b)), str(get(n))))
    ba = {a.get("name"): a for a in b.get("allocators") or []}
    na = {a.get("name"): a for a in n.get("allocators") or []}
    for name in [x for x in ba if x in na]:
        bv, nv = ba[name].get("version"), na[name].get("version")
        if (bv, ba[name].get("sha256")) != (nv, na[name].get("sha256")):
            same = " (another build)" if bv == nv else ""
            out.append((f"allocator {name}", f"{bv}{same}", f"{nv}{same}"))
    g = baseline_of(run)
    for key, label in (("variables", "server variable"), ("settings", "my.cnf from the suite")):
        # the same allocator's lives (what a server reports may depend on it: its malloc library)
        bvars = _first_record(run, pair.base, key, g)
        nvars = _first_record(run, pair.new, key, g)
        if bvars is None or nvars is None:
            continue
        for k in sorted(set(bvars) | set(nvars)):
            if key == "settings" and k in ("extra",):
                continue
            x, y = bvars.get(k, "(none)"), nvars.get(k, "(none)")
            if x != y:
                out.append((f"{label} {k}", str(x), str(y)))
    return out


def differences_table(run: Run) -> Table | None:
    """What differs besides the server, per pair (None when nothing does, or one server)."""
    ps = pairs(run)
    t = Table(
        "upgrade-differs",
        "What differs besides the server",
        "Everything recorded that differs between the servers compared, besides their code: "
        "the Debian release and glibc under each (a server root's own), the allocator builds "
        "(a root has its own packages), and the servers' own settings as each reported them "
        "(SHOW GLOBAL VARIABLES of a chosen set, read once per life; '(none)': the server has no "
        "such variable). Any of them can explain part of a NEW/BASE difference.",
        ["servers", "what", "BASE", "NEW"] if len(ps) > 1 else ["what", "BASE", "NEW"],
    )
    for pair in ps:
        for what, x, y in differences(run, pair):
            row = [text(what), text(x), text(y)]
            t.rows.append([text(pair.text), *row] if len(ps) > 1 else row)
    return t if t.rows else None


def _first_record(run: Run, label: str, key: str, allocator: str) -> dict | None:
    """cells[].server[key] of the first life of server `label` under `allocator` (else under
    any allocator) that recorded it."""
    found = [
        c
        for c in run.cells.values()
        if (c.get("server") or {}).get("label") == label
        and isinstance((c.get("server") or {}).get(key), dict)
    ]
    mine = [c for c in found if (c.get("allocator") or {}).get("name") == allocator] or found
    return mine[0]["server"][key] if mine else None


# -- tables -----------------------------------------------------------------------------------------
def _ratio(v: Verdict) -> str:
    if not (math.isfinite(v.lo) and math.isfinite(v.hi)):
        return f"{v.ratio:.2f}×"
    return f"{v.ratio:.2f}× [{v.lo:.2f}–{v.hi:.2f}]"


def _where(v: Verdict) -> str:
    if v.metric in (RSS_STOP, RSS_GROWTH):
        return METRICS[v.metric].text
    return f"{v.workload}@{v.threads}" + ("" if v.thp == "system" else f" THP {v.thp}")


def _summary(vs: list[UpgradeVerdict], named: tuple[str, ...] = (BETTER, WORSE)) -> Cell:
    """A cell of the glance: the significant verdicts named with their intervals, the others
    counted ("no change at 3, undecided at 1")."""
    if not vs:
        return text("–")
    parts = [f"{v.word} {_ratio(v)} at {_where(v)}" for v in vs if v.verdict in named]
    none = sum(v.verdict == NONE for v in vs)
    open_ = sum(v.verdict == UNDECIDED for v in vs)
    tail = []
    if none:
        tail.append(f"{METRICS[vs[0].metric].same or 'no change'} at {none}")
    if open_:
        tail.append(f"undecided at {open_}")
    shown = "; ".join(parts + ([", ".join(tail)] if tail else []))
    return Cell(len(parts), shown)


def glance_table(
    run: Run,
    allocator_verdicts: list[Verdict],
    uv: list[UpgradeVerdict],
    baseline: str | None = None,
) -> Table:
    """The job in one table: per allocator, what the upgrade did (faster / slower / no change,
    p95, memory) and whether its standing against the baseline allocator carried over; the last
    row the allocator the verdicts favour on each server."""
    design = design_of(run)
    m = design.min_effect_pct
    g = baseline_of(run, baseline)
    ps = pairs(run)
    title = (
        "At a glance: which server, and does the best allocator change?"
        if any(not same_flavor(run, p) for p in ps)
        else "At a glance: did the upgrade change the answer?"
    )
    if len(ps) == 1:
        title += f" ({ps[0].text})"
    t = Table(
        "upgrade-glance",
        title,
        "Every round ran every server under every allocator once, in a balanced order, so each "
        "NEW/BASE ratio comes from the two servers' lives of one allocator in the same round "
        "(paired: drift shared by a round cancels). Named: differences that are significant and "
        f"at least {m:g}%, with the ratio NEW/BASE and its interval; the others are counted "
        f"(no change: within ±{m:g}%; undecided: more rounds would tell). The last column is the "
        f"interaction: each allocator's ratio to {g} on NEW divided by the same on BASE "
        f"(carries over: within ±{m:g}%; changes: the upgrade moved that allocator against {g}).",
        [
            "allocator",
            "throughput NEW/BASE",
            "p95 latency NEW/BASE",
            "memory NEW/BASE",
            f"ratio to {g}: carries over?",
        ],  # fmt: skip
    )
    why = why_no_upgrade_verdicts(run)
    if why:
        t.notes.append(f"No verdicts between the servers: {why}.")
        return t
    if len(ps) > 1:
        t.columns.insert(0, "servers")
    for pair in ps:
        mine = [v for v in uv if v.server == pair.new]
        for a in dict.fromkeys(v.allocator for v in mine):
            of = [v for v in mine if v.allocator == a]
            row = [
                text(a),
                _summary([v for v in of if v.metric == THROUGHPUT]),
                _summary([v for v in of if v.metric == LAT_P95]),
                _summary([v for v in of if v.metric in (RSS_STOP, RSS_GROWTH)]),
                _summary([v for v in of if v.metric == INTERACTION])
                if a != g
                else text("(the baseline allocator)"),
            ]
            t.rows.append([text(pair.text), *row] if len(ps) > 1 else row)
    t.notes += getattr(uv, "notices", [])  # points the judge refused (analysis/judge.py)
    for ans in answers(run, allocator_verdicts, uv):
        row = [
            text("recommended"),
            text(f"{ans.pair.base_name}: {ans.base_best or '–'}"),
            text(f"{ans.pair.new_name}: {ans.new_best or '–'}"),
            text("unchanged" if ans.base_best == ans.new_best else "differs"),
            text(ans.verdict),
        ]
        t.rows.append([text(ans.pair.text), *row] if len(ps) > 1 else row)
        t.notes.append(ans.sentence())
        t.notes.append(
            f"Recommended: per server, the allocator with the most throughput points called "
            f"faster than {g} and none called slower ({ans.pair.base_name}: {ans.base_why}; "
            f"{ans.pair.new_name}: {ans.new_why}); the interaction column is the test of whether "
            "that choice changes."
        )
        diff = differences(run, ans.pair)
        if diff:
            shown = ", ".join(w for w, _, _ in diff[:4]) + (", ..." if len(diff) > 4 else "")
            t.notes.append(
                f"Besides the server, {len(diff)} recorded thing(s) differ between "
                f"{ans.pair.base_name} and {ans.pair.new_name} ({shown}): see 'What differs "
                "besides the server'."
            )
    alarm = aa_alarm(run, uv)
    if alarm:
        t.notes.insert(0, aa_alarm_text(alarm))
    for p in ps:
        if same_build(run, p) and not alarm:
            t.notes.append(
                f"{p.base_name} and {p.new_name} are the same build (a server A/A check): none "
                "of their NEW/BASE verdicts was called different."
            )
    return t


def aa_alarm_text(alarm: list[UpgradeVerdict]) -> str:
    where = ", ".join(f"{v.allocator} {_where(v)} {_ratio(v)}" for v in alarm[:6])
    return (
        f"WARNING: one server build under two names was called different from itself at "
        f"{len(alarm)} point(s) ({where}): this machine was too noisy in this run for any "
        "verdict here to be trusted."
    )


def verdict_tables(
    run: Run,
    uv: list[UpgradeVerdict],
    metrics: tuple[str, ...] = (THROUGHPUT, LAT_P95, INTERACTION, RSS_STOP, RSS_GROWTH),
) -> list[Table]:
    """Per server pair and workload: allocator x threads NEW/BASE for throughput, p95 and the
    interaction; then memory (those of `metrics`)."""
    out = []
    for pair in pairs(run):
        mine = [v for v in uv if v.server == pair.new and v.metric in metrics]
        for wl in run.workloads:
            for metric in (THROUGHPUT, LAT_P95, INTERACTION):
                vs = [v for v in mine if v.workload == wl and v.metric == metric]
                if not vs:
                    continue
                threads = sorted({v.threads for v in vs})
                what = (
                    f"each allocator's ratio to {vs[0].baseline}, NEW over BASE"
                    if metric == INTERACTION
                    else f"{METRICS[metric].text} NEW/BASE"
                )
                t = Table(
                    f"upgrade-{wl}-{metric}-{pair.new}",
                    f"{wl}: {what} ({pair.text})",
                    _EXPLAIN[metric],
                    ["allocator", "THP", *map(str, threads)],
                )
                for a, thp in dict.fromkeys((v.allocator, v.thp) for v in vs):
                    row = [text(a), text(thp)]
                    for th in threads:
                        v = next(
                            (x for x in vs if (x.allocator, x.thp, x.threads) == (a, thp, th)), None
                        )
                        row.append(Cell(v.ratio, f"{_ratio(v)} {v.word}") if v else text("–"))
                    t.rows.append(row)
                out.append(t)
        vs = [v for v in mine if v.metric in (RSS_STOP, RSS_GROWTH)]
        if vs:
            t = Table(
                f"upgrade-memory-{pair.new}",
                f"Memory NEW/BASE ({pair.text})",
                "RSS at stop (the server's resident memory just before it was asked to shut "
                "down) and RSS growth over the life (as a share of BASE's RSS at stop), NEW over "
                "BASE, paired by round.",
                ["allocator", "THP", "RSS at stop", "RSS growth"],
            )
            for a, thp in dict.fromkeys((v.allocator, v.thp) for v in vs):
                row = [text(a), text(thp)]
                for metric in (RSS_STOP, RSS_GROWTH):
                    v = next(
                        (x for x in vs if (x.allocator, x.thp, x.metric) == (a, thp, metric)), None
                    )
                    row.append(Cell(v.ratio, f"{_ratio(v)} {v.word}") if v else text("–"))
                t.rows.append(row)
            out.append(t)
    return out


_EXPLAIN = {
    THROUGHPUT: "Throughput of NEW over BASE per allocator, paired by round (both servers' lives "
    "of the allocator in one round), with its interval and verdict.",
    LAT_P95: "p95 latency of NEW over BASE per allocator, paired by round; below 1 is lower "
    "latency after the upgrade (closed-loop load: see 'About latency').",
    INTERACTION: "(NEW_a / NEW_baseline) / (BASE_a / BASE_baseline): how the allocator's "
    "throughput ratio to the baseline allocator moved with the upgrade. Within the minimum "
    "effect: the allocator choice carries over; beyond it and significant: it changes.",
}


def undecided(uv: list[UpgradeVerdict]) -> list[UpgradeVerdict]:
    return [v for v in uv if v.verdict not in DECIDED]


def context(
    run: Run, allocator_verdicts: list[Verdict], baseline: str | None = None
) -> dict | None:
    """What the report and summary show of the servers' comparison (None for a run of one)."""
    if not several(run):
        return None
    uv = upgrade_verdicts(run, baseline)
    differs = differences_table(run)
    return {
        "glance": glance_table(run, allocator_verdicts, uv, baseline),
        "tables": verdict_tables(run, uv) + ([differs] if differs is not None else []),
        "verdicts": uv,
    }
