"""The alternate design's logic without a server: a block's rate and the level's, the pairs, the
rotation, the groups alive together, resume's refusal of a half-done round, the suite's rules,
the composed level, the derivation from a raw level of blocks, the preflight's count of live
servers and the design as verdicts.csv and older runs read it."""

from __future__ import annotations

import csv
import io
import math
import statistics
from pathlib import Path

import pytest

from analysis import run_design
from analysis.verdicts import CSV_COLUMNS, Verdict, verdicts_csv
from rundir.derive.blocks import (
    block_rate,
    blocks_columns,
    cpu_us_per_op,
    level_rate,
    pair_log_ratios,
)
from rundir.derive.levels import derive_level
from rundir.records import RawLevel, SysbenchLevel
from suites.errors import SuiteError
from suites.runner import alternate, preflight
from suites.runner.plan import CellPlan, allocator_order, plan_cells
from suites.suite.model import Suite, parse_suite
from suites.workloads.level_result import LevelResult
from suites.workloads.sysbench.blocks import compose


def _block(index, rates, position=0, status="ok", qps=None):
    intervals = [[float(i + 1), float(r)] for i, r in enumerate(rates)]
    return {
        "index": index, "position": position, "start_s": 0.0, "end_s": 1.0, "status": status,
        "qps": qps if qps is not None else (statistics.fmean(rates) if rates else 0.0),
        "events": 1, "duration_s": float(len(rates)), "intervals": intervals,
    }  # fmt: skip


# -- a block's rate and the level's ----------------------------------------------------------------
def test_a_blocks_first_report_is_its_ramp():
    # the first report (clients connecting) is left out; the rest is steady: their mean
    assert block_rate([[1, 10_000], [2, 40_000], [3, 41_000], [4, 39_000]], 0) == 40_000


def test_a_ramp_beyond_the_first_report_is_dropped_by_the_steady_rule():
    rates = [5_000, 20_000, 40_000, 40_400, 39_600, 40_000, 40_200, 39_800]
    got = block_rate([[i + 1, r] for i, r in enumerate(rates)], 0)
    assert 39_000 < got < 41_000  # 20k (a ramp second after the first) is not in it


def test_a_block_without_reports_has_its_own_figure_and_an_empty_one_none():
    assert block_rate([[1, 500.0]], 777.0) == 777.0
    assert block_rate([], 0.0) is None


def test_the_level_rate_is_the_geometric_mean_of_its_blocks():
    blocks = [_block(0, [1, 100, 100]), _block(1, [1, 400, 400])]
    assert level_rate(blocks) == pytest.approx(200.0)


def test_a_failed_or_empty_block_leaves_the_level_unjudged():
    assert level_rate([_block(0, [1, 100, 100]), _block(1, [1, 5, 5], status="failed")]) is None
    assert level_rate([_block(0, [1, 100, 100]), _block(1, [], qps=0.0)]) is None
    assert level_rate([]) is None
    assert blocks_columns(None) == {}  # a whole level (solo): nothing said
    empty = blocks_columns([_block(0, [], qps=0.0)])
    assert empty == {"steady_qps": None, "cpu_us_per_op": None, "cpu_s_per_1m_ops": None}


def test_the_level_ratio_is_the_mean_log_ratio_of_the_pairs():
    """What the judge's per-round value is in this design: log(level B / level A) equals the
    mean over pairs k of log(block B_k / block A_k), whatever the drift between pairs."""
    drift = [1.0, 0.7, 1.3, 0.9]  # the machine's rate moving from pair to pair
    a = [_block(k, [1, 1000 * d, 1000 * d]) for k, d in enumerate(drift)]
    b = [_block(k, [1, 950 * d * (1 + 0.01 * k), 950 * d * (1 + 0.01 * k)]) for k, d in
         enumerate(drift)]  # fmt: skip
    logs = pair_log_ratios(a, b)
    assert len(logs) == 4
    assert math.log(level_rate(b) / level_rate(a)) == pytest.approx(statistics.fmean(logs))
    # the drift is gone from every pair: each is ~0.95 x (1 + 1% k)
    for k, x in enumerate(logs):
        assert math.exp(x) == pytest.approx(0.95 * (1 + 0.01 * k))


def test_pairs_are_matched_by_index():
    a = [_block(0, [1, 100, 100]), _block(1, [1, 200, 200])]
    b = [_block(1, [1, 300, 300])]  # only pair 1
    assert pair_log_ratios(a, b) == [pytest.approx(math.log(1.5))]


