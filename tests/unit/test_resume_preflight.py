"""--resume checks, preflight before anything is written, the run registry and leftover servers,
and what doctor reports. Real processes stand in for servers (their command line names a work
directory, as mariadbd's --defaults-file does); nothing here starts a database."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from collectors.host import host_metadata
from collectors.procfs import ProcFS
from rundir.format import FORMAT_VERSION, OWNER_MARKER
from rundir.write import RunDir
from servers.allocators import resolve
from servers.checks import open_files_needed
from suites.cli.commands import doctor
from suites.datasets import prepare as dataset_prepare
from suites.errors import SuiteError
from suites.families.mongodb.plugin import MONGODB
from suites.families.mysql.my_cnf import MySQLSettings
from suites.families.mysql.plugin import MYSQL
from suites.runner import leftovers, preflight
from suites.runner.display import Display
from suites.runner.matrix import Matrix
from suites.runner.plan import plan_cells
from suites.runner.resume import (
    check_allocators,
    check_resumable,
    clear_stale_work,
    plan_from_manifest,
)
from suites.runner.servers import run_servers
from suites.suite.model import Suite, load_suite

REPO = Path(__file__).resolve().parents[2]
SMOKE = REPO / "configs/suites/smoke.toml"


@pytest.fixture(autouse=True)
def state(tmp_path, monkeypatch):
    """The run registry and THP's pending file go to a private state directory."""
    monkeypatch.setenv("MALLOCSWEEP_STATE", str(tmp_path / "state"))
    return tmp_path / "state"


def _manifest_cells(cells) -> list[dict]:
    return [
        {
            "id": c.id,
            "index": c.index,
            "round": c.round,
            "allocator": {"name": c.allocator},
            "thp": {"requested": c.thp},
            "server": {"label": c.server_label},
            "status": "pending",
        }
        for c in cells
    ]


def _manifest(suite: dict, host: dict) -> dict:
    cells = plan_cells("mariadb-10.11.19", ["glibc", "jemalloc"], ["system"], 2)
    return {
        "format_version": FORMAT_VERSION,
        "suite": suite,
        "host": host,
        "status": "interrupted",
        "cells": _manifest_cells(cells),
    }


# -- check_resumable -----------------------------------------------------------------------------


def test_resume_compares_the_host_keys_the_manifest_really_has():
    host = host_metadata()
    assert {"cpu_count", "glibc_version"} <= set(host)  # what collectors.host writes
    suite = load_suite(SMOKE).suite.as_dict()
    m = _manifest(suite, host)
    check_resumable(m, suite, "mariadb-10.11.19", host)  # same host: fine
    with pytest.raises(SuiteError, match="the server is now mariadb-11.4.2"):
        check_resumable(m, suite, "mariadb-11.4.2", host)
    for c in m["cells"]:
        c["server"] = {"flavor": "mariadb"}  # every cell ran: records without a label
    check_resumable(m, suite, "mariadb-10.11.19", host)


@pytest.mark.parametrize(
    "key, value", [("glibc_version", "2.31"), ("cpu_count", 1024), ("kernel", "4.19.0-old")]
)
def test_resume_refuses_a_changed_host(key, value):
    host = host_metadata()
    suite = load_suite(SMOKE).suite.as_dict()
    m = _manifest(suite, dict(host, **{key: value}))
    with pytest.raises(SuiteError, match=rf"--resume: host {key} changed \({value!r} -> "):
        check_resumable(m, suite, "mariadb-10.11.19", host)


