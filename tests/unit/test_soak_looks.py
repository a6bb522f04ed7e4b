"""A soak's stopping rule (analysis/soak_looks.py) and its settings (suites/runner/soak.py,
[fragmentation] soak): looks spend the 5% over the planned looks, the stop needs every growth
verdict decided, the report judges at the right look, and what a soak cannot be combined with is
refused in one line."""

from __future__ import annotations

import random

import pytest

from analysis import growth_rate as g
from analysis import soak_looks as sl
from analysis.growth_rate import Difference
from analysis.metrics import NONE, UNDECIDED, WORSE
from suites.errors import SuiteError
from suites.runner.soak import check_soak
from suites.suite.model import suite_from_dict
from suites.workloads.fragmentation.settings import parse_duration


def test_planned_looks_and_their_levels_spend_exactly_five_percent():
    assert sl.planned_looks(6 * 3600, 600) == 36
    assert sl.planned_looks(120, 600) == 1
    assert sl.planned_looks(1200, 600) == 2
    for looks in (1, 3, 36):
        spent = sum(1 - sl.look_level(k, looks) for k in range(1, looks + 1))
        assert spent == pytest.approx(0.05)
    assert sl.look_level(1, 1) == pytest.approx(0.95)


def test_a_look_is_due_at_each_whole_interval_and_the_last_at_the_end():
    due = sl.due_look
    assert due(500, 3600, 600, []) is None  # before the first interval
    assert due(610, 3600, 600, []) == 1
    assert due(700, 3600, 600, [1]) is None  # no second look on the same interval
    assert due(1900, 3600, 600, [1]) == 3  # a long turn skips look 2, never makes two at once
    assert due(3500, 3600, 600, [1, 3, 4]) == 5  # at most K - 1 before the end
    assert due(3601, 3600, 600, [1, 3, 4, 5]) == 6  # the end: look K spends what is left
    assert due(3700, 3600, 600, [6]) is None


def _diff(verdict: str) -> tuple:
    return (("s", "dump", "system", "jemalloc"), g.RSS_GROWTH_MB_PER_HOUR,
            Difference(0.0, -1.0, 1.0, verdict, 1, 0.95))  # fmt: skip


def test_the_soak_stops_only_when_every_growth_verdict_is_decided():
    assert not sl.Look(1, 0.98, []).all_decided  # nothing to decide yet is not "all decided"
    assert not sl.Look(1, 0.98, [_diff(WORSE), _diff(UNDECIDED)]).all_decided
    look = sl.Look(2, 0.98, [_diff(WORSE), _diff(NONE)])
    assert look.all_decided
    assert "stops early" in look.message(1200, 6)
    # the last look (the time is up) neither stops early nor goes on
    assert look.message(3600, 6, last=True).endswith("all 2 growth verdicts decided")
    open_ = sl.Look(6, 0.98, [_diff(WORSE), _diff(UNDECIDED)])
    assert open_.message(3600, 6, last=True).endswith(
        "1 of 2 growth verdicts decided: its time is up"
    )
    assert "1 of 2" in sl.Look(1, 0.98, [_diff(WORSE), _diff(UNDECIDED)]).message(600, 6)


def test_the_report_judges_at_the_look_the_soak_stopped_at_or_the_next():
    m = {"soak": {"seconds": 3600, "looks_planned": 6, "looks": [{"look": 1}, {"look": 2}]}}
    assert sl.report_level(m) == pytest.approx(sl.look_level(3, 6))  # data past look 2
    m["soak"]["judged_at_end"] = True
    assert sl.report_level(m) == pytest.approx(sl.look_level(2, 6))


def test_aa_soaks_stopped_by_the_rule_are_called_different_at_most_five_percent_of_the_time():
    # Two arms of one allocator (true difference 0) growing 20 MB/h with independent noise,
    # looked at 6 times: the rule stops at the first look where the verdict is decided; a
    # decision other than "none" is a false call. By the spending it happens at most 5%.
    rnd = random.Random(7)
    false_calls, reps, looks, per_look = 0, 300, 6, 10
    for _ in range(reps):
        series = {a: [] for a in ("glibc", "glibc-aa")}
        for k in range(1, looks + 1):
            for a in series:
                for j in range(per_look):
                    i = (k - 1) * per_look + j + 1
                    h = i / 60
                    series[a].append((h, 400 + 20 * h + rnd.gauss(0, 3.0)))
            lives = []
            for a, pts in series.items():
                rate = g.fit([p[0] for p in pts], [p[1] for p in pts])
                lives.append((a, rate))
            base = dict(lives)["glibc"]
            d = g.unpaired_difference(dict(lives)["glibc-aa"], base, sl.look_level(k, looks), 1.0)
            if d.verdict != UNDECIDED:
                false_calls += d.verdict != NONE
                break
    assert false_calls / reps <= 0.05 + 3 * (0.05 * 0.95 / reps) ** 0.5