# -- the rotation and the groups ------------------------------------------------------------------
def test_two_arms_alternate_abba_and_rounds_start_on_the_other_arm():
    assert alternate.schedule(["A", "B"], 1, 4) == [["A", "B"], ["B", "A"], ["A", "B"], ["B", "A"]]
    assert alternate.schedule(["A", "B"], 2, 2) == [["B", "A"], ["A", "B"]]


def test_three_arms_take_every_position_equally_over_a_full_rotation():
    arms = ["A", "B", "C"]
    cycles = alternate.schedule(arms, 1, 6)  # an odd number of arms: 2n rows balance
    for arm in arms:
        positions = [cycle.index(arm) for cycle in cycles]
        assert sorted(positions) == [0, 0, 1, 1, 2, 2], (arm, cycles)
    assert cycles == [allocator_order(arms, r) for r in range(1, 7)]


def test_groups_are_one_round_of_one_thp_setting():
    cells = plan_cells("srv", ["glibc", "jemalloc", "glibc-aa"], ["system"], 2)
    groups = list(alternate.groups(cells))
    assert [len(g) for g in groups] == [3, 3]
    assert [{c.round for c in g} for g in groups] == [{1}, {2}]
    two_thp = plan_cells("srv", ["glibc", "jemalloc"], ["always", "never"], 1)
    assert [[c.thp for c in g] for g in alternate.groups(two_thp)] == [
        ["always"] * 2,
        ["never"] * 2,
    ]


# -- resume ---------------------------------------------------------------------------------------
def _plans():
    return plan_cells("srv", ["glibc", "glibc-aa"], ["system"], 2)


def test_resume_of_whole_rounds_is_allowed():
    cells = _plans()
    done = {c.id for c in cells if c.round == 1}
    alternate.check_resume(cells, done, "runs/x")  # round 2 wholly pending: it runs again
    alternate.check_resume(cells, set(), "runs/x")


def test_resume_refuses_a_half_done_round_in_one_line():
    cells = _plans()
    done = {c.id for c in cells if c.round == 1} | {cells[2].id}
    with pytest.raises(SuiteError) as e:
        alternate.check_resume(cells, done, "runs/x")
    msg = str(e.value)
    assert msg.splitlines() == [msg]
    assert "--resume runs/x: round 2 of this alternate run is half done" in msg
    assert cells[3].allocator in msg.split("not: ")[1]


def test_live_servers_count_a_rounds_arms_in_alternate_only():
    cells = plan_cells("srv", ["glibc", "jemalloc", "glibc-aa"], ["system"], 2)
    solo = Suite()
    alt = parse_suite('[run]\ndesign = "alternate"\n', "x.toml")
    assert alternate.live_servers(solo, cells, set()) == 1
    assert alternate.live_servers(alt, cells, set()) == 3
    assert alternate.live_servers(alt, cells, {c.id for c in cells}) == 1  # nothing left


# -- the suite's rules ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text, expected",
    [
        ('[run]\ndesign = "alternate"\n[thp]\nmodes = ["always"]\n', r"run\.design: alternate: a hugepage setting"),
        ('[suite]\nkind = "iibench"\n[run]\ndesign = "alternate"\n', r"run\.design: alternate: .*sysbench suites only"),
        ('[run]\ndesign = "alternate"\n[memory]\nchurn_cycles = 2\n', r"run\.design: alternate: thread churn"),
        ('[run]\ndesign = "alternate"\nblock_s = 4\n[sysbench]\nreport_interval_s = 2\nduration_s = 6\n', r"run\.block_s: block_s \(4\) is shorter than 3 x"),
        ('[run]\ndesign = "duet"\n', r"run\.design"),
        ('[run]\nblock_s = 2\n', r"run\.block_s"),
        ('[run]\nblocks = 0\n', r"run\.blocks"),
        ('[run]\nblock_settle_cap_s = 8\n', r"run\.block_settle_cap_s: blocks settle in design alternate only"),
        ('[run]\ndesign = "alternate"\nblock_settle_cap_s = -1\n', r"run\.block_settle_cap_s"),
    ],
)  # fmt: skip
def test_bad_design_settings_are_one_line_errors(text, expected):
    import re

    with pytest.raises(SuiteError) as e:
        parse_suite(text, "x.toml")
    msg = str(e.value)
    assert msg.splitlines() == [msg] and re.search(expected, msg), msg