def test_a_runner_pid_taken_by_another_process_does_not_block_resume():
    """A runner killed with SIGKILL leaves "running" and its pid in the manifest. Pids are reused
    (32,768 here; under test load they wrapped within minutes), so by the time --resume looks the
    pid may be another process's: the runner's start time, recorded beside its pid, tells them
    apart. A run that recorded no start time is judged by the pid and the process's command line:
    only a live `mallocsweep run` counts as its runner (issue 35: a live `sleep` that took the pid
    once kept a killed run "running")."""
    host = host_metadata()
    suite = load_suite(SMOKE).suite.as_dict()
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        ticks = ProcFS().stat(other.pid).starttime_ticks
        m = _manifest(suite, host) | {"status": "running", "runner_pid": other.pid}
        with pytest.raises(SuiteError, match=rf"still in progress \(runner pid {other.pid}\)"):
            check_resumable(m | {"runner_start_ticks": ticks}, suite, "mariadb-10.11.19", host)
        # An older run (no start time): this live process is not a mallocsweep runner
        check_resumable(m, suite, "mariadb-10.11.19", host)
        runner = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(60)", "mallocsweep", "run"]
        )
        try:
            with pytest.raises(SuiteError, match="still in progress"):
                check_resumable(m | {"runner_pid": runner.pid}, suite, "mariadb-10.11.19", host)
        finally:
            runner.kill()
            runner.wait()
        # The runner started at another time: this live pid is someone else's.
        check_resumable(m | {"runner_start_ticks": ticks - 1}, suite, "mariadb-10.11.19", host)
    finally:
        other.kill()
        other.wait()
    # Gone altogether: resumable, with or without the start time.
    check_resumable(m | {"runner_start_ticks": ticks}, suite, "mariadb-10.11.19", host)
    check_resumable(m, suite, "mariadb-10.11.19", host)
    me = leftovers.runner_identity()
    assert me == {"runner_pid": os.getpid(), "runner_start_ticks": me["runner_start_ticks"]}
    assert leftovers.runner_running(me) is None  # this process resuming its own run


def test_plan_comes_from_the_manifest():
    cells = plan_cells("mariadb-10.11.19", ["glibc", "jemalloc"], ["system", "never"], 2)
    m = {"cells": _manifest_cells(cells)}
    m["cells"][0]["server"] = {"flavor": "mariadb", "pid": 1}  # a cell that ran: no label
    assert plan_from_manifest(m, "mariadb-10.11.19") == cells
    with pytest.raises(SuiteError, match="does not match its fields"):
        plan_from_manifest(m, "mariadb-11.4.2")  # the cell that ran was on another server
    m["cells"][3]["allocator"]["name"] = "mimalloc"  # the id says jemalloc or glibc
    with pytest.raises(SuiteError, match="does not match its fields"):
        plan_from_manifest(m, "mariadb-10.11.19")


def test_resume_refuses_a_changed_allocator_build():
    (glibc,) = resolve(["glibc"])
    m = {"allocators": [glibc.to_manifest()], "cells": []}
    check_allocators(m, [glibc])  # the same build
    m["allocators"][0]["sha256"] = "0" * 64
    with pytest.raises(SuiteError, match=r"allocator 'glibc' sha256 changed \('0000"):
        check_allocators(m, [glibc])
    m["allocators"][0] = dict(glibc.to_manifest(), version="2.0-old")
    with pytest.raises(SuiteError, match="allocator 'glibc' version changed"):
        check_allocators(m, [glibc])


def test_resume_refuses_an_allocator_no_longer_usable():
    from dataclasses import replace

    (glibc,) = resolve(["glibc"])
    gone = replace(glibc, usable=False, why_not="needs glibc >= 99.0")
    with pytest.raises(SuiteError, match="'glibc' is no longer usable: needs glibc >= 99.0"):
        check_allocators({"cells": []}, [gone])


# -- stale work directories of a killed runner ---------------------------------------------------


def _holder(directory: Path) -> subprocess.Popen:
    """A live process whose command line names `directory` (as mariadbd's --defaults-file does),
    returned once it does: until its exec, /proc shows the forking parent's command line."""
    p = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", f"--defaults-file={directory}/my.cnf"]
    )
    cmdline = Path(f"/proc/{p.pid}/cmdline")
    deadline = time.monotonic() + 30
    while str(directory) not in cmdline.read_bytes().decode(errors="replace"):
        assert time.monotonic() < deadline, "the holder process never started"
        time.sleep(0.01)
    return p


def _run_with_stale_cell(tmp_path: Path):
    rd = RunDir.create(tmp_path / "out", "r1")
    (cell,) = plan_cells("mariadb-10.11.19", ["glibc"], ["system"], 1)
    work = rd.work_dir(cell.id)
    (work / "datadir").mkdir(parents=True)
    (work / "datadir" / "ibdata1").write_bytes(b"x" * 100)
    return rd, cell, work


