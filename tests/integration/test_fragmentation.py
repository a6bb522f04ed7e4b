"""The fragmentation scenarios on a real MariaDB (issue 25), from one run: every scenario, four
short cycles each (the spike: one burst), under glibc and jemalloc, one round, tiny shapes (the
verdicts' metrics are tested on a recorded two-round run, tests/unit/test_growth.py). And RSS taken apart on the session's shared server, where the
stack heuristic is checked against its threads' own stack pointers.

The oracles: the kernel (the parts of RSS add up to its RSS within 1%, each read at the same
boundary), the server (its own account read at every cycle's end; the dump client's output
really written), the allocator (held = heap resident - its in use), and the run's own records."""

from __future__ import annotations

import csv
import json

import pytest

from analysis import growth, growth_rate
from collectors.procfs import ProcFS
from collectors.smaps import classify, decompose
from rundir.read import load_run
from tests.integration.runs_helpers import manifest, results, run_in_process

pytestmark = pytest.mark.integration

SCENARIOS = ("dump", "session_churn_tc2", "table_cache", "fulltext", "spike")
PART_COLUMNS = ("heap_resident_kb", "bufpool_resident_kb", "stacks_kb", "file_kb")
SUITE = """
[suite]
name = "frag-test"
kind = "fragmentation"
[server]
buffer_pool_mb = 32
[allocators]
use = ["glibc", "jemalloc"]
[dataset]
tables = 1
table_size = 1000
[warmup]
min_s = 1
cap_s = 2
threads = 2
scan = false
[fragmentation]
cycles = 4
cycle_s = 1
[dump]
background_threads = 1
[session_churn]
threads = 2
statements = 2
rows = 200
thread_cache_sizes = [2]
[table_cache]
tables = 410
threads = 2
table_open_cache = 20
[fulltext]
docs = 300
words = 10
vocabulary = 200
threads = 2
[spike]
cycles = 1
threads = 48
burst_s = 1
idle_s = 2
sample_s = 1
"""


@pytest.fixture(scope="module")
def run(dataset_cache):
    with run_in_process("ms-frag-", SUITE, "--quiet", cache=dataset_cache) as (code, run_dir):
        yield code, run_dir, manifest(run_dir), results(run_dir)


def test_every_scenario_ran_its_cycles_under_both_allocators(run):
    code, _, m, rows = run
    failed = [(r["cell"], r["workload"], r["error"]) for r in rows if r["status"] != "ok"]
    assert code == 0, ([c.get("error") for c in m["cells"]], failed)
    assert len(m["cells"]) == 2 and all(c["status"] == "ok" for c in m["cells"])
    for c in m["cells"]:
        mine = [r for r in rows if r["cell"] == c["id"]]
        cycles = {
            w: sorted(int(r["scenario_cycle"]) for r in mine if r["workload"] == w)
            for w in SCENARIOS
        }
        assert cycles == {w: [1] if w == "spike" else [1, 2, 3, 4] for w in SCENARIOS}
        assert all(r["status"] == "ok" for r in mine)


def test_parts_add_up_to_rss_at_every_cycle(run):
    _, run_dir, m, rows = run
    for r in rows:
        parts = [int(r[k]) for k in PART_COLUMNS]
        # MariaDB marks its buffer pool don't-dump; it has threads, files and a heap
        assert all(p > 0 for p in parts), r
    # every boundary: the parts add up to the kernel's VmRSS, read before and after the walk,
    # within 1% (of the two, where the process changed meanwhile)
    for c in m["cells"]:
        raw = json.loads((run_dir / "raw" / f"{c['id']}.json").read_text())
        ends = [p["end"]["snap"] for p in raw["phases"].values() if p.get("end")]
        ends = [e for e in ends if e.get("parts")]
        assert len(ends) >= 18
        for e in ends:
            total = sum(e["parts"][k]["rss_kb"] for k in ("bufpool", "stacks", "file", "heap"))
            lo = min(e["rss_kb"], e["parts"]["rss_after_kb"]) * 0.99
            hi = max(e["rss_kb"], e["parts"]["rss_after_kb"]) * 1.01
            assert lo <= total <= hi, (
                c["id"],
                e["t_s"],
                total,
                e["rss_kb"],
                e["parts"]["rss_after_kb"],
            )
        if r["alloc_in_use_kb"]:
            # the heap = in use and resident + held; in use = resident + never touched; no part
            # is negative
            held, heap = int(r["alloc_held_resident_kb"]), int(r["heap_resident_kb"])
            resident, untouched = int(r["alloc_in_use_resident_kb"]), int(r["alloc_untouched_kb"])
            assert held == heap - resident and resident + untouched == int(r["alloc_in_use_kb"])
            assert min(held, resident, untouched) >= 0
        assert r["server_memory_used_kb"]  # Memory_used, read at the same boundary


