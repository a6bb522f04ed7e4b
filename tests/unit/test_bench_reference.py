"""make bench's side-by-side arms: the plain commands, the parsing and the paired ratios."""

from pathlib import Path

import pytest

from suites import bench_reference as ref
from suites.selfbench import reference_rows
from suites.sysbench import SysbenchOptions
from suites.workload import ClientTarget

TARGET = ClientTarget.mysql(
    {"socket": "/tmp/x.sock", "user": "root", "password": "", "host": "127.0.0.1", "port": 1},
    "sbtest",
)


def test_raw_sysbench_is_the_stock_script_with_nothing_of_ours():
    argv = ref.raw_sysbench_argv(TARGET, "point_select", SysbenchOptions(tables=4), 8, 10)
    assert argv[1] == "oltp_point_select"
    assert argv[-1] == "run"
    assert "--threads=8" in argv and "--time=10" in argv and "--tables=4" in argv
    assert not any("mallocsweep" in a or "report-interval" in a for a in argv)


def test_raw_qps_reads_sysbench_s_own_figure():
    out = "SQL statistics:\n    queries:                             233499 (58308.74 per sec.)\n"
    assert ref.raw_qps(out) == 58308.74
    with pytest.raises(ValueError):
        ref.raw_qps("FATAL: error 2002")


def test_paired_ratios_are_per_round_with_their_range():
    p = ref.paired([90.0, 100.0, 99.0], [100.0, 100.0, 90.0])
    assert p["ratios"] == [0.9, 1.0, 1.1]
    assert p["ratio"] == 1.0 and p["lo"] == 0.9 and p["hi"] == 1.1
    assert ref.paired([], [])["ratio"] is None


def test_sweep_goal_and_resolution():
    pt = ref.SweepPoint("oltp_ro", 8, ours=[97.0, 99.5], raw=[100.0, 100.0])
    s = pt.summary()
    assert s["ratio"] == pytest.approx(0.9825) and s["met"] and s["resolvable"]
    noisy = ref.SweepPoint("oltp_ro", 8, ours=[70.0, 120.0], raw=[100.0, 100.0]).summary()
    assert not noisy["resolvable"]


def test_rows_say_why_a_goal_is_not_resolvable_and_compare_cpu_per_row():
    sweep = ref.SweepPoint("point_select", 8, ours=[60.0, 100.0], raw=[100.0, 100.0])
    sweep.runner_core = [0.002]
    sweep.ours_client_us, sweep.raw_client_us = [8.6], [8.5]
    ins = ref.InsertPoint(10, 1000, ours=[110.0], ref=[100.0], ours_cpu_us=[2.0], ref_cpu_us=[4.0])
    rows = reference_rows(
        {
            "sweep_vs_raw": {"points": [sweep.summary()]},
            "iibench_vs_reference": {"points": [ins.summary()]},
        }
    )
    assert "NOT met" in rows[0][4] and "spread (40% of the ratio)" in rows[0][4]
    assert "runner 0.20% of a core" in rows[0][1]
    assert rows[1][2].startswith("1.100") and "yes" in rows[1][4]
    assert rows[2][2] == "0.50" and "yes" in rows[2][4]


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
