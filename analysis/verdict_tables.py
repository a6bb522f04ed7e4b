"""The verdicts as report tables: "at a glance", the noise floor, and one table per workload.

"At a glance" names only significant differences (better / worse than the baseline beyond the
minimum effect, with the interval, each said in its metric's words: faster, less memory, grows
more...) and groups every other allocator as "cannot be told apart";
the A/A arm is left out of the groups and shown in the noise-floor table instead.
"""

from __future__ import annotations

import math

from analysis.exposure import CANNOT_MATTER
from analysis.metrics import BETTER, METRICS, NONE, THROUGHPUT, UNDECIDED, WORSE
from analysis.table_model import Cell, Table, text
from analysis.verdicts import (
    FORECAST_PCT,
    Forecast,
    Verdict,
    aa_alarm,
    design_of,
    forecast,
    noise_floor,
    paired_noise,
    why_no_verdicts,
)
from rundir.read import Run


def metric_text(v: Verdict) -> str:
    """A metric's name in the glance: a memory figure of a whole life says it is memory."""
    m = METRICS[v.metric]
    return f"memory: {m.text}" if m.memory and not v.workload else m.text


def point_label(v: Verdict) -> str:
    """What a verdict's point is called in a table: its workload (throughput), the memory
    metric, or a scenario's metric ("dump: RSS growth per cycle")."""
    if v.metric == THROUGHPUT:
        return v.workload
    return f"{v.workload}: {metric_text(v)}" if v.workload else metric_text(v)


def ratio_ci(v: Verdict) -> str:
    """The verdict's figure and interval: a ratio ("0.82× [0.78–0.86]"), or for a metric in its
    own unit the difference from the baseline ("+12.0 MB/h [+3.1 – +20.9]"), never a ratio."""
    if v.unit:
        if not (math.isfinite(v.lo) and math.isfinite(v.hi)):
            return f"{v.ratio:+.1f} {v.unit}"
        return f"{v.ratio:+.1f} {v.unit} [{v.lo:+.1f} – {v.hi:+.1f}]"
    if not (math.isfinite(v.lo) and math.isfinite(v.hi)):
        return f"{v.ratio:.2f}×"
    return f"{v.ratio:.2f}× [{v.lo:.2f}–{v.hi:.2f}]"


def _named(v: Verdict) -> str:
    """A significant difference as the glance names it: "tcmalloc 0.82× [0.78–0.86] less memory"."""
    return f"{v.allocator} {ratio_ci(v)} {v.word}"


def _level_text(verdicts: list[Verdict]) -> str:
    levels = sorted({round(v.level * 100, 2) for v in verdicts})
    if not levels:
        return ""
    if levels == [95.0]:
        return "95% intervals"
    # an arm's throughput points share the 5% (analysis/verdicts.py "One run, one 5%")
    tp = [v for v in verdicts if v.metric == THROUGHPUT]
    points = {(v.server, v.workload, v.thp, v.threads) for v in tp}
    settled = {(v.server, v.workload, v.thp, v.threads) for v in tp if v.verdict == CANNOT_MATTER}
    shared = f" and over throughput's {len(points)} points" if len(points) > 1 else ""
    if shared and settled and settled != points:
        shared += f", the {len(settled)} the allocator cannot matter at weighing a tenth"
    return f"intervals at {', '.join(f'{x:g}%' for x in levels)} (95% over all looks{shared})"