def test_stale_work_is_refused_while_its_server_runs_then_removed(tmp_path):
    rd, cell, work = _run_with_stale_cell(tmp_path)
    p = _holder(work)
    try:
        (work / "mysqld.pid").write_text(f"{p.pid}\n")
        with pytest.raises(
            SuiteError, match=rf"pid {p.pid} of this run is still running in {work}"
        ):
            clear_stale_work(rd, [cell])
        assert (work / "datadir" / "ibdata1").exists()  # nothing removed
    finally:
        p.kill()
        p.wait()
    assert clear_stale_work(rd, [cell]) == [cell.id]
    assert not work.exists()


def test_a_reused_pid_does_not_block_resume(tmp_path):
    rd, cell, work = _run_with_stale_cell(tmp_path)
    (work / "mysqld.pid").write_text(f"{os.getpid()}\n")  # alive, but not a server of this run
    assert leftovers.live_servers(rd.path) == []
    assert clear_stale_work(rd, [cell]) == [cell.id]


def test_stale_work_without_our_marker_is_kept(tmp_path):
    rd, cell, work = _run_with_stale_cell(tmp_path)
    (rd.path / "work" / OWNER_MARKER).unlink()
    assert clear_stale_work(rd, [cell]) == []
    assert work.exists()


def test_sibling_cell_names_are_not_matched(tmp_path):
    rd, cell, work = _run_with_stale_cell(tmp_path)
    sibling = Path(f"{work}0")  # "...__r1" vs "...__r10"
    p = _holder(sibling)
    try:
        (work / "mysqld.pid").write_text(f"{p.pid}\n")
        assert leftovers.live_servers(rd.path) == []
    finally:
        p.kill()
        p.wait()


# -- the registry and doctor's leftover servers --------------------------------------------------


def test_doctor_finds_a_server_of_a_run_written_anywhere(tmp_path):
    rd, cell, work = _run_with_stale_cell(tmp_path)
    leftovers.register(rd.path)
    assert leftovers.registered_runs() == [rd.path]
    p = _holder(work)
    try:
        (work / "mysqld.pid").write_text(f"{p.pid}\n")
        found = doctor._leftover_servers([tmp_path / "no-runs-here"])
        assert len(found) == 1 and f"pid {p.pid} from {work}" in found[0].detail
        assert found[0].fix.startswith(f"stop it: kill {p.pid}")
    finally:
        p.kill()
        p.wait()
    assert doctor._leftover_servers([]) == []


def test_doctor_tells_a_running_run_from_a_killed_one(tmp_path):
    rd, cell, work = _run_with_stale_cell(tmp_path)
    rd.write_manifest({"runner_pid": os.getpid(), "status": "running", "cells": []})
    p = _holder(work)  # our child, as a server is the runner's
    try:
        (work / "mysqld.pid").write_text(f"{p.pid}\n")
        (found,) = doctor._leftover_servers([rd.path.parent])
        assert found.name == "server of a run in progress" and found.ok
        rd.write_manifest({"runner_pid": 1, "status": "running", "cells": []})
        (found,) = doctor._leftover_servers([rd.path.parent])
        assert found.name == "leftover server" and not found.ok
    finally:
        p.kill()
        p.wait()


def test_doctor_also_looks_for_mongod_pid_files(tmp_path):
    rd, cell, work = _run_with_stale_cell(tmp_path)
    p = _holder(work)
    try:
        (work / "mongod.pid").write_text(f"{p.pid}\n")
        assert [s.pid for s in leftovers.live_servers(rd.path)] == [p.pid]
    finally:
        p.kill()
        p.wait()


# -- preflight before the run directory; a failed run says so ------------------------------------


def _matrix(tmp_path: Path, resume: Path | None = None) -> Matrix:
    loaded = load_suite(SMOKE)
    suite = loaded.suite.model_copy(
        update={"run": loaded.suite.run.model_copy(update={"out": str(tmp_path / "runs")})}
    )
    return Matrix(
        loaded, suite, resume=resume, display=Display(enabled=False), cache_root=tmp_path / "cache"
    )


def test_preflight_refusal_leaves_no_run_directory(tmp_path, monkeypatch):
    monkeypatch.setattr(preflight, "mem_available_kb", lambda: 1024)
    with pytest.raises(SuiteError, match=r"preflight: available memory for the server: need"):
        _matrix(tmp_path).run()
    runs = tmp_path / "runs"
    assert not runs.exists() or not any(runs.iterdir())


