"""The allocator readings of a cell (suites/runner/alloc_memory.py) and the churn plan (suites/workloads/sysbench/churn.py):
pure logic on recorded figures; the real shim is exercised in tests/integration."""

from __future__ import annotations

import os

import pytest

from servers.errors import ServerError
from suites.runner.alloc_memory import AllocMemory, consistency, overhead
from suites.suite.model import parse_suite
from suites.workloads.sysbench.churn import churn_plan, row_columns


class _Stats:
    """Answers like the shim (bytes), from a list; an Exception item is raised."""

    def __init__(self, answers):
        self.answers = list(answers)

    def read(self):
        a = self.answers.pop(0)
        if isinstance(a, Exception):
            raise a
        return a


def _answer(in_use_mb, cached_mb):
    mb = 1024 * 1024
    return {
        "api": "jemalloc mallctl",
        "library": "/x/libjemalloc.so.2",
        "in_use": in_use_mb * mb,
        "cached": cached_mb * mb,
        "mapped": (in_use_mb + cached_mb + 10) * mb,
        "committed": (in_use_mb + cached_mb) * mb,
        "read_us": 90,
        "wall_ms": 1.5,
    }


def test_reading_pairs_allocator_figures_with_this_process_rss():
    clock = iter([1.0, 2.0, 3.0])
    mem = AllocMemory(_Stats([_answer(2, 1)]), os.getpid(), lambda: next(clock))
    r = mem.read("oltp_ro@8", "level end")
    own_rss = int(next(ln for ln in open("/proc/self/status") if ln.startswith("VmRSS")).split()[1])
    assert r["alloc_in_use_kb"] == 2048 and r["alloc_cached_kb"] == 1024
    assert r["alloc_committed_kb"] == 3072 and r["alloc_mapped_kb"] == 13 * 1024
    assert abs(r["rss_kb"] - own_rss) < own_rss * 0.1  # the same process, read moments apart
    assert r["overhead"] == round(r["rss_kb"] / 2048, 3)
    assert r["threads"] >= 1 and r["t_s"] == 1.0
    assert mem.level_columns("oltp_ro@8")["alloc_in_use_kb"] == 2048
    assert mem.level_columns("other@8") == dict.fromkeys(mem.level_columns("other@8"))


def test_a_failed_reading_is_recorded_not_raised():
    mem = AllocMemory(_Stats([ServerError("no answer")]), os.getpid(), lambda: 0.0)
    assert mem.read("warmup", "warmup end") is None
    assert mem.readings == [] and mem.warnings() == [
        "allocator statistics: warmup (warmup end): no answer"
    ]


def test_in_use_above_rss_is_inconsistent_committed_above_rss_is_not():
    ok = {"rss_kb": 100_000, "swap_kb": 0, "alloc_in_use_kb": 90_000}
    assert consistency(ok) == []
    assert consistency(ok | {"alloc_in_use_kb": 150_000})  # more in use than is resident
    assert consistency(ok | {"swap_kb": 60_000, "alloc_in_use_kb": 150_000}) == []  # swapped
    assert consistency({"rss_kb": 100_000, "alloc_in_use_kb": None}) == []  # TBB: nothing to check
    assert overhead(300, 100) == 3.0 and overhead(300, None) is None and overhead(None, 5) is None


def test_idle_readings_and_what_was_returned():
    t = [0.0]

    def clock():
        t[0] += 1.0
        return t[0]

    answers = [_answer(50, 40), _answer(50, 30), _answer(50, 20), _answer(50, 10)]
    mem = AllocMemory(_Stats(answers), os.getpid(), clock)
    mem.read("oltp_ro@256", "level end")
    mem.idle(0.6, 0.5)  # readings at 0 and 0.5 s, and one at the end
    idle = [r for r in mem.readings if r["phase"] == "idle"]
    assert len(idle) == 3
    ret = mem.returned()
    assert ret["cached_returned_kb"] == 40 * 1024 - 10 * 1024
    assert ret["in_use_returned_kb"] == 0
    assert mem.to_manifest()["returned_after_load"] == ret


def test_churn_plan_cycles_then_comes_back_down():
    plan = churn_plan(["point_select"], [8, 1536], 2, [8, 1536])
    got = [(lv.threads, lv.cycle, lv.thread_cache) for lv in plan]
    assert got == [
        (8, 1, 8), (1536, 1, 8), (8, 2, 8), (1536, 2, 8), (8, 3, 8),
        (8, 1, 1536), (1536, 1, 1536), (8, 2, 1536), (1536, 2, 1536), (8, 3, 1536),
    ]  # fmt: skip
    assert [lv.first_of_block for lv in plan].count(True) == 2
    assert len({lv.phase for lv in plan}) == len(plan)  # phase names are unique in a cell
    assert plan[0].phase == "point_select@8#c1/tc8"
    assert row_columns(plan[0], 1600) == {"churn_cycle": 1, "thread_cache_size": 8}
    own = churn_plan(["oltp_ro"], [4, 48], 1, [])
    assert [lv.phase for lv in own] == ["oltp_ro@4#c1", "oltp_ro@48#c1", "oltp_ro@4#c2"]
    assert row_columns(own[0], 1600)["thread_cache_size"] == 1600  # the server's own


@pytest.mark.parametrize(
    "text, field",
    [
        ('[suite]\nkind = "iibench"\n[memory]\nchurn_cycles = 2\n', "memory.churn_cycles"),
        ("[memory]\nchurn_thread_cache = [8]\n", "memory.churn_thread_cache"),
        ("[memory]\nidle_sample_s = 0.1\n", "memory.idle_sample_s"),
        ("[memory]\nidle_s = -1\n", "memory.idle_s"),
    ],
)
def test_memory_settings_reject_bad_values_naming_the_field(text, field):
    from suites.errors import SuiteError

    with pytest.raises(SuiteError) as e:
        parse_suite(text, "s.toml")
    assert field in str(e.value)
