"""The live side of the steady-state rule (suites/workloads/sysbench/settle.py): when a level with
settle_cap_s is told to end, and how the stop the wrapper reports reaches the derivation."""

from __future__ import annotations

import pytest

from rundir.derive.window import Interval, load_end
from suites.workloads.sysbench.records import LevelRecords, add_record
from suites.workloads.sysbench.settle import SettleWatch


def _feed(watch: SettleWatch, rates):
    for i, r in enumerate(rates):
        watch.add(float(i + 1), r)
        if watch.stopped_at is not None:
            return


def test_a_steady_level_stops_once_duration_s_has_been_measured(tmp_path):
    w = SettleWatch(4, tmp_path / "level.stop")
    _feed(w, [1000.0] * 30)
    # drop 0: reports 1..5 after the first give t_5 - t_0 = 4 s of measurement
    assert w.stopped_at == 5.0
    assert (tmp_path / "level.stop").exists()


def test_a_ramp_extends_the_level_past_duration_s(tmp_path):
    w = SettleWatch(4, tmp_path / "level.stop")
    _feed(w, [200.0, 400.0, 600.0, 800.0, 1000.0] + [1000.0] * 30)
    assert w.stopped_at is not None and w.stopped_at > 5.0
    # at least duration_s seconds after the ramp's end
    assert w.stopped_at - 5.0 >= 4.0 - 1e-9


def test_a_level_that_never_settles_is_never_told_to_stop(tmp_path):
    w = SettleWatch(4, tmp_path / "level.stop")
    _feed(w, [1000.0 + 100.0 * i for i in range(16)])  # a steady climb: the cap ends it
    assert w.stopped_at is None
    assert not (tmp_path / "level.stop").exists()


def test_the_wrappers_stop_record_is_kept_and_a_refusal_is_a_problem():
    out = LevelRecords()
    add_record(out, {"type": "stop", "t_s": 9.0003})
    assert out.settled_stop_s == pytest.approx(9.0003)
    add_record(out, {"type": "stop_refused", "reason": "unexpected layout"})
    assert out.problems == ["could not end the level early: unexpected layout"]


def test_a_stopped_level_ends_its_load_at_the_stop():
    ivs = [Interval(float(t), 100.0, None) for t in range(1, 12)]
    # planned --time 16 s (4 + cap 12), stopped at the report of t = 9: as the derivation reads it
    assert load_end(ivs, 9.0 + 0.5, 1.0) == pytest.approx(9.0)