def test_a_solo_suite_is_recorded_as_runs_always_were():
    """Runs before designs existed have no run.design: a default suite's record has none either
    (--resume and compare of those runs see no difference); an alternate one says it all."""
    assert {"design", "block_s", "blocks", "block_settle_cap_s"}.isdisjoint(
        Suite().as_dict()["run"]
    )
    alt = parse_suite('[run]\ndesign = "alternate"\nblocks = 6\n', "x.toml").as_dict()["run"]
    assert alt["design"] == "alternate" and alt["blocks"] == 6 and "block_s" not in alt
    assert "block_settle_cap_s" not in alt  # fixed blocks, as alternate runs always were
    settling = parse_suite('[run]\ndesign = "alternate"\nblock_settle_cap_s = 6\n', "x.toml")
    assert settling.as_dict()["run"]["block_settle_cap_s"] == 6
    assert alternate.manifest_record(settling) == {
        "name": "alternate", "block_s": 5, "blocks": 4, "block_settle_cap_s": 6,
    }  # fmt: skip
    fixed = parse_suite('[run]\ndesign = "alternate"\n', "x.toml")
    assert alternate.manifest_record(fixed) == {"name": "alternate", "block_s": 5, "blocks": 4}
    words = run_design.words({"run_design": alternate.manifest_record(settling)})
    assert "blocks of 5 s after each block's ramp (at most 6 s more), 4 per arm" in words


def test_settling_blocks_reach_the_level_runner_and_the_eta(monkeypatch):
    """block_settle_cap_s is each block's settle cap in sysbench's run_level (the same live rule
    as a solo level's settle_cap_s); 0 leaves blocks fixed. The ETA plans for the cap."""
    from types import SimpleNamespace

    from suites.runner.plan import estimate_cell_seconds
    from suites.workloads.sysbench import plugin

    seen = []
    monkeypatch.setattr(plugin, "run_level", lambda *a, **k: seen.append((a, k)))
    for cap in (0, 6):
        suite = parse_suite(
            f'[run]\ndesign = "alternate"\nblock_settle_cap_s = {cap}\n'
            '[sysbench]\nworkloads = ["oltp_ro"]\nthreads = [8]\n', "x.toml"
        )  # fmt: skip
        ctx = SimpleNamespace(
            suite=suite, engine="innodb", target=lambda: "target", logs=Path("/nowhere"),
            on_interval=None, progress=lambda *a: None,
        )  # fmt: skip
        ((phase, run),) = list(plugin.Sysbench().block_levels(ctx, 5))
        run(0)
        assert phase == "oltp_ro@8"
        args, kwargs = seen[-1]
        assert args[2] == 8 and args[3] == 5 and kwargs["settle_cap_s"] == cap
    fixed = estimate_cell_seconds(parse_suite('[run]\ndesign = "alternate"\n', "x.toml"))
    capped = estimate_cell_seconds(
        parse_suite('[run]\ndesign = "alternate"\nblock_settle_cap_s = 6\n', "x.toml")
    )
    assert capped > fixed


# -- the composed level, and what the derivation makes of its blocks -------------------------------
def _res(qps, seconds, events, p95, hist, status="ok"):
    rec = SysbenchLevel.model_validate(
        {"latency_histogram": {"array_size": 1024, "range_min_ms": 0.001,
                               "range_max_ms": 100000.0, "buckets": hist}, "lat_min_ms": 0.05}
    )  # fmt: skip
    return LevelResult(
        workload="oltp_ro", threads=8, status=status, duration_s=seconds, events=events,
        tps=events / seconds, qps=qps, lat_avg_ms=1.0, lat_p95_ms=p95, lat_max_ms=9.0,
        sysbench=rec, error=None if status == "ok" else "died",
    )  # fmt: skip


def test_composed_level_sums_its_blocks_and_merges_their_histograms():
    a = _res(1000.0, 3.0, 300, 2.0, [[600, 300]])
    b = _res(2000.0, 3.0, 600, 3.0, [[700, 600]])
    res = compose([a, b])
    assert res.status == "ok" and res.duration_s == 6.0 and res.events == 900
    assert res.qps == pytest.approx(1500.0)
    assert res.sysbench.latency_histogram.buckets == [(600, 300), (700, 600)]
    assert res.lat_p50_ms == pytest.approx(
        min(math.exp(700 / (1023 / math.log(1e8)) + math.log(1e-3)), 9.0), rel=1e-6
    )
    bad = compose([a, _res(10.0, 3.0, 3, 1.0, [[1, 3]], status="failed")])
    assert bad.status == "failed" and "block 2: died" in bad.error


