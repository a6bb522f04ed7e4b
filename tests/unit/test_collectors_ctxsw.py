"""Context-switch sources and the wait4 reconciliation rule."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from collectors.ctxsw import (
    ABS_TOLERANCE,
    CtxCounts,
    ProcfsCtxSwitches,
    open_source,
    psutil_style,
    reconcile,
    task_report_max,
)
from collectors.errors import CollectorError
from collectors.perf_event import PerfUnavailable
from collectors.procfs import ProcFS

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "procfs"


def _rusage(vol, invol):
    return {"ru_nvcsw": vol, "ru_nivcsw": invol, "ru_utime": 1.0, "ru_stime": 0.5}


def test_reconcile_passes_within_two_percent():
    r = reconcile(CtxCounts(98_500, 10_150, "perf"), _rusage(100_000, 10_000))
    assert r["check"] == "passed"
    assert r["counted_voluntary"] == 98_500 and r["wait4_voluntary"] == 100_000
    assert r["diff_pct_voluntary"] == pytest.approx(1.5)
    assert r["diff_pct"] == pytest.approx(1.5)


def test_reconcile_fails_when_one_class_is_off():
    r = reconcile(CtxCounts(100_000, 9_000, "perf"), _rusage(100_000, 10_000))
    assert r["check"] == "failed"
    assert r["diff_involuntary"] == -1000


def test_small_totals_use_the_absolute_tolerance():
    # 12 missing switches out of 61 is 20%, but within what the launch gate can account for.
    assert reconcile(CtxCounts(49, 3, "perf"), _rusage(61, 3))["check"] == "passed"
    off = ABS_TOLERANCE + 1
    assert reconcile(CtxCounts(100, 3, "perf"), _rusage(100 + off, 3))["check"] == "failed"


def test_weaker_source_is_never_checked():
    r = reconcile(CtxCounts(100_000, 10_000, "procfs-task-sum"), _rusage(100_000, 10_000))
    assert r["check"] == "not-checked"
    assert r["counted_voluntary"] is None
    assert "procfs-task-sum" in r["reason"]


def test_taskstats_is_reconciled_like_perf():
    assert reconcile(CtxCounts(15183, 1692, "taskstats"), _rusage(15191, 1693))["check"] == "passed"
    r = reconcile(CtxCounts(10_000, 1692, "taskstats"), _rusage(15191, 1693))
    assert r["check"] == "failed" and r["diff_voluntary"] == -5191


def test_no_rusage_is_not_checked():
    r = reconcile(CtxCounts(5, 5, "perf"), None)
    assert r["check"] == "not-checked" and "wait4" in r["reason"]


def test_reconcile_accepts_a_dict():
    d = {"voluntary": 10, "involuntary": 2, "source": "perf"}
    assert reconcile(d, _rusage(10, 2))["check"] == "passed"


def test_task_report_max_from_the_kernel_format():
    assert task_report_max((FIXTURE / "sched_switch_format").read_text()) == 0x100
    with pytest.raises(PerfUnavailable):
        task_report_max("print fmt: nothing here")


def test_procfs_source_sums_live_threads_only():
    c = ProcfsCtxSwitches(4242, ProcFS(FIXTURE)).read()
    assert (c.voluntary, c.involuntary, c.source) == (1802, 57, "procfs-task-sum")
    # psutil's figure: the main thread only.
    assert psutil_style(ProcFS(FIXTURE), 4242) == CtxCounts(1502, 17, "main-thread")


def test_both_kernel_sources_disabled_fall_back_with_reasons():
    src, why = open_source(
        os.getpid(), use_perf=False, before_exec=False, procfs=ProcFS(), use_taskstats=False
    )
    assert isinstance(src, ProcfsCtxSwitches)
    assert "taskstats not used" in why and "collect.perf" in why


def test_a_fixture_procfs_never_asks_the_kernel():
    """Its pids are not the kernel's: neither taskstats nor perf is opened on them."""
    src, why = open_source(4242, use_perf=True, before_exec=True, procfs=ProcFS(FIXTURE))
    assert isinstance(src, ProcfsCtxSwitches)
    assert "not the live /proc" in why


def test_psutil_style_requires_counters(tmp_path):
    (tmp_path / "5").mkdir()
    (tmp_path / "5" / "status").write_text("Name:\tx\nState:\tS (sleeping)\n")
    with pytest.raises(CollectorError):
        psutil_style(ProcFS(tmp_path), 5)
