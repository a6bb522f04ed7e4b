"""Faults a long matrix must survive (issue 8), with real processes: Ctrl-C and --resume, SIGKILL of
the runner, a server killed mid-level. Each checks that nothing is left running."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from suites.runner.display import Display
from suites.runner.matrix import run_suite
from suites.runner.workload_cell import WorkloadCell
from suites.suite.model import load_suite
from suites.suite.overrides import apply_overrides
from tests.integration.runs_helpers import (
    REPO,
    assert_ctxsw_accounted,
    children_of,
    kill_quietly,
    manifest,
    processes_mentioning,
    results,
    run_dir_of,
    server_pid,
    start_run,
    wait_for,
)

pytestmark = pytest.mark.integration

SMOKE = str(REPO / "configs/suites/smoke.toml")


def descendants(pid: int) -> set[int]:
    found, todo = set(), [pid]
    while todo:
        for c in children_of(todo.pop()):
            if c not in found:
                found.add(c)
                todo.append(c)
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def in_a_level(run_dir: Path, cell_index: int = 0):
    """True once the cell's first workload level has started (its raw log exists)."""
    cells = manifest(run_dir)["cells"]
    logs = run_dir / "logs" / cells[cell_index]["id"]
    return any(logs.glob("*@*.log")) and server_pid(run_dir)


def test_sigint_mid_matrix_then_resume_finishes_every_cell_once(out, dataset_cache):
    # One thread level: two cells of two workload levels each are the matrix the interrupt lands
    # in the middle of (a second thread level only made each of the three lives longer).
    args = [SMOKE, "--out", str(out), "--threads", "4", "--duration", "3"]
    proc = start_run(args, dataset_cache)
    try:
        run_dir = run_dir_of(out)
        wait_for(lambda: in_a_level(run_dir, 0), 180, "the first level to start")
        procs = descendants(proc.pid)
        assert procs, "the runner should have a server and a load generator as children"
        proc.send_signal(signal.SIGINT)
        proc.wait(120)
        assert proc.returncode == 130, proc.stderr.read()
        assert wait_for(lambda: not [p for p in procs if alive(p)], 30, "children to be gone")
        m = manifest(run_dir)
        assert m["status"] == "interrupted" and m["interrupted_by"] == "SIGINT"
        assert m["cells"][0]["status"] == "interrupted"
        assert m["cells"][1]["status"] == "pending"
    finally:
        kill_quietly(proc)

    resumed = start_run([SMOKE, "--resume", str(run_dir)], dataset_cache)
    try:
        resumed.wait(300)
        assert resumed.returncode == 0, resumed.stderr.read()
    finally:
        kill_quietly(resumed)
    m = manifest(run_dir)
    assert m["status"] == "finished" and [c["status"] for c in m["cells"]] == ["ok", "ok"]
    rows = results(run_dir)
    keys = [(r["cell"], r["workload"], r["threads"]) for r in rows]
    assert len(keys) == len(set(keys)) == 2 * 2 * 1  # every cell exactly once
    assert (
        run_dir / "cells" / f"{m['cells'][0]['id']}.json.attempt1"
    ).exists()  # the interrupted try is kept


def test_resume_refuses_changed_settings(out, dataset_cache):
    proc = start_run([SMOKE, "--out", str(out), "--threads", "4", "--duration", "3"], dataset_cache)
    try:
        run_dir = run_dir_of(out)
        wait_for(lambda: in_a_level(run_dir, 0), 180, "the first level")
        proc.send_signal(signal.SIGTERM)
        proc.wait(120)
        assert proc.returncode == 143
    finally:
        kill_quietly(proc)
    again = start_run(
        [SMOKE, "--threads", "8", "--duration", "3", "--resume", str(run_dir)], dataset_cache
    )
    again.wait(60)
    err = again.stderr.read()
    assert again.returncode == 2
    assert "suite settings differ" in err and "Traceback" not in err