def glance_table(run: Run, verdicts: list[Verdict], baseline: str) -> Table:
    design = design_of(run)
    m = design.min_effect_pct
    t = Table(
        "glance",
        f"At a glance: what differs from {baseline}",
        f"Only differences that are significant and at least {m:g}% are named, with the ratio to "
        f"{baseline} and its interval (paired by round: every round ran every allocator once). "
        f"Every other allocator is grouped as 'cannot be told apart': no difference beyond "
        f"{m:g}% (none), or not yet decided (undecided: more rounds would tell). Each named "
        "difference says what it is: faster or slower for throughput, less or more memory for "
        "RSS at stop, grows less or more for RSS growth.",
        [
            "workload",
            "THP",
            "threads",
            f"better than {baseline}",
            f"worse than {baseline}",
            f"cannot be told apart from {baseline}",
        ],
    )
    why = why_no_verdicts(run, baseline)
    if why:
        t.notes.append(f"No verdicts: {why}.")
        return t
    # A run over several servers or engines (mariadb-10.11.19 and mariadb-10.11.19+rocksdb) gets a
    # server column: without it an engine's rows read as repeats of the other's.
    servers = sorted({v.server for v in verdicts if not v.aa_arm})
    if len(servers) > 1:
        t.columns.insert(0, "server")
    points: dict[tuple, list[Verdict]] = {}
    for v in verdicts:
        if v.aa_arm:
            continue
        wl = point_label(v)
        points.setdefault((v.server, wl, v.thp, v.threads), []).append(v)
    for (server, wl, thp, th), vs in points.items():
        better = [v for v in vs if v.verdict == BETTER]
        worse = [v for v in vs if v.verdict == WORSE]
        none = [v.allocator for v in vs if v.verdict == NONE and not v.unit]
        open_ = [v.allocator for v in vs if v.verdict == UNDECIDED]
        same = []
        if none:
            same.append(f"{', '.join(none)} (within ±{m:g}%)")
        # a difference in its own unit has its own margin (growth: MB/h)
        same += [
            f"{v.allocator} (within ±{v.margin:g} {v.unit})"
            for v in vs
            if v.verdict == NONE and v.unit
        ]
        if open_:
            same.append(f"{', '.join(open_)} (undecided)")
        row = [
            text(wl),
            text(thp),
            text("–" if th is None else str(th)),
            text("; ".join(_named(v) for v in better) or "–"),
            text("; ".join(_named(v) for v in worse) or "–"),
            text("; ".join(same) or "–"),
        ]
        t.rows.append([text(server), *row] if len(servers) > 1 else row)
    levels = _level_text(verdicts)  # none when no verdict has an interval (a soak's first looks)
    t.notes.append(f"{levels}; minimum effect {m:g}%." if levels else f"Minimum effect {m:g}%.")
    t.notes += getattr(verdicts, "notices", [])  # points the judge refused (analysis/judge.py)
    alarm = aa_alarm(verdicts)
    if alarm:
        t.notes.insert(0, aa_alarm_text(alarm))
    return t


def aa_alarm_text(alarm: list[Verdict]) -> str:
    where = ", ".join(f"{v.workload or v.metric} {v.threads or ''} {ratio_ci(v)}" for v in alarm)
    return (
        f"WARNING: the A/A arm ({alarm[0].allocator}, the baseline again) was called different "
        f"from itself at {len(alarm)} point(s) ({where}): this machine was too noisy in this run "
        "for any verdict here to be trusted."
    )


def forecast_text(fc: Forecast) -> str:
    """The forecast in words: per tested point, how many rounds; the most of them at this run's
    pace, and how much more than it ran."""
    level = f"each tested point at {(1 - fc.alpha) * 100:.4g}%; this run has {fc.rounds_now}"
    servers = {p[0] for p in fc.rounds}
    parts = [
        (f"{server} " if len(servers) > 1 else "")
        + f"{wl}@{th}: "
        + ("over 10,000" if n is None else f"about {n}")
        for (server, wl, _thp, th), n in fc.rounds.items()
    ]
    s = f"{', '.join(parts)} ({level})"
    known = [n for n in fc.rounds.values() if n is not None]
    if len(known) < len(fc.rounds):
        s += "; where over 10,000, this machine is too noisy for that point"
    if known and fc.minutes_per_round is not None:
        most = max(known)
        more = max(most - fc.rounds_now, 0) * fc.minutes_per_round
        s += f"; {most} rounds at this run's {fc.minutes_per_round:.1f} min per round: ~{_duration(most * fc.minutes_per_round)}"
        if more > 0:
            s += f", ~{_duration(more)} more than it ran (--budget)"
    return s + ". Then a difference of twice the minimum effect is called, and an equal arm is none"


def _duration(minutes: float) -> str:
    return f"{minutes:.0f} min" if minutes < 90 else f"{minutes / 60:.1f} h"