def test_soak_durations_parse_and_bad_ones_are_named():
    assert parse_duration("6h") == 21600
    assert parse_duration("30m") == 1800
    assert parse_duration("90s") == 90
    assert parse_duration(0) == 0
    with pytest.raises(ValueError, match="duration like"):
        parse_duration("six hours")


def _suite(**frag) -> object:
    data = {
        "suite": {"name": "t", "kind": "fragmentation"},
        "fragmentation": {"scenarios": ["dump"], **frag},
    }
    return suite_from_dict(data, "test")


def test_the_suite_key_and_its_refusals():
    s = _suite(soak="2h")
    assert s.fragmentation.soak == 7200
    with pytest.raises(SuiteError, match="soak"):
        _suite(soak="5s")
    with pytest.raises(SuiteError, match="soak"):
        _suite(soak="forever")
    check_soak(s, 1, None)  # a soak of one server, one round, THP left alone: fine
    with pytest.raises(SuiteError, match="one life per arm"):
        check_soak(suite_from_dict(s.as_dict() | {"run": {"repeat": 3}}, "t"), 1, None)
    with pytest.raises(SuiteError, match="several servers"):
        check_soak(s, 2, None)
    thp = suite_from_dict(s.as_dict() | {"thp": {"modes": ["always"]}}, "t")
    with pytest.raises(SuiteError, match="THP setting 'always'"):
        check_soak(thp, 1, None)


def test_the_progress_line_shows_soaked_hours_and_each_arms_growth():
    import io

    from rich.console import Console

    from suites.runner.display import Display

    text = "glibc +12.0 MB/h [+8.0, +16.0] | jemalloc +1.5 MB/h [-2.0, +5.0]"
    live = Display(console=Console(file=io.StringIO(), force_terminal=True, width=200))
    live.start_matrix(2, 7200)
    live.start_soak(7200, 1800)
    live.soak_progress(3600, text)
    task = live._progress.tasks[live._soak]
    assert task.completed == 3600 and task.total == 7200  # its ETA is rich's, from these
    assert task.description == f"soak 1.00/2.00 h: {text}"
    live.stop()
    # without a terminal (a log): one line per turn
    buf = io.StringIO()
    log = Display(console=Console(file=buf, force_terminal=False, width=200))
    log.start_matrix(2, 7200)
    log.start_soak(7200, 0)
    log.soak_progress(900, text)
    assert f"soak 0.25/2.00 h: {text}" in buf.getvalue()


def test_scenarios_apart_plan_a_stage_per_scenario_and_refuse_stages_under_a_minute():
    """soak_scenarios = "apart": the manifest plans one stage per scenario (its time and looks
    fixed when it starts); a soak too short to give each stage a minute is refused in one line;
    one scenario, or "together", has no stages."""
    from suites.runner.soak import soak_design

    two = {"scenarios": ["dump", "fulltext"], "soak_scenarios": "apart"}
    s = suite_from_dict(
        {"suite": {"name": "t", "kind": "fragmentation"}, "fragmentation": two | {"soak": "2h"}},
        "t",
    )
    d = soak_design(s)
    assert d["stage"] == 0
    assert d["stages"] == [
        {"scenario": "dump", "seconds": None},
        {"scenario": "fulltext", "seconds": None},
    ]
    check_soak(s, 1, None)
    short = suite_from_dict(s.as_dict() | {"fragmentation": two | {"soak": "90s"}}, "t")
    with pytest.raises(SuiteError) as e:
        check_soak(short, 1, None)
    msg = str(e.value)
    assert "90 s apart over 2 scenarios" in msg and "at least 2m" in msg and "\n" not in msg
    together = suite_from_dict(
        s.as_dict() | {"fragmentation": two | {"soak": "2h", "soak_scenarios": "together"}}, "t"
    )
    assert "stages" not in soak_design(together)
    assert "stages" not in soak_design(_suite(soak="2h", soak_scenarios="apart"))  # one scenario
    with pytest.raises(SuiteError, match="soak_scenarios"):
        _suite(soak="2h", soak_scenarios="each")


def test_a_stage_is_judged_at_its_own_looks():
    """Each scenario soaked apart spends its own 5% over its own looks: the report judges its
    verdicts at its stage's look, not the soak's."""
    m = {
        "soak": {
            "seconds": 7200,
            "looks_planned": 12,
            "looks": [],
            "stages": [
                {"scenario": "dump", "looks_planned": 6, "looks": [{"look": 1}, {"look": 2}],
                 "judged_at_end": True},
                {"scenario": "fulltext", "looks_planned": 4, "looks": [{"look": 1}]},
                {"scenario": "spike", "seconds": None},
            ],
        }
    }  # fmt: skip
    assert sl.report_level(m, "dump") == pytest.approx(sl.look_level(2, 6))
    assert sl.report_level(m, "fulltext") == pytest.approx(sl.look_level(2, 4))  # data past look 1
    assert sl.report_level(m, "spike") == pytest.approx(0.95)  # never started: nothing to judge
    assert sl.report_level(m, "all scenarios") == pytest.approx(0.95)
