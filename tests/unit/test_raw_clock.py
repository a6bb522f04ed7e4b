"""`duration_s` has one meaning: results.csv's measured length. The raw record's planned length
is `planned_s`; records written before the two were named apart still read."""

from __future__ import annotations

from rundir.records import RawClock


def test_a_new_clock_says_planned_s():
    clock = RawClock(planned_s=4.0, interval_s=1.0)
    assert clock.model_dump() == {"planned_s": 4.0, "interval_s": 1.0, "last_ends_load": False}


def test_an_older_record_s_duration_s_is_the_planned_length():
    old = RawClock.model_validate({"duration_s": 4.0, "interval_s": 1.0, "last_ends_load": False})
    assert old.planned_s == 4.0 and "duration_s" not in old.model_dump()
