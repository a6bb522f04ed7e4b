"""The exposure words and the "cannot matter here" verdict (analysis/exposure.py), on rows and a
recorded bound; older runs (fixtures) have no exposure and report without it."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from analysis import exposure
from analysis.judge import Judged, Judgement
from analysis.metrics import BETTER, UNDECIDED
from analysis.report import render
from analysis.verdicts import Verdict, undecided
from rundir.read import load_run
from servers.callcost import bound

RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "runs"
# Recorded before the exposure counter existed: every format before 6 (real-alternate-aa, the
# first format-6 fixture, counted its calls)
OLDER = sorted(
    p
    for p in RUNS.glob("real-*")
    if (p / "manifest.json").is_file()
    and json.loads((p / "manifest.json").read_text())["format_version"] < 6
)
BOUND = {
    "small": {"ns": 6.0, "threads": 2, "cheapest": "tcmalloc", "dearest": "tbbmalloc"},
    "large": {"ns": 70.0, "threads": 1, "cheapest": "tcmalloc", "dearest": "jemalloc"},
}


def _row(alloc, repeat, calls, cpu, frees=None, workload="point_select", threads=8):
    return {
        "workload": workload, "server": "mariadb-10.11", "thp": "system", "threads": threads,
        "allocator": alloc, "repeat": repeat, "cell": f"{alloc}-{repeat}",
        "malloc_calls_per_query": calls, "free_calls_per_query": calls if frees is None else frees,
        "malloc_bytes_per_query": 100.0 * calls, "malloc_calls_per_txn": calls,
        "cpu_us_per_op": cpu,
    }  # fmt: skip


def _run(rows, bound_=BOUND):
    return SimpleNamespace(
        manifest={"call_cost": {"bound": bound_, "threads": [1, 2], "source": "test",
                                "table": [{"allocator": "glibc",
                                           "ns_per_call": {"small": {"1": 4.0}}}]}},
        ok_rows=rows,
        is_standin=lambda cell: False,
    )  # fmt: skip


def test_needed_difference_is_five_percent_of_cpu_over_the_calls():
    # 40 µs per query, 100 calls: 5% is 2 µs, 20 ns per call
    assert exposure.needed_ns(40.0, 100.0) == pytest.approx(20.0)
    assert exposure.needed_ns(None, 100.0) is None and exposure.needed_ns(40.0, 0) is None


def test_point_exposure_counts_allocations_and_frees_over_every_life():
    rows = [_row("glibc", 1, 4.0, 30.0), _row("jemalloc", 1, 6.0, 26.0), _row("glibc", 2, 5.0, 28)]
    exp = exposure.point_exposure(rows)
    assert exp["calls"] == 5.0 and exp["frees"] == 5.0 and exp["cpu_us"] == 28.0
    assert exp["needed_ns"] == pytest.approx(0.05 * 28.0 * 1000 / 10.0)  # 140 ns
    assert exposure.point_exposure([{**rows[0], "malloc_calls_per_query": None}]) is None


def test_an_undecided_point_far_beyond_the_bound_cannot_matter():
    point = ("mariadb-10.11", "point_select", "system", 8)
    judged = Judged(
        arms={
            "jemalloc": Judgement(1.1, 0.8, 1.4, UNDECIDED, 4, 0.95),
            "tbb": Judgement(1.3, 1.1, 1.5, BETTER, 4, 0.95),
        }
    )
    # 2 calls + 2 frees per query of 100 B, 30 µs: 5% is 1.5 µs, ~60x the 4 x 6 ns the
    # installed allocators' small-block costs could differ by
    few = _run([_row("glibc", r, 2.0, 30.0) for r in (1, 2)])
    got = exposure.settle(few, point, judged)
    je = got.arms["jemalloc"]
    assert je.verdict == exposure.CANNOT_MATTER and (je.ratio, je.lo, je.hi) == (1.1, 0.8, 1.4)
    assert got.arms["tbb"] == judged.arms["tbb"]  # a decided verdict stays what the intervals said
    # 100 calls + 100 frees at 40 µs: 2 µs over 1.2 µs possible, under 10x: still undecided
    many = _run([_row("glibc", r, 100.0, 40.0) for r in (1, 2)])
    assert exposure.settle(many, point, judged) == judged
    # no bound recorded (an older run, or counting off): nothing is decided from exposure
    assert exposure.settle(_run(few.ok_rows, None), point, judged) == judged


def test_large_blocks_are_bounded_by_the_large_class():
    """MariaDB's OLTP_RO: ~2.3 calls per query asking ~227 kB (sort and read buffers). Every call
    may be a large one, where allocators differ ~10x more: the allocator can matter. The same
    calls asking 100 B each cannot matter."""
    point = ("mariadb-10.11", "oltp_ro", "system", 8)
    big = [{**_row("glibc", r, 2.26, 22.0, 2.26, "oltp_ro"), "malloc_bytes_per_query": 227e3}
           for r in (1, 2)]  # fmt: skip
    exp = exposure.point_exposure(big)
    assert exposure.possible_ns(exp, BOUND) == pytest.approx(70.0 * 2 * 2.26)
    assert exposure.margin_of(exp, BOUND) == pytest.approx(1100 / 316.4, rel=1e-3)
    assert not exposure.cannot_matter(_run(big), point)
    small = [{**r, "malloc_bytes_per_query": 226.0} for r in big]
    assert exposure.cannot_matter(_run(small), point)


def test_the_verdict_says_it_in_words_and_counts_as_decided():
    v = Verdict("s", "point_select", "jemalloc", "glibc", "system", 8, "throughput",
                1.1, 0.8, 1.4, exposure.CANNOT_MATTER, 4, 0.95, False)  # fmt: skip
    assert v.word == "cannot matter here" and "cannot matter" in v.meaning
    assert undecided([v]) == [] and not v.significant


def test_the_table_and_its_words():
    rows = [_row("glibc", 1, 2.0, 30.0), _row("glibc", 1, 120.0, 40.0, 110.0, "oltp_ro")]
    t = exposure.exposure_table(_run(rows), "point_select")
    assert [c.text for c in t.rows[0]][-1] == "cannot matter here"
    assert t.rows[0][1].value == 2.0
    assert "375 ns per call" in t.notes[0] and "tbbmalloc vs tcmalloc" in t.notes[0]
    ro = exposure.exposure_table(_run(rows), "oltp_ro")
    assert ro.rows[0][-1].text == "can matter"  # 2 µs over ~1.4 µs possible: 1.4x
    assert exposure.exposure_table(_run(rows), "none") is None


def test_the_bound_is_the_largest_difference_at_one_thread_count():
    table = [
        {"allocator": "a", "ns_per_call": {"small": {"1": 2.0, "2": 2.5}, "large": {"1": 9.0}}},
        {"allocator": "b", "ns_per_call": {"small": {"1": 4.0, "2": 9.0}, "large": {"1": 80.0}}},
        {"allocator": "c", "ns_per_call": {"small": {"1": 3.0, "2": 3.0}, "large": {"1": 7.0}}},
    ]
    assert bound(table, "small") == {"ns": 6.5, "threads": 2, "cheapest": "a", "dearest": "b"}
    assert bound(table, "large") == {"ns": 73.0, "threads": 1, "cheapest": "c", "dearest": "b"}
    assert bound(table[:1]) is None


@pytest.mark.parametrize("path", OLDER, ids=lambda p: p.name)
def test_older_runs_report_without_exposure(path):
    run = load_run(path)
    assert all(r.get("malloc_calls_per_query") is None for r in run.rows)
    assert all(exposure.exposure_table(run, wl) is None for wl in run.workloads)
    html, md = render(run)
    assert "calls into the allocator" not in html and "calls into the allocator" not in md


def test_a_call_cost_measured_on_a_busy_machine_is_measured_again_when_it_is_quiet(
    tmp_path, monkeypatch
):
    """The bound is cached per build; an entry taken at a load average above the CPU count is
    replaced by the first measurement on a machine that is not busy, and kept otherwise."""
    import os

    from servers import callcost
    from servers.allocators import Allocator

    monkeypatch.setenv("MALLOCSWEEP_CACHE", str(tmp_path))
    measured = []

    def fake_measure(alloc, threads, size_class="small"):
        measured.append(os.getloadavg()[0])
        return 10.0 if os.getloadavg()[0] > 2 else 5.0

    monkeypatch.setattr(callcost, "measure", fake_measure)
    monkeypatch.setattr(callcost.os, "cpu_count", lambda: 2)
    glibc = Allocator(name="glibc", kind="system", family="glibc", library=None)
    monkeypatch.setattr(callcost.os, "getloadavg", lambda: (40.0, 40.0, 40.0))
    busy = callcost.cost_of(glibc, (1,))
    assert busy["ns_per_call"]["small"]["1"] == 10.0 and busy["load_avg"][0] == 40.0
    assert callcost.cost_of(glibc, (1,)) == busy  # still busy: the entry is kept
    n = len(measured)
    monkeypatch.setattr(callcost.os, "getloadavg", lambda: (0.5, 0.5, 0.5))
    quiet = callcost.cost_of(glibc, (1,))
    assert len(measured) > n and quiet["ns_per_call"]["small"]["1"] == 5.0
    n = len(measured)
    assert callcost.cost_of(glibc, (1,)) == quiet and len(measured) == n  # quiet: kept