def _raw_level(blocks):
    return {
        "phase": "oltp_ro@8", "workload": "oltp_ro", "threads": 8, "status": "ok",
        "report": {"qps": 1.0, "duration_s": 6.0}, "intervals": [], "blocks": blocks,
    }  # fmt: skip


def test_derived_row_of_a_blocked_level():
    blocks = [_block(0, [1, 100, 100]), _block(1, [1, 400, 400], position=1)]
    level = _raw_level(blocks)
    RawLevel.model_validate(level)  # what the raw record holds validates
    raw = {"identity": {"allocator": "glibc", "repeat": 1}, "clock": {"planned_s": 3.0,
           "interval_s": 1.0}, "phases": {}, "levels": [level]}  # fmt: skip
    row, window = derive_level(raw, level)
    assert row["steady_qps"] == pytest.approx(200.0)
    assert row["cpu_us_per_op"] is None and row["window_s"] is None
    assert window["measured"] is False and window["reason"].startswith("alternate design")


def test_a_blocked_levels_cpu_per_query_is_its_blocks_cpu_over_their_queries():
    """The server's CPU read around each block, over the queries the blocks served: what the
    exposure words need (cpu_us_per_op), which the level's phase cannot give. A block without
    its reading (recorded before blocks had one) or a failed one: nothing, not a part."""
    a = {**_block(0, [1, 100, 100], qps=100.0), "cpu_s": 0.03}  # 300 queries
    b = {**_block(1, [1, 300, 300], position=1, qps=300.0), "cpu_s": 0.06}  # 900 queries
    level = _raw_level([a, b])
    RawLevel.model_validate(level)
    raw = {"identity": {"allocator": "glibc", "repeat": 1}, "clock": {"planned_s": 3.0,
           "interval_s": 1.0}, "phases": {}, "levels": [level]}  # fmt: skip
    row, window = derive_level(raw, level)
    assert row["cpu_us_per_op"] == pytest.approx(0.09 * 1e6 / 1200)  # 75 µs a query
    assert row["cpu_s_per_1m_ops"] == row["cpu_us_per_op"] and row["window_s"] is None
    assert "CPU per query from the blocks" in window["reason"]
    assert cpu_us_per_op([a, {**b, "cpu_s": None}]) is None
    assert cpu_us_per_op([a, {**b, "status": "failed"}]) is None


# -- preflight and the verdicts' design -----------------------------------------------------------
def test_preflight_needs_memory_for_every_live_server(tmp_path, monkeypatch):
    monkeypatch.setattr(preflight, "mem_available_kb", lambda: 10**12)
    suite = Suite()
    one = {n.what: n for n in preflight.checks(suite, tmp_path, 1000)}
    three = {n.what: n for n in preflight.checks(suite, tmp_path, 1000, live_servers=3)}
    mem1 = one["available memory for the server"]
    mem3 = three["available memory for the servers"]
    assert mem3.need == 3 * mem1.need and "3 servers alive at once" in mem3.fields
    disk1 = next(n for w, n in one.items() if w.startswith("disk"))
    disk3 = next(n for w, n in three.items() if w.startswith("disk"))
    assert disk3.need == pytest.approx(3 * disk1.need)


def test_verdicts_csv_names_the_design_and_older_runs_are_solo():
    v = Verdict("s", "oltp_ro", "glibc-aa", "glibc", "system", 8, "throughput", 1.0, 0.9, 1.1,
                "none", 4, 0.95, True)  # fmt: skip
    rows = list(csv.DictReader(io.StringIO(verdicts_csv([v], "alternate"))))
    assert CSV_COLUMNS[-1] == "design" and rows[0]["design"] == "alternate"
    assert list(csv.DictReader(io.StringIO(verdicts_csv([v]))))[0]["design"] == "solo"
    assert run_design.name({}) == "solo"
    assert (
        run_design.name({"run_design": {"name": "alternate", "block_s": 5, "blocks": 4}})
        == "alternate"
    )
    assert "blocks of 5 s, 4 per arm" in run_design.words(
        {"run_design": {"name": "alternate", "block_s": 5, "blocks": 4}}
    )


def test_cell_plan_ids_unchanged_by_the_design():
    # the design changes how cells run, never what they are called (resume and compare key on it)
    assert CellPlan(0, 1, "srv", "glibc", "system").id == "srv__glibc__thp-system__r1"
