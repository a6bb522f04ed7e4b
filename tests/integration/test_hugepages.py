"""Hugepage settings on real servers (issue 28): THP always/never on MySQL 9.7, which keeps THP for
itself, read back from the process; the buffer pool of a MariaDB on explicit huge pages, proven
from its /proc/PID/smaps, with vm.nr_hugepages given back after the cell, after a SIGINT, and
after a SIGKILL of the runner (by `mallocsweep doctor --repair`, or by the next run)."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from collectors.procfs import ProcFS
from suites.cli.main import main
from suites.runner import thp as thpmod
from tests.integration.runs_helpers import (
    kill_quietly,
    manifest,
    results,
    run_dir_of,
    scratch_dir,
    small_suite,
    start_run,
    wait_for,
)

pytestmark = [
    pytest.mark.system_settings,  # THP always/never and vm.nr_hugepages, machine-wide
    pytest.mark.integration,
    pytest.mark.skipif(
        not (thpmod.writable() and ProcFS().sys_vm_writable(thpmod.NR_HUGEPAGES)),
        reason="THP sysfs and vm.nr_hugepages are not writable: these tests need root",
    ),
]


def system() -> dict:
    """Every setting a hugepage cell may change, as the machine has it now."""
    return thpmod.state()


@pytest.fixture
def work(monkeypatch, dataset_cache):
    """A scratch directory with a state directory of its own (the restore records), the
    session's dataset cache; the machine's settings must be as they were afterwards."""
    with scratch_dir("ms-huge-") as d:
        monkeypatch.setenv("MALLOCSWEEP_STATE", str(d / "state"))
        before = system()
        yield d
        after = system()
    assert after == before, f"hugepage settings left changed: {before} -> {after}"


def large_pages_suite(d: Path, duration: int = 3) -> Path:
    """A MariaDB cell with its buffer pool on explicit huge pages, THP left as it is."""
    p = d / "large.toml"
    p.write_text(
        small_suite(
            "large-pages",
            server={"buffer_pool_mb": 64},
            thp={"modes": ["system"], "large_pages": [True]},
            sysbench={"duration_s": duration},
        )
    )
    return p


def assert_proven_on_hugetlb(run_dir: Path, before: dict) -> None:
    """The large-pages cell's buffer pool was on hugetlb pages (smaps at server start and at each
    level's end), and vm.nr_hugepages came back to what it was before the run."""
    m = manifest(run_dir)
    (cell,) = m["cells"]
    assert cell["status"] == "ok", cell.get("error")
    lp = cell["thp"]["large_pages"]
    assert lp["proven"] and lp["reserved"] == lp["needed"] > 0
    proof = lp["proof"]
    assert proof["pool_page_kb"] == 2048 and proof["pool_hugetlb_kb"] > 0, proof
    assert proof["pool_mappings"] >= 1 and proof["pool_kb"] >= 64 * 1024, proof
    # while the cell ran, the pages were there: reserved on top of the machine's own
    assert lp["after"]["hugepages_total"] == (before["nr_hugepages"] or 0) + lp["needed"]
    for r in results(run_dir):
        assert r["pool_page_kb"] == "2048" and int(r["pool_hugetlb_kb"]) > 0, r
        # hugetlb pages are not in RSS: the pool's are counted beside it
        assert int(r["hugetlb_kb"]) >= int(r["pool_hugetlb_kb"]), r
    assert cell["thp"]["restored"]["nr_hugepages"] == before["nr_hugepages"]
    assert system()["nr_hugepages"] == before["nr_hugepages"]
    assert thpmod.leftover() is None


def test_thp_always_and_never_on_mysql_97_reach_its_heap(mysql_root, work, dataset_cache):
    """MySQL keeps THP for itself (THP_enabled 1): under `always` its heap gets huge pages,
    under `never` nothing does; both read back from the server process."""
    suite = work / "mysql.toml"
    suite.write_text(
        small_suite(
            "thp-mysql",
            server={"flavor": "mysql", "root": str(mysql_root)},
            allocators={"use": ["builtin"]},
            thp={"modes": ["always", "never"]},
        )
    )
    code = main(["run", str(suite), "--out", str(work / "runs"), "--quiet", "--no-report"])
    assert code == 0
    run_dir = next((work / "runs").iterdir())
    cells = {c["thp"]["requested"]: c for c in manifest(run_dir)["cells"]}
    assert set(cells) == {"always", "never"}
    for mode, cell in cells.items():
        assert cell["status"] == "ok", cell.get("error")
        assert cell["thp"]["in_force"]["enabled"] == mode  # read back after writing
        assert cell["thp"]["process_thp_enabled"] == 1  # the server did not opt out
        assert cell["thp"]["restored"]["enabled"] == work_original(cell)
    rows = {r["thp"]: r for r in results(run_dir)}
    assert rows["always"]["process_thp_enabled"] == rows["never"]["process_thp_enabled"] == "1"
    assert int(rows["always"]["anon_huge_kb"]) > 0
    assert int(rows["always"]["heap_anon_huge_kb"]) > 0  # outside the buffer pool: the heap's
    assert int(rows["never"]["anon_huge_kb"]) == 0
    stop = cells["always"]["memory"]["server_stop"]
    assert stop["anon_huge_kb"] >= stop["heap_anon_huge_kb"] > 0


