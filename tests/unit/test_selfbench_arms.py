"""make bench's side-by-side arms: the plain commands, the parsing, the pairing and its verdicts."""

import math
from pathlib import Path

import pytest

from bench import paired
from bench import reference as ref
from bench.raw import printed_summary, raw_qps, raw_sysbench_argv
from bench.table import reference_rows, source_rows, sweep_rows
from suites.families.mysql.driver import DRIVER as MYSQL_DRIVER
from suites.workloads.sysbench import SysbenchOptions

TARGET = MYSQL_DRIVER.target(
    {"socket": "/tmp/x.sock", "user": "root", "password": "", "host": "127.0.0.1", "port": 1},
    "sbtest",
)


def test_raw_sysbench_is_the_stock_script_with_nothing_of_ours():
    argv = raw_sysbench_argv(TARGET, "point_select", SysbenchOptions(tables=4), 8, 10)
    assert argv[1] == "oltp_point_select"
    assert argv[-1] == "run"
    assert "--threads=8" in argv and "--time=10" in argv and "--tables=4" in argv
    assert "--db-ps-mode=auto" in argv
    assert not any("mallocsweep" in a or "report-interval" in a for a in argv)


def test_raw_qps_reads_sysbench_s_own_figures():
    out = (
        "SQL statistics:\n    queries:                             233499 (58308.74 per sec.)\n"
        "General statistics:\n    total time:                          4.0033s\n"
    )
    assert raw_qps(out) == 58308.74
    assert printed_summary(out) == {"queries": 233499, "qps": 58308.74, "total_time_s": 4.0033}
    with pytest.raises(ValueError):
        raw_qps("FATAL: error 2002")


def test_blocks_alternate_abba():
    assert paired.block_order(3) == ["ours", "raw", "raw", "ours", "ours", "raw"]


def _point(pairs: list[tuple[float, float]]) -> paired.PairedPoint:
    """Blocks in ABBA order from (ours, raw) QPS pairs."""
    pt = paired.PairedPoint("point_select", 8)
    for k, (o, r) in enumerate(pairs):
        for arm in ("ours", "raw") if k % 2 == 0 else ("raw", "ours"):
            q = o if arm == "ours" else r
            pt.blocks.append(
                paired.Block(arm, q, q * 3, q * 3 + 2, 1.0, 3.1, 0.01 if arm == "ours" else None)
            )
    return pt


def test_pair_ratios_follow_the_arms_not_the_order():
    pt = _point([(99.0, 100.0), (50.0, 100.0), (110.0, 100.0)])
    assert pt.pair_ratios() == pytest.approx([0.99, 0.5, 1.1])


def test_interval_is_a_t_interval_on_log_ratios():
    iv = paired.t_interval([0.99, 1.01, 1.00, 0.98, 1.02])
    logs = [math.log(r) for r in (0.99, 1.01, 1.00, 0.98, 1.02)]
    sd = math.sqrt(sum((x - sum(logs) / 5) ** 2 for x in logs) / 4)
    half = 2.7764451 * sd / math.sqrt(5)  # t(0.975, 4)
    assert iv["ratio"] == pytest.approx(math.exp(sum(logs) / 5))
    assert iv["lo"] == pytest.approx(iv["ratio"] * math.exp(-half), rel=1e-6)
    assert iv["hi"] == pytest.approx(iv["ratio"] * math.exp(half), rel=1e-6)
    assert paired.t_interval([1.0])["lo"] is None
    assert paired.t_interval([])["ratio"] is None


def test_verdict_met_not_met_and_not_resolvable():
    tight_ok = _point([(100.0, 100.0), (99.5, 100.0), (100.5, 100.0), (100.0, 100.0)]).summary()
    assert tight_ok["verdict"] == "met" and tight_ok["met"] is True
    tight_low = _point([(90.0, 100.0), (91.0, 100.0), (89.0, 100.0), (90.0, 100.0)]).summary()
    assert tight_low["verdict"] == "not met" and tight_low["met"] is False
    noisy = _point([(70.0, 100.0), (130.0, 100.0), (95.0, 100.0), (105.0, 100.0)]).summary()
    assert noisy["verdict"] == "not resolvable" and noisy["met"] is None
    assert noisy["half_width"] > 0.1
    assert _point([(100.0, 100.0)]).summary()["verdict"] == "not resolvable"


def test_summary_carries_the_harness_cost_and_the_server_count():
    s = _point([(100.0, 100.0), (100.0, 100.0)]).summary()
    assert s["runner_core_fraction"] == pytest.approx(0.01 / 3.1)
    assert s["ours_client_us_per_query"] == pytest.approx(1e6 / 300)
    assert s["raw_server_per_sysbench_query"] == pytest.approx(302 / 300)
    assert s["pairs"] == 2 and len(s["blocks"]) == 4


def test_sweep_rows_say_when_a_goal_is_not_resolvable_and_print_the_noise():
    noisy = _point([(70.0, 100.0), (130.0, 100.0), (95.0, 100.0), (105.0, 100.0)]).summary()
    ok = _point([(100.0, 100.0), (99.5, 100.0), (100.5, 100.0), (100.0, 100.0)]).summary()
    rows = sweep_rows({"block_s": 3, "points": [noisy, ok]})
    assert "not resolvable" in rows[0][4] and f"+-{100 * noisy['half_width']:.1f}%" in rows[0][4]
    assert "pair sd" in rows[0][1] and "4 pairs of 3 s" in rows[0][1]
    assert "runner 0.32% of a core" in rows[1][1]
    assert "yes" in rows[1][4]