def test_sigkill_of_the_runner_leaves_no_server_and_resume_finishes(out, dataset_cache):
    proc = start_run([SMOKE, "--out", str(out), "--threads", "4", "--duration", "5"], dataset_cache)
    try:
        run_dir = run_dir_of(out)
        pid = wait_for(lambda: in_a_level(run_dir, 0), 180, "the first level")
        procs = descendants(proc.pid)
        assert pid in procs
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        # The server gets SIGKILL from the kernel (parent-death signal): its datadir is scratch.
        wait_for(
            lambda: not [p for p in procs if alive(p)],
            60,
            "server and clients to die with the runner",
        )
    finally:
        kill_quietly(proc)
    wait_for(lambda: not processes_mentioning(str(run_dir)), 60, "no process of the run")
    first = manifest(run_dir)["cells"][0]["id"]
    assert (run_dir / "work" / first).is_dir()  # what the killed runner could not clean up

    resumed = start_run([SMOKE, "--resume", str(run_dir)], dataset_cache)
    try:
        resumed.wait(300)
        assert resumed.returncode == 0, resumed.stderr.read()
    finally:
        kill_quietly(resumed)
    m = manifest(run_dir)
    assert m["status"] == "finished" and [c["status"] for c in m["cells"]] == ["ok", "ok"]
    assert m["stale_work_removed"] == [first]
    rows = results(run_dir)
    keys = [(r["cell"], r["workload"], r["threads"]) for r in rows]
    assert len(keys) == len(set(keys)) == 2 * 2 * 1  # every cell exactly once
    assert {r["cell"] for r in rows} == {c["id"] for c in m["cells"]}
    assert not list((run_dir / "work").glob("*/"))  # and nothing left in the work area


def test_server_killed_mid_level_fails_only_its_cell(out, dataset_cache):
    proc = start_run([SMOKE, "--out", str(out), "--threads", "4", "--duration", "4"], dataset_cache)
    try:
        run_dir = run_dir_of(out)
        pid = wait_for(lambda: in_a_level(run_dir, 0), 180, "the first level")
        # The cell's load generator: the runner's other children (found by parent pid).
        clients = wait_for(
            lambda: descendants(proc.pid) - {pid} - descendants(pid), 30, "the cell's clients"
        )
        os.kill(pid, signal.SIGKILL)
        first_id = manifest(run_dir)["cells"][0]["id"]
        wait_for(lambda: (run_dir / "cells" / f"{first_id}.json").exists(), 120, "cell 1 record")
        # When the failed cell is recorded, its clients are gone too (the next cell is starting).
        assert not [c for c in clients if alive(c)], "clients of the failed cell outlived it"
        proc.wait(300)
        assert proc.returncode == 3, proc.stderr.read()  # finished, with a failed cell
    finally:
        kill_quietly(proc)
    m = manifest(run_dir)
    first, second = m["cells"]
    assert first["status"] == "failed"
    assert first["exit"]["signal"] == 9
    assert "signal 9" in first["error"] and "SIGKILL" in first["error"]
    # Killed, yet its whole life is accounted for: the reading taken before the reap (a zombie)
    # reconciles with wait4, and the phases add up to it.
    rec = first["collectors"]["reconciliation"]
    assert rec["source"] == "taskstats", rec
    assert_ctxsw_accounted(rec)
    assert rec["phases_sum_to_final"] is True, rec
    assert second["status"] == "ok"
    ok_rows = [r for r in results(run_dir) if r["cell"] == second["id"]]
    assert len(ok_rows) == 2 and all(r["status"] == "ok" for r in ok_rows)  # both workloads


def test_an_unexpected_error_fails_only_its_cell(out, dataset_cache, monkeypatch):
    """A bug in a cell (here: warmup raising RuntimeError) fails that cell; the next one runs."""
    real_warmup = WorkloadCell.warmup
    calls = []

    def warmup(self):
        calls.append(self.plan.id)
        if len(calls) == 1:
            raise RuntimeError("injected fault in warmup")
        return real_warmup(self)

    monkeypatch.setattr(WorkloadCell, "warmup", warmup)
    monkeypatch.setenv("MALLOCSWEEP_STATE", str(out / "state"))
    loaded = load_suite(SMOKE)
    suite = apply_overrides(
        loaded.suite, allocators=["glibc", "jemalloc"], threads=[4], duration=3, out=str(out)
    )
    # The datasets' root of a run whose MALLOCSWEEP_CACHE is dataset_cache, as the others here.
    datasets = dataset_cache / "datasets"
    code, run_dir = run_suite(loaded, suite, None, Display(enabled=False), cache_root=datasets)
    assert code == 3
    m = manifest(run_dir)
    first, second = m["cells"]
    assert first["status"] == "failed"
    assert first["error"] == "RuntimeError: injected fault in warmup"
    assert first["exit"] is not None  # its server was stopped and reaped
    assert second["status"] == "ok" and second["allocator"]["name"] == "jemalloc"
    assert m["status"] == "finished"
    assert {r["cell"] for r in results(run_dir)} == {second["id"]}
    assert not processes_mentioning(str(run_dir))