def work_original(cell: dict) -> str:
    """THP enabled as the machine had it when the cell started (its host state)."""
    return cell["host_at_start"]["thp"]["enabled"]


def start_large_pages_run(work: Path, out: str, cache: Path):
    """A runner (a process of its own) in a long large-pages cell: (process, run dir) once its
    level runs."""
    proc = start_run(
        [str(large_pages_suite(work, duration=60)), "--out", str(work / out)],
        cache,
        state=work / "state",
    )
    try:
        run_dir = run_dir_of(work / out)
        wait_for(lambda: any(run_dir.glob("logs/*/point_select@4.log")), 120, "the level")
    except BaseException:
        kill_quietly(proc)
        raise
    return proc, run_dir


def test_large_pages_given_back_after_sigint(work, dataset_cache):
    before = system()
    proc, run_dir = start_large_pages_run(work, "runs", dataset_cache)
    try:
        assert system()["nr_hugepages"] > (before["nr_hugepages"] or 0)  # reserved meanwhile
        assert thpmod.leftover()["original"]["nr_hugepages"] == before["nr_hugepages"]
        proc.send_signal(signal.SIGINT)
        proc.wait(120)
        assert proc.returncode == 130, proc.stderr.read()
    finally:
        kill_quietly(proc)
    assert system() == before and thpmod.leftover() is None
    (cell,) = manifest(run_dir)["cells"]
    assert cell["thp"]["restored"]["nr_hugepages"] == before["nr_hugepages"]


@pytest.mark.parametrize("repair", ["doctor --repair", "the next run"])
def test_large_pages_left_by_a_sigkill_are_given_back(work, dataset_cache, capsys, repair):
    """SIGKILL of the runner mid-cell: nothing of ours can restore then; the server dies with it
    (parent-death signal) and the record stays. `doctor --repair`, or the next run before
    anything else, puts vm.nr_hugepages back and says so."""
    before = system()
    proc, _ = start_large_pages_run(work, "killed", dataset_cache)
    try:
        reserved = system()["nr_hugepages"]
        assert reserved > (before["nr_hugepages"] or 0)
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    finally:
        kill_quietly(proc)
    # The server goes with its parent; its pages are free again, but still reserved.
    wait_for(lambda: ProcFS().meminfo()["HugePages_Free"] == reserved, 60, "the server to exit")
    left = thpmod.leftover()
    assert left["pid"] == proc.pid and not left["runner_alive"]
    assert left["original"]["nr_hugepages"] == before["nr_hugepages"]
    assert system()["nr_hugepages"] == reserved
    capsys.readouterr()
    if repair == "doctor --repair":
        assert main(["doctor", "--repair"]) == 0
        said = capsys.readouterr().out
        assert f"restored what a killed run (pid {proc.pid}) left changed" in said
        assert f"nr_hugepages={before['nr_hugepages']}" in said
        assert system() == before and thpmod.leftover() is None
        return
    # The next run gives it back before it changes anything itself, and says so; then its own
    # large-pages cell is proven on hugetlb pages and given back.
    code = main(["run", str(large_pages_suite(work)), "--out", str(work / "runs"), "--no-report"])
    assert code == 0
    said = capsys.readouterr()
    assert f"restored what a killed run (pid {proc.pid}) left changed" in said.out + said.err
    run_dir = next((work / "runs").iterdir())
    assert manifest(run_dir)["restored_leftover"]["pid"] == proc.pid
    assert_proven_on_hugetlb(run_dir, before)
    # the killed run's own copy of the record went with the repair
    assert not (run_dir_of(work / "killed") / thpmod.PENDING_NAME).exists()