def noise_table(run: Run, verdicts: list[Verdict], baseline: str) -> Table:
    nf = noise_floor(run, verdicts)
    design = design_of(run)
    t = Table(
        "noise",
        "Noise floor of this machine in this run",
        "How much two measurements of the same thing differed here. The A/A arm is the baseline "
        "run again each round under a second name: its ratio to the baseline should be 1, and its "
        "interval width is the smallest difference this run could resolve. The spread of "
        "repeated server lives is each allocator's own variation from round to round.",
        ["measure", "value"],
    )

    def pct(x):
        return "–" if x is None else f"±{x:.1f}%"

    if nf.aa_points:
        t.rows.append(
            [
                text("A/A ratio (baseline vs itself)"),
                text(f"{nf.aa_ratio_min:.2f}×–{nf.aa_ratio_max:.2f}× over {nf.aa_points} points"),
            ]
        )
        t.rows.append(
            [
                text("A/A interval half-width"),
                text(
                    f"{pct(nf.aa_half_width_pct_median)} median, {pct(nf.aa_half_width_pct_max)} widest"
                ),
            ]
        )
        alarm = aa_alarm(verdicts)
        t.rows.append(
            [
                text("A/A verdict"),
                Cell(len(alarm), aa_alarm_text(alarm) if alarm else "never called different"),
            ]
        )
    else:
        t.notes.append(
            "This run had no A/A arm (run.aa = true adds one): the noise floor below is the "
            "spread of repeated lives only."
        )
    paired = paired_noise(run, baseline)
    if paired is not None:
        t.rows.append(
            [
                text("noise the verdicts saw (paired differences to the baseline, per life)"),
                text(
                    f"{pct((math.exp(paired.sigma) - 1) * 100)} over {paired.points} points "
                    "(drift shared by a round cancels in the pairs)"
                ),
            ]
        )
    fc = forecast(run, baseline)
    if fc is not None:
        t.rows.append(
            [
                text(f"rounds for a ±{FORECAST_PCT:g}% interval at this noise"),
                text(forecast_text(fc)),
            ]
        )
    t.rows.append(
        [
            text("spread of repeated server lives (sd, same allocator and point)"),
            text(
                f"{pct(nf.life_spread_pct_median)} median, {pct(nf.life_spread_pct_max)} largest"
                f" ({nf.lives} series)"
            ),
        ]
    )
    looks = (
        f"first look after {design.first_look} rounds, at most {design.max_rounds}"
        if design.looks > 1
        else f"fixed: {design.first_look} rounds, one look"
    )
    t.rows.append([text("design"), text(f"{looks}; {run.repeats} rounds ran")])
    stopped = (run.manifest.get("design") or {}).get("stopped")
    if stopped:
        t.rows.append([text("budget"), text(stopped)])
    return t


def workload_verdict_table(run: Run, verdicts: list[Verdict], workload: str) -> Table | None:
    """allocator (THP) x threads: ratio [interval] and verdict, for one workload."""
    vs = [v for v in verdicts if v.workload == workload and v.metric == THROUGHPUT]
    if not vs:
        return None
    threads = sorted({v.threads for v in vs})
    t = Table(
        f"verdicts-{workload}",
        f"Verdicts: throughput relative to {vs[0].baseline}",
        "Ratio of each allocator's throughput to the baseline's, paired by round, with its "
        "interval and verdict (faster / slower: significant and beyond the minimum effect; "
        "none: any difference is within it; undecided: not yet known).",
        ["allocator", "THP", *map(str, threads)],
    )
    keys = list(dict.fromkeys((v.allocator, v.thp) for v in vs))
    for alloc, thp in keys:
        row = [text(alloc), text(thp)]
        for th in threads:
            v = next((x for x in vs if (x.allocator, x.thp, x.threads) == (alloc, thp, th)), None)
            row.append(Cell(v.ratio, f"{ratio_ci(v)} {v.word}{_fewer(v, run)}") if v else text("–"))
        t.rows.append(row)
    return t


def _fewer(v: Verdict, run: Run) -> str:
    """A verdict that stands on fewer rounds than the run ran (a life left out: the notices say
    which) says so beside it, so the table and "N rounds ran" never disagree in silence."""
    return f" (on {v.rounds} of {run.repeats} rounds)" if 0 < v.rounds < run.repeats else ""
