"""The allocator's own accounting on a real MariaDB under each of the six core allocators, and the
thread-churn cycles (issue 16), from one run: six server lives, each churning 2 -> 24 -> 2 clients
under thread_cache_size 1 (one cycle and the closing level), then idling for a second.

The oracle for the allocator's figures is the kernel: RSS and swap read from /proc right after
each reading (in use <= RSS + swap). The allocator's committed figure is not bounded by RSS (it
counts pages never touched; servers/allocstats.py), so it is checked against its own books only. For churn, the server's own
Threads_created and the timeline's thread counts show threads really exiting between cycles.
"""

from __future__ import annotations

import csv

import pytest

from servers.allocators import resolve
from tests.integration.runs_helpers import (
    manifest,
    results,
    run_in_process,
)

pytestmark = pytest.mark.integration

CORE = ("glibc", "jemalloc", "tcmalloc", "tcmalloc-minimal", "mimalloc", "tbbmalloc")
# What answers for each allocator: the API the shim found in the library that serves malloc.
API = {
    "glibc": "glibc mallinfo2",
    "jemalloc": "jemalloc mallctl",
    "tcmalloc": "gperftools MallocExtension",
    "tcmalloc-minimal": "gperftools MallocExtension",
    "mimalloc": "mimalloc mi_process_info",  # a release build keeps no in-use totals
    "tbbmalloc": None,  # TBB malloc exposes no statistics
}
WITH_FIGURES = ("glibc", "jemalloc", "tcmalloc", "tcmalloc-minimal")
HIGH = 24
SUITE = """
[suite]
name = "alloc-accounting"
description = "six core allocators, thread churn 2 -> 24 -> 2, idle after"
[server]
buffer_pool_mb = 32
[allocators]
use = [{allocators}]
[dataset]
tables = 1
table_size = 1000
[warmup]
min_s = 1
cap_s = 2
threads = 2
[sysbench]
workloads = ["point_select"]
threads = [2, {high}]
duration_s = 3
[memory]
idle_s = 1
idle_sample_s = 0.5
churn_cycles = 1
churn_thread_cache = [1]
"""


@pytest.fixture(scope="module")
def run():
    missing = [a.name for a in resolve(list(CORE)) if not a.usable]
    if missing:
        pytest.skip(
            f"allocators not installed here: {', '.join(missing)} (make setup installs them)"
        )
    suite = SUITE.format(allocators=", ".join(f'"{a}"' for a in CORE), high=HIGH)
    with run_in_process("ms-alloc-", suite, "--quiet", "--no-report", check_leftovers=True) as (
        code,
        run_dir,
    ):
        yield code, run_dir, manifest(run_dir)


def _cells(m: dict) -> dict[str, dict]:
    return {c["allocator"]["name"]: c for c in m["cells"]}


def test_every_allocator_answers_through_the_library_that_serves_malloc(run):
    code, _, m = run
    assert code == 0
    cells = _cells(m)
    assert set(cells) == set(CORE)
    for name, cell in cells.items():
        assert cell["status"] == "ok", (name, cell.get("error"))
        am = cell["alloc_memory"]
        assert am["errors"] == [], (name, am["errors"])
        assert am["api"] == API[name], (name, am["api"])
        lib = cell["allocator"]["library"]
        if lib:  # preloaded: exactly that library answered, not libc or a dependency
            assert am["library"] == lib, (name, am["library"])
        else:
            assert am["library"].endswith("/libc.so.6"), am["library"]
        ats = [r["at"] for r in am["readings"]]
        assert ats[:2] == ["server start", "warmup end"] and ats[-1] == "server stop", ats
        assert ats.count("level end") == 3 and ats.count("idle") >= 2, ats