def test_timeline_has_the_parts_at_each_boundary(run):
    _, run_dir, m, rows = run
    cell = m["cells"][0]["id"]
    with open(run_dir / "samples" / f"{cell}.csv", newline="") as f:
        samples = list(csv.DictReader(f))
    with_parts = [s for s in samples if s["heap_resident_kb"]]
    # one row per boundary: startup's end, warmup's, every cycle's (and shutdown's start)
    assert len(with_parts) >= len([r for r in rows if r["cell"] == cell]) + 2
    assert all(s["heap_resident_kb"] == "" for s in samples if s not in with_parts)


def test_the_dump_wrote_its_file_and_the_spike_followed_idle_rss(run):
    _, run_dir, m, _ = run
    raw = json.loads((run_dir / "raw" / f"{m['cells'][0]['id']}.json").read_text())
    dumps = [lv["scenario"]["dump"] for lv in raw["levels"] if lv["workload"] == "dump"]
    assert len(dumps) == 4 and all(
        d["bytes"] > 10_000 and d["exit"]["returncode"] == 0 for d in dumps
    )
    (spike,) = [lv["scenario"] for lv in raw["levels"] if lv["workload"] == "spike"]
    assert spike["burst_end_kb"] > spike["pre_burst_kb"] and len(spike["idle"]) == 2
    assert spike["report"] and spike["settings"]["threads"] == 48
    # the scenario's server settings were put back after it (table caches, thread cache)
    levels = {lv["phase"]: lv for lv in raw["levels"]}
    assert levels["table_cache@2#c1"]["scenario"]["settings"]["table_open_cache"] == 20


def test_the_report_takes_memory_apart_per_cycle(run):
    _, run_dir, _, _ = run
    html = (run_dir / "report.html").read_text()
    for anchor in ('id="growth"', 'id="release"', 'id="proof"', "RSS by part over the cycles"):
        assert anchor in html
    # one life per allocator: growth figures, no verdicts (the report says why)
    lives = growth.life_growth(load_run(run_dir))
    assert {(x.allocator, x.workload) for x in lives if x.growth} == {
        (a, w) for a in ("glibc", "jemalloc") for w in SCENARIOS[:-1]
    }
    # growth per hour: against when each cycle ended (scenario_end_s, derived from the raw
    # boundary), every cycle of the life; the table says MB/h and never a ratio
    rates = growth_rate.life_rates(load_run(run_dir))
    assert {(x.allocator, x.workload) for x in rates if x.rss} == {
        (a, w) for a in ("glibc", "jemalloc") for w in SCENARIOS[:-1]
    }
    assert all(x.cycles == 4 and 0 < x.hours < 1 for x in rates)
    assert "growth MB/h" in html and "×" not in html.split('id="growth"')[1].split("</table>")[0]


def test_stack_heuristic_agrees_with_the_threads_stack_pointers(mariadb_life):
    """On the session's server: every mapping that holds a blocked thread's stack pointer is
    found as a stack by its shape alone, and the parts add up to the kernel's RSS within 1%."""
    server, _, _ = mariadb_life("glibc")
    fs = ProcFS()
    sps = fs.stack_pointers(server.pid)
    vmas = fs.smaps(server.pid)
    assert len(sps) >= 5  # the server's threads sleep in the kernel
    by_shape = {v.start for v in classify(vmas, [])["stacks"]}
    holding = {v.start for v in vmas if any(v.start <= sp < v.end for sp in sps.values())}
    assert holding and holding <= by_shape
    dec = decompose(fs, server.pid)
    rss = fs.status(server.pid).vm_rss_kb
    assert abs(dec.rss_kb - rss) <= rss / 100
    assert dec.marked and dec.bufpool.rss_kb > 0 and dec.threads > 0
