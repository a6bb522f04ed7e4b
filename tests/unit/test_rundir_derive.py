"""The pure derivations (rundir.derive) on recorded raw data: a real format-3 run's raw records
(raw_version 1, upgraded in memory) give back its recorded rows, and the phase and window figures
follow what was observed."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from rundir.derive.levels import derive_cell, derive_level
from rundir.derive.phases import FIGURE_KEYS, phase_figures, window_figures
from rundir.format import FORMAT5_ADDED_COLUMNS, FORMAT6_ADDED_COLUMNS
from rundir.records import check_raw

RUN = Path(__file__).resolve().parents[1] / "fixtures" / "runs" / "real-smoke-format3"
RAWS = sorted((RUN / "raw").glob("*.json"))


def _raw(path: Path) -> dict:
    """A recorded raw record, upgraded to the current raw_version."""
    return check_raw(json.loads(path.read_text()), str(path))


@pytest.mark.parametrize("path", RAWS, ids=lambda p: p.stem)
def test_recorded_raw_gives_back_the_recorded_rows_and_windows(path):
    raw = _raw(path)
    cell = json.loads((RUN / "cells" / path.name).read_text())
    derived = derive_cell(raw)
    # Columns a later format added (format 5: hugepages, RSS by mapping, scenario cycles; format
    # 6) come out empty from a record that never observed them; every other figure is the
    # recorded one.
    later = (*FORMAT5_ADDED_COLUMNS, *FORMAT6_ADDED_COLUMNS)
    assert all(row[c] is None for row in derived.rows for c in later)
    assert [_without(r, later) for r in derived.rows] == cell["rows"]
    assert derived.windows == [lv["window"] for lv in cell["cell"]["levels"]]
    # The manifest's phase figures (what the wait4 reconciliation summed) are the same function's.
    for name, ph in raw["phases"].items():
        want = {k: v for k, v in cell["cell"]["collectors"]["phases"][name].items()}
        got = phase_figures(ph, raw["counters"])
        assert all(got[c] is None for c in FORMAT5_ADDED_COLUMNS if c in got)
        assert _without(got, FORMAT5_ADDED_COLUMNS) == want


def _without(d: dict, keys) -> dict:
    return {k: v for k, v in d.items() if k not in keys}


def test_a_version_1_raw_record_is_upgraded_in_memory():
    path = RAWS[0]
    old = json.loads(path.read_text())
    raw = _raw(path)
    assert old["raw_version"] == 1 and raw["raw_version"] == 2
    # which counters format 3 derived its status columns from, now said by the record
    assert raw["counters"]["threads_created"] == "Threads_created"
    assert raw["counters"]["pages_read_from_disk"] == "Innodb_buffer_pool_reads"
    # ctx_* became ctxsw_*, as results.csv names them
    snap = raw["phases"]["point_select@16"]["end"]["snap"]
    assert "ctxsw_voluntary" in snap and "ctx_voluntary" not in snap
    # the untyped extra became the typed sysbench record
    level = raw["levels"][0]
    assert "extra" not in level and level["sysbench"]["latency_histogram"]["buckets"]
    assert level["sysbench"]["argv"] == old["levels"][0]["extra"]["argv"]


def _level(raw, phase):
    return next(lv for lv in raw["levels"] if lv["phase"] == phase)


def test_phase_figures_are_deltas_between_its_boundaries():
    raw = _raw(RAWS[0])
    ph = raw["phases"]["point_select@16"]
    fig = phase_figures(ph, raw["counters"])
    assert set(fig) == set(FIGURE_KEYS)
    a, b = ph["start"]["snap"], ph["end"]["snap"]
    assert fig["cpu_user_s"] == round(b["cpu_user_s"] - a["cpu_user_s"], 3)
    assert fig["ctxsw_voluntary"] == b["ctxsw_voluntary"] - a["ctxsw_voluntary"]
    assert fig["rss_start_kb"] == a["rss_kb"] and fig["rss_end_kb"] == b["rss_kb"]
    assert fig["rss_peak_kb"] == ph["peak_rss_kb"] >= fig["rss_start_kb"]
    status = ph["end"]["status"]["Threads_created"] - ph["start"]["status"]["Threads_created"]
    assert fig["threads_created"] == status
    assert fig["window_marks"] == len(ph["marks"])
    # The startup phase begins in the launch gate: its memory starts at the server's first sample.
    start = raw["phases"]["startup"]
    assert start["start"]["snap"]["pre_exec"] is True
    assert phase_figures(start)["rss_start_kb"] == start["first_server"]["rss_kb"]
    # Without the counters' names, no status column: this layer knows no server's names.
    assert phase_figures(ph)["threads_created"] is None
    # A phase that never closed has no figures, and says so.
    with pytest.raises(ValueError, match="no end boundary"):
        phase_figures({**ph, "end": None})


def test_window_figures_need_two_live_marks():
    ph = _raw(RAWS[0])["phases"]["oltp_ro@4"]
    win = window_figures(ph, 0, 2, "taskstats")
    m0, m2 = ph["marks"][0], ph["marks"][2]
    assert win["window_s"] == round(m2["t_s"] - m0["t_s"], 4)
    assert win["cpu_sys_s"] == round(m2["cpu_sys_s"] - m0["cpu_sys_s"], 3)
    dead = copy.deepcopy(ph)
    dead["marks"][2]["live"] = False
    assert window_figures(dead, 0, 2, "taskstats") is None
    assert window_figures({**ph, "marks": ph["marks"][:1]}, 0, -1, "taskstats") is None


def test_a_fixed_window_rule_reaches_a_recorded_run():
    # What --rederive is for: the same raw record under a changed rule gives changed rows. Here
    # the clock says the level lasted 0.5 s less, so the window must close earlier.
    raw = _raw(RAWS[0])
    level = _level(raw, "oltp_ro@16")
    row, win = derive_level(raw, level)
    shorter = {**raw, "clock": {**raw["clock"], "duration_s": raw["clock"]["duration_s"] - 0.5}}
    row2, win2 = derive_level(shorter, level)
    assert win["measured"] and win2["measured"]
    assert win2["workload_last_t_s"] < win["workload_last_t_s"]
    assert row2["window_s"] < row["window_s"]
    assert row2["qps"] == row["qps"]  # the workload's own figures are its report's


def test_iibench_short_level_keeps_its_window_from_raw():
    # tests/unit/test_cell_window.py's CI case (20,000 rows in 0.355 s: only the t=0 report and
    # the final one), through the whole derivation from a raw record.
    def snap(t, cpu, csw):
        return {"t_s": t, "cpu_user_s": cpu, "cpu_sys_s": 0.0, "ctx_voluntary": csw,
                "ctx_involuntary": 0, "live": True, "pre_exec": False}  # fmt: skip

    boundary = {"snap": snap(1.6, 0.0, 0), "vmstat": {}, "status": None}
    raw = {
        "raw_version": 1,
        "cell": "c",
        "identity": {"cell": "c", "allocator": "glibc", "allocator_version": "", "repeat": 1},
        "clock": {"duration_s": None, "interval_s": 1.0, "last_ends_load": True},
        "ctxsw_source": "taskstats",
        "phases": {
            "iibench@2": {
                "name": "iibench@2",
                "start": boundary,
                "end": {**boundary, "snap": snap(2.3, 0.4, 1500)},
                "marks": [snap(1.679, 0.01, 10), snap(2.035, 0.28, 1054), snap(2.2, 0.3, 1100)],
            }
        },
        "levels": [
            {
                "phase": "iibench@2",
                "workload": "iibench",
                "threads": 2,
                "status": "ok",
                "report": {"workload": "iibench", "threads": 2, "qps": 56338.0},
                "intervals": [[0.0, 0.0, 1.679], [0.355, 56338.0, 2.035]],
            }
        ],
    }
    raw = check_raw(raw, "synthetic")
    (row,) = derive_cell(raw).rows
    assert row["window_s"] == pytest.approx(0.356)
    assert row["cpu_us_per_op"] == pytest.approx(0.27e6 / (56338.0 * 0.355), rel=1e-3)
    assert row["ctxsw_per_op"] == pytest.approx(1044 / (56338.0 * 0.355), rel=1e-3)