def test_an_error_after_creation_marks_the_run_failed(tmp_path, monkeypatch):
    def boom(*a, **k):
        raise SuiteError("dataset: the disk went away")

    monkeypatch.setattr(dataset_prepare, "ensure", boom)
    m = _matrix(tmp_path)
    with pytest.raises(SuiteError):
        m.run()
    (run_dir,) = (tmp_path / "runs").iterdir()
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "failed"
    assert manifest["error"] == "SuiteError: dataset: the disk went away"
    assert [a["name"] for a in manifest["allocators"]] == ["glibc", "jemalloc"]
    assert leftovers.registered_runs() == [run_dir]


def test_resume_refuses_a_changed_allocator_and_an_unknown_one(tmp_path, monkeypatch):
    monkeypatch.setattr(
        dataset_prepare, "ensure", lambda *a, **k: (_ for _ in ()).throw(SuiteError("x"))
    )
    with pytest.raises(SuiteError):
        _matrix(tmp_path).run()
    (run_dir,) = (tmp_path / "runs").iterdir()
    path = run_dir / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["allocators"][1]["sha256"] = "f" * 64
    path.write_text(json.dumps(manifest))
    with pytest.raises(SuiteError, match=r"--resume: allocator 'jemalloc' sha256 changed"):
        _matrix(tmp_path, resume=run_dir).run()
    for c in manifest["cells"]:  # a run made with an allocator this machine no longer knows
        c["id"] = c["id"].replace("jemalloc", "gonemalloc")
        c["allocator"]["name"] = c["allocator"]["name"].replace("jemalloc", "gonemalloc")
    path.write_text(json.dumps(manifest))
    with pytest.raises(SuiteError, match=r"--resume: unknown allocator 'gonemalloc'"):
        _matrix(tmp_path, resume=run_dir).run()
    assert json.loads(path.read_text())["status"] == "failed"  # a refusal changes nothing


def test_disk_estimate_counts_one_cell_copy_and_the_cache(tmp_path):
    suite = Suite.model_validate({"dataset": {"tables": 4, "table_size": 1_000_000}})
    needs = MYSQL.needs(suite.server, suite.max_threads)
    kb = preflight.estimate_dataset_kb(suite, needs)
    # the redo log (256 MiB, preallocated), the system files, ~230 bytes a row
    assert kb == 256 * 1024 + 32 * 1024 + 4 * 1_000_000 * 230 // 1024
    (only,) = preflight.disk_needs(tmp_path / "out", tmp_path / "cache", kb, cached=True)
    assert only.need == pytest.approx(kb * 1.25) and "one cell's datadir copy" in only.what
    (same_fs,) = preflight.disk_needs(tmp_path / "out", tmp_path / "cache", kb, cached=False)
    assert same_fs.need == pytest.approx(kb + kb * 1.25)  # pristine + one copy > 2 x during prepare
    assert "preparing the dataset" in same_fs.what


def test_open_file_needs_agree_with_the_server_config():
    settings = MySQLSettings(max_threads=1536)
    need = open_files_needed(1536, MYSQL.needs(MYSQL.section(), 1536).open_files)
    assert need["server"] == settings.open_files_limit
    assert need["limit"] == max(settings.open_files_limit, 1536 + 256)


# -- doctor ----------------------------------------------------------------------------------------


def test_doctor_runs_the_system_checks():
    names = {c.name: c for c in doctor.checks(Path("/nonexistent-runs"))}
    for name in (
        "taskstats (context switches)",
        "perf counters (fallback)",
        "tracefs (perf fallback)",
        "sysbench",
        "open files (RLIMIT_NOFILE)",
        "processes/threads (RLIMIT_NPROC)",
        "kernel threads-max",
    ):
        assert name in names, sorted(names)
    assert (
        str(MySQLSettings(max_threads=1536).open_files_limit)
        in names["open files (RLIMIT_NOFILE)"].detail
    )