def test_figures_agree_with_the_kernel(run):
    _, _, m = run
    for name, cell in _cells(m).items():
        for r in cell["alloc_memory"]["readings"]:
            assert r["rss_kb"] and r["rss_kb"] > 10_000, (name, r)
            figures = [r[f"alloc_{k}_kb"] for k in ("in_use", "cached", "mapped", "committed")]
            if name not in WITH_FIGURES:
                assert figures == [None] * 4 and r["overhead"] is None, (name, r)
                continue
            in_use, cached, mapped, committed = figures
            swap = r["swap_kb"] or 0
            assert "inconsistent" not in r, (name, r)
            # What the server holds through malloc is resident (or swapped): the kernel's RSS
            # bounds it. A running MariaDB holds megabytes (table cache, THDs, InnoDB dictionary).
            assert 1024 < in_use <= r["rss_kb"] + swap, (name, r)
            # The allocator's own books balance: what it committed is in use + cached, within
            # its address space (jemalloc documents no order between resident and mapped).
            assert cached >= 0 and abs(in_use + cached - committed) <= 1, (name, r)
            if name != "jemalloc":
                assert committed <= mapped + 1, (name, r)
            assert r["overhead"] == round(r["rss_kb"] / in_use, 3)


def test_level_rows_carry_the_end_of_level_reading(run):
    _, run_dir, m = run
    cells = _cells(m)
    rows = results(run_dir)
    assert rows
    for name, cell in cells.items():
        mine = [r for r in rows if r["allocator"] == name]
        ends = [r for r in cell["alloc_memory"]["readings"] if r["at"] == "level end"]
        assert len(ends) == len(mine) == 3, name
        for row, end in zip(mine, ends, strict=True):  # both in level order
            if name not in WITH_FIGURES:
                assert row["alloc_in_use_kb"] == "" and row["alloc_overhead"] == "", row
                continue
            assert int(row["alloc_in_use_kb"]) == end["alloc_in_use_kb"], (name, row)
            assert int(row["alloc_cached_kb"]) == end["alloc_cached_kb"], (name, row)
            assert float(row["alloc_overhead"]) == end["overhead"], (name, row)


def test_churn_threads_exit_between_cycles_and_rss_per_cycle(run):
    _, run_dir, m = run
    rows = results(run_dir)
    for name, cell in _cells(m).items():
        mine = [r for r in rows if r["allocator"] == name]
        # 2 -> 24, then back to 2: cycles 1, 1, 2 under thread_cache_size 1
        assert [(int(r["threads"]), int(r["churn_cycle"])) for r in mine] == [
            (2, 1),
            (HIGH, 1),
            (2, 2),
        ], name
        assert {r["thread_cache_size"] for r in mine} == {"1"}
        assert all(r["rss_end_kb"] for r in mine), name  # RSS per cycle
        # every high level started its threads anew: they had exited after the previous cycle
        for r in mine:
            if int(r["threads"]) == HIGH:
                assert int(r["threads_created"]) >= HIGH - 2, (name, r["threads_created"])
        with (run_dir / cell["samples_file"]).open() as f:
            samples = list(csv.DictReader(f))

        def threads_in(phase, samples=samples):
            return [int(s["threads"]) for s in samples if s["phase"] == phase and s["threads"]]

        for c in (1,):
            high = threads_in(f"point_select@{HIGH}#c{c}/tc1")
            low_after = threads_in(f"point_select@2#c{c + 1}/tc1")
            assert high and low_after, (name, c)
            # the server's threads went up with the clients and down again once they left
            assert max(high) - min(low_after) >= HIGH // 2, (name, c, high, low_after)


def test_idle_phase_says_what_was_returned(run):
    _, _, m = run
    for name, cell in _cells(m).items():
        ret = cell["alloc_memory"]["returned_after_load"]
        assert ret is not None and ret["idle_s"] >= 1, (name, ret)
        assert ret["rss_returned_kb"] == ret["rss_end_of_load_kb"] - ret["rss_after_idle_kb"]
        assert "idle" in cell["collectors"]["phases"], name
