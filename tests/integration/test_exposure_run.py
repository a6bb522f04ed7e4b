"""The allocator's exposure on a real MariaDB (issue 33): the counting shim preloaded ahead of the
allocator in every life, the binding proof still naming the allocator under test, and calls per
query that tell a read-only OLTP transaction's statements from a primary-key point select.

Oracle for "plausible": a server allocates while it parses and executes a statement, so every
query costs calls (non-zero); OLTP_RO's range, SUM, ORDER BY and DISTINCT queries build result
sets and sort buffers that a single-row point select does not, so its calls per transaction (16
queries) are many times a point select's (1 query).
"""

from __future__ import annotations

import pytest

from analysis.report import render
from rundir.read import load_run
from servers.allocators import resolve
from tests.integration.runs_helpers import manifest, results, run_in_process

pytestmark = pytest.mark.integration

ALLOCATORS = ("glibc", "jemalloc")
SUITE = """
[suite]
name = "exposure"
description = "calls into the allocator per query, glibc and jemalloc"
[server]
buffer_pool_mb = 32
[allocators]
use = ["glibc", "jemalloc"]
[dataset]
tables = 1
table_size = 2000
[warmup]
min_s = 1
cap_s = 2
threads = 2
[sysbench]
workloads = ["oltp_ro", "point_select"]
threads = [8]
duration_s = 3
"""


@pytest.fixture(scope="module")
def run(dataset_cache):
    missing = [a.name for a in resolve(list(ALLOCATORS)) if not a.usable]
    if missing:
        pytest.skip(f"allocators not installed here: {', '.join(missing)} (make setup)")
    with run_in_process(
        "ms-expo-", SUITE, "--quiet", "--no-report", check_leftovers=True, cache=dataset_cache
    ) as (code, run_dir):
        yield code, run_dir, manifest(run_dir), results(run_dir)


def test_the_binding_proof_names_the_allocator_through_the_counter(run):
    code, _, m, _ = run
    assert code == 0
    for cell in m["cells"]:
        assert cell["status"] == "ok", cell.get("error")
        ev = cell["verification"]
        assert ev["verdict"] == "verified"
        counter = cell["server"]["first_preload"]
        assert len(counter) == 1 and counter[0].endswith("ms-alloc-count.so")
        # the counter is first in LD_PRELOAD (named relative to the work dir, its cwd), then the
        # allocator
        preload = ev["process_env"]["LD_PRELOAD"].split()
        assert preload[0].endswith("/ms-alloc-count.so")
        lib = cell["allocator"]["library"]
        if lib:
            assert preload[1] == lib and ev["bound_to"]["malloc"] == [lib]
        else:
            assert ev["bound_to"]["malloc"][0].endswith("/libc.so.6")
        via = [e for e in ev["binding"]["entries"] if e.get("via")]
        assert via and all(e["via"] == counter[0] and e["library"] != counter[0] for e in via)
        # the allocator's own accounting still answers from the allocator, not the counter
        am = cell["alloc_memory"]
        assert am["library"] == (lib or am["library"]) and am["library"] != counter[0]
        assert am["library"].endswith(".so.6") or lib


def test_calls_per_query_are_counted_and_tell_the_workloads_apart(run):
    _, _, _, rows = run
    assert len(rows) == 2 * len(ALLOCATORS)
    by = {(r["allocator"], r["workload"]): r for r in rows}
    for alloc in ALLOCATORS:
        ro, ps = by[(alloc, "oltp_ro")], by[(alloc, "point_select")]
        for r in (ro, ps):
            assert r["status"] == "ok"
            for c in ("malloc_calls_per_query", "malloc_bytes_per_query",
                      "free_calls_per_query", "malloc_calls_per_txn"):  # fmt: skip
                assert float(r[c]) > 0, (alloc, r["workload"], c, r[c])
        # OLTP_RO: 16 queries per transaction; a point select: one
        assert float(ro["malloc_calls_per_txn"]) > 5 * float(ps["malloc_calls_per_txn"]), (ro, ps)
        assert float(ro["malloc_calls_per_query"]) > float(ps["malloc_calls_per_query"])
        # what is allocated is given back: frees per query within a factor of the allocations
        ratio = float(ro["free_calls_per_query"]) / float(ro["malloc_calls_per_query"])
        assert 0.5 < ratio < 2, ratio


def test_the_run_records_the_bound_and_the_report_says_it(run):
    _, run_dir, m, _ = run
    cost = m["call_cost"]
    names = {row["allocator"] for row in cost["table"]}
    assert {"glibc", "jemalloc"} <= names  # every installed core allocator, not only the run's
    for cls in ("small", "large"):
        assert cost["bound"][cls]["ns"] > 0
        assert all(v > 0 for row in cost["table"] for v in row["ns_per_call"][cls].values())
    html, md = render(load_run(run_dir))
    for page in (html, md):
        assert "point_select: calls into the allocator per query" in page
        assert "oltp_ro: calls into the allocator per query" in page
        assert "the difference in per-call cost a 5% change would need" in page