def test_iibench_rows_compare_rates_and_cpu_per_row():
    ins = ref.InsertPoint(
        10, 1000, ours=[110.0, 111.0, 109.0], ref=[100.0] * 3, ours_cpu_us=[2.0], ref_cpu_us=[4.0]
    )
    rows = reference_rows({"iibench_vs_reference": {"points": [ins.summary()]}})
    assert rows[0][2].startswith("1.100") and "yes" in rows[0][4]
    assert rows[1][2] == "0.50" and "yes" in rows[1][4]


def test_iibench_goal_is_met_only_when_the_whole_interval_clears_it():
    """A median above the goal is not enough (an earlier bench said "met" for 1.03 [0.89-1.78])."""
    one = ref.InsertPoint(1, 1000, ours=[110.0], ref=[100.0]).summary()
    assert one["verdict"] == "not resolvable" and one["met"] is None  # one round: no interval
    wide = ref.InsertPoint(1, 1000, ours=[89.0, 178.0, 103.0], ref=[100.0] * 3).summary()
    assert wide["ratio"] > 1 and wide["verdict"] == "not resolvable" and wide["met"] is None
    low = ref.InsertPoint(1, 1000, ours=[80.0, 81.0, 79.0], ref=[100.0] * 3).summary()
    assert low["verdict"] == "not met" and low["met"] is False
    rows = reference_rows({"iibench_vs_reference": {"points": [wide]}})
    assert "not resolvable" in rows[0][4]


def test_reference_missing_is_reported_not_guessed(tmp_path: Path):
    assert ref.find_reference(tmp_path / "nope.py") is None
    given = tmp_path / "iibench.py"
    given.write_text("")
    assert ref.find_reference(given) == given


def test_reference_argv_asks_for_the_same_load():
    argv = ref.reference_argv(Path("/r/iibench.py"), "/tmp/s.sock", "iibench", 30000, 1000)
    for opt in (
        "--max_rows=30000",
        "--rows_per_commit=1000",
        "--num_secondary_indexes=3",
        "--data_length_min=10",
        "--data_length_max=10",
        "--db_socket=/tmp/s.sock",
    ):
        assert opt in argv


def test_sources_cycles_give_each_source_against_the_arm_without_it():
    pt = paired.PairedPoint("point_select", 8, 2, paired.SOURCE_ARMS)
    qps = {"raw": 100.0, "raw_interval": 99.0, "wrapper": 98.0, "ours": 97.0}
    for arm in paired.block_order(2, paired.SOURCE_ARMS):
        pt.blocks.append(paired.Block(arm, qps[arm], 300.0, 300.0, 1.0, 3.0))
    assert paired.block_order(2, paired.SOURCE_ARMS)[3:5] == ["ours", "ours"]
    steps = {s["arm"]: s for s in pt.summary()["steps"]}
    assert steps["raw_interval"]["ratio"] == pytest.approx(0.99)
    assert steps["wrapper"]["ratio"] == pytest.approx(98 / 99)
    assert steps["ours"]["versus"] == "wrapper" and steps["ours"]["cycles"] == 2
    rows = source_rows({"sources": pt.summary()})
    assert len(rows) == 3 and "ours / wrapper" in rows[2][0] and "collectors" in rows[2][1]


def test_pairs_disturbed_by_other_load_are_shown_apart_but_still_judged():
    pt = _point([(100.0, 100.0), (50.0, 100.0), (101.0, 100.0), (99.0, 100.0)])
    for b in pt.blocks:
        b.others_cpu_s = 0.1 * b.wall_s  # 0.1 cores: undisturbed
    pt.blocks[3].others_cpu_s = 1.0 * pt.blocks[3].wall_s  # the 50.0 block: a burst of 1 core
    s = pt.summary()
    assert s["disturbed_blocks"] == 1 and s["pairs"] == 4
    assert s["undisturbed"]["pairs"] == 3
    assert s["undisturbed"]["ratio"] == pytest.approx((1.0 * 1.01 * 0.99) ** (1 / 3))
    assert s["verdict"] == "not resolvable"  # the verdict keeps every pair
    row = sweep_rows({"block_s": 3, "points": [s]})[0]
    assert "1 block(s) disturbed by other load" in row[1] and "over 3 pair(s)" in row[1]


def test_an_open_goal_says_how_many_pairs_would_decide_it():
    from bench.table import _verdict_cell

    p = {"ratio": 1.0, "lo": 0.95, "hi": 1.05, "half_width": 0.05, "sd": 0.10}
    p["verdict"] = paired.verdict(p)
    cell = _verdict_cell(p)
    assert (
        "not resolvable" in cell and "about 95 pairs would decide it" in cell
    )  # (1.96*.1/ln(1/.98))^2
    assert "pairs would decide" not in _verdict_cell({**p, "ratio": 0.98})  # never decidable