def _fake_mongod(tmp_path: Path, monkeypatch, version: str, build: dict) -> None:
    d = tmp_path / "bin"
    d.mkdir()
    exe = d / "mongod"
    exe.write_text(
        f"#!/bin/sh\necho 'db version v{version}'\necho 'Build Info: {json.dumps(build)}'\n"
    )
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{d}:{os.environ['PATH']}")


@pytest.mark.parametrize(
    "version, allocator, says_builtin",
    [("7.0.5", "tcmalloc", True), ("7.0.5", "system", False), ("8.0.1", "tcmalloc-google", True)],
)
def test_doctor_mongod_builtin_only_when_it_links_one(
    tmp_path, monkeypatch, version, allocator, says_builtin
):
    _fake_mongod(tmp_path, monkeypatch, version, {"allocator": allocator})
    (c,) = MONGODB.doctor_checks()
    assert c.ok and f"allocator {allocator}" in c.detail
    assert ("only 'builtin'" in c.detail) == says_builtin


def test_doctor_labels_the_standin(tmp_path, monkeypatch):
    _fake_mongod(tmp_path, monkeypatch, "standin-1.45.0", {"allocator": "jvm"})
    (c,) = MONGODB.doctor_checks()
    assert "stand-in" in c.detail and "builtin" not in c.detail


def test_piped_tables_keep_full_library_paths():
    from servers.allocators import detect_all

    tbb = next(a for a in detect_all() if a.name == "tbbmalloc")
    if not tbb.usable:
        pytest.skip(f"tbbmalloc: {tbb.why_not}")
    for cmd in (["allocators"], ["doctor", "--runs", "/nonexistent"]):
        out = subprocess.run(
            [sys.executable, "-m", "suites.cli.main", *cmd],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
        ).stdout
        assert tbb.library in out, (cmd, out)


def test_resumed_suite_names_the_recorded_setting_that_is_invalid(tmp_path):
    from suites.cli.commands.run import resumed_suite

    loaded = load_suite(SMOKE)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    suite = loaded.suite.as_dict()
    manifest = {"suite_sha256": loaded.sha256, "suite_file": str(SMOKE), "suite": suite}
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    assert resumed_suite(loaded, run_dir) == loaded.suite
    suite["sysbench"]["threads"] = [0]  # a recorded value this version refuses
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(SuiteError) as e:
        resumed_suite(loaded, run_dir)
    assert str(e.value) == (
        f"--resume {run_dir}: recorded suite: sysbench.threads: thread level 0 is out of range; "
        "expected 1..100000"
    )
    del manifest["suite"]
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(SuiteError, match="manifest.json records no suite settings"):
        resumed_suite(loaded, run_dir)
    (run_dir / "manifest.json").write_text("[]")
    with pytest.raises(SuiteError, match="not a mallocsweep run directory"):
        resumed_suite(loaded, run_dir)


def test_preflight_and_ensure_agree_on_whether_the_dataset_is_cached(tmp_path, monkeypatch):
    from types import SimpleNamespace as NS

    from suites.datasets.cache import DatasetCache

    exe = tmp_path / "mariadbd"
    exe.write_bytes(b"\x7fELF a build")
    binary = NS(path=str(exe), flavor="mariadb", version="10.11.6-MariaDB")
    m = _matrix(tmp_path)
    m.servers = run_servers(m.suite)
    m.servers[0].binary = binary
    seen = []
    monkeypatch.setattr(preflight, "preflight", lambda *a, **k: seen.append(k["cached"]) or [])
    m._preflight(tmp_path / "runs")
    # store exactly what dataset_prepare.ensure looks for (its key includes the build and every setting)
    datadir = tmp_path / "prep" / "datadir"
    (datadir / "mysql").mkdir(parents=True)
    cache = DatasetCache(tmp_path / "cache")
    key, spec = dataset_prepare.cache_key(m.suite, binary, cache)
    cache.store(key, datadir, {"spec": spec})
    m._preflight(tmp_path / "runs")
    assert seen == [False, True]
    prepared = dataset_prepare.ensure(m.suite, binary, tmp_path / "cache", run_dir=None)
    assert (prepared.prepared_now, prepared.key) == (False, key)
    exe.write_bytes(b"\x7fELF another build")  # a reinstall: neither reuses the pristine copy
    m._preflight(tmp_path / "runs")
    assert seen == [False, True, False]
