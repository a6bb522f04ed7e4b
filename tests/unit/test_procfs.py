"""collectors.procfs on a fixture procfs root (tests/fixtures/procfs, see its README)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from collectors.errors import CollectorError, ProcessGone
from collectors.procfs import CLK_TCK, PAGE_KB, ProcFS

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "procfs"


@pytest.fixture
def procfs() -> ProcFS:
    return ProcFS(FIXTURE)


def test_stat_comm_with_spaces_and_parentheses(procfs):
    st = procfs.stat(4242)
    assert st.comm == "my (weird) name"
    assert st.pid == 4242
    assert st.state == "S"
    assert st.ppid == 1
    assert st.utime_s == pytest.approx(1234 / CLK_TCK)
    assert st.stime_s == pytest.approx(567 / CLK_TCK)
    assert st.num_threads == 37
    assert st.starttime_ticks == 112233
    assert st.minflt == 51234 and st.majflt == 12
    assert st.vsize_kb == 1749168128 // 1024
    assert st.rss_kb == 99530 * PAGE_KB


def test_status_fields(procfs):
    s = procfs.status(4242)
    assert s.name == "my (weird) name"
    assert (s.vm_rss_kb, s.vm_size_kb, s.vm_hwm_kb, s.rss_anon_kb) == (
        398120,
        1708172,
        412884,
        370004,
    )
    assert s.threads == 37
    assert (s.voluntary_ctxt_switches, s.nonvoluntary_ctxt_switches) == (1502, 17)
    assert s.thp_enabled == 0


def test_zombie_status_has_no_memory_figures(procfs):
    s = procfs.status(4343)
    assert s.state == "Z"
    assert s.vm_rss_kb is None and s.vm_size_kb is None and s.thp_enabled is None


def test_statm_in_kb(procfs):
    m = procfs.statm(4242)
    assert m.size_kb == 427043 * PAGE_KB
    assert m.resident_kb == 99530 * PAGE_KB
    assert m.data_kb == 153085 * PAGE_KB


def test_smaps_rollup(procfs):
    r = procfs.smaps_rollup(4242)
    assert r["AnonHugePages"] == 317440
    assert r["Rss"] == 398120
    assert r["Anonymous"] == 370004
    assert "[rollup]" not in " ".join(r)


def test_smaps_per_mapping_adds_up_to_the_rollup(procfs):
    vmas = procfs.smaps(4242)
    rollup = procfs.smaps_rollup(4242)
    for field in ("Rss", "Anonymous", "AnonHugePages"):
        assert sum(v.kb[field] for v in vmas) == rollup[field]
    binary, heap, anon = vmas[:3]
    assert (binary.path, binary.perms, binary.anonymous) == ("/usr/sbin/mariadbd", "r-xp", False)
    assert heap.path == "[heap]" and not heap.anonymous  # the callers' to decide
    assert anon.path == "" and anon.anonymous and not anon.hugetlb and anon.size_kb == 614400
    assert "ac" in anon.flags and vmas[-1].path == "[stack]"


@pytest.mark.parametrize("reader", ["status", "stat", "statm", "smaps_rollup", "smaps"])
def test_missing_pid_is_process_gone(procfs, reader):
    with pytest.raises(ProcessGone) as e:
        getattr(procfs, reader)(999999)
    assert e.value.pid == 999999
    assert not isinstance(e.value, FileNotFoundError)


def test_zombie_smaps_rollup_is_process_gone(procfs):
    with pytest.raises(ProcessGone):
        procfs.smaps_rollup(4343)


def test_truncated_stat_is_a_collector_error(tmp_path):
    (tmp_path / "7").mkdir()
    (tmp_path / "7" / "stat").write_text("7 (x) S 1 2 3\n")
    with pytest.raises(CollectorError, match="fields"):
        ProcFS(tmp_path).stat(7)


def test_vmstat_thp_counters(procfs):
    vm = procfs.vmstat()
    assert vm["thp_fault_alloc"] == 535
    assert vm["thp_split_page"] == 2
    assert "nr_free_pages" not in vm
    assert procfs.vmstat("")["nr_free_pages"] == 1744140


def test_missing_system_file_names_the_root(tmp_path):
    with pytest.raises(CollectorError, match=str(tmp_path)):
        ProcFS(tmp_path).vmstat()


def test_task_listing_and_gone_threads(procfs, tmp_path):
    assert sorted(procfs.task_ids(4242)) == [4242, 4250]
    assert procfs.task_status_ctxsw(4242, 4250) == (300, 40)
    assert procfs.task_status_ctxsw(4242, 4251) is None  # exited meanwhile
    root = tmp_path / "proc"
    shutil.copytree(FIXTURE, root)
    shutil.rmtree(root / "4242")
    with pytest.raises(ProcessGone):
        ProcFS(root).task_ids(4242)


def test_reads_the_real_proc():
    import os

    me = ProcFS().stat(os.getpid())
    assert me.pid == os.getpid() and me.num_threads >= 1
    assert ProcFS().status(os.getpid()).vm_rss_kb > 0


def test_alive_is_false_for_zombies_and_gone_processes(procfs):
    assert procfs.alive(4242) is True
    assert procfs.alive(4343) is False  # state Z
    assert procfs.alive(999999) is False


def test_meminfo_and_cmdline(tmp_path):
    (tmp_path / "meminfo").write_text(
        "MemTotal:        4021236 kB\nMemAvailable:    2998764 kB\nHugePages_Total:       0\n"
    )
    (tmp_path / "9").mkdir()
    (tmp_path / "9" / "cmdline").write_bytes(b"python3\0-m\0suites.cli\0")
    fs = ProcFS(tmp_path)
    assert fs.meminfo() == {"MemTotal": 4021236, "MemAvailable": 2998764, "HugePages_Total": 0}
    assert fs.cmdline(9) == ["python3", "-m", "suites.cli"]
    with pytest.raises(ProcessGone):
        fs.cmdline(10)


def test_alive_tells_a_reused_pid_from_the_process_that_had_it(tmp_path):
    """Pids wrap within minutes here (docs/facts.md, "Processes"): a pid is the recorded process
    only if its start time matches, or if it started before a moment it was known to run."""
    root = tmp_path / "proc"
    shutil.copytree(FIXTURE, root)
    (root / "stat").write_text("cpu  1 2 3 4\nbtime 1000\n")
    started = 1000 + 112233 / CLK_TCK  # pid 4242's start, in seconds since the epoch
    procfs = ProcFS(root)
    assert procfs.boot_time() == 1000.0
    assert procfs.alive(4242, start_ticks=112233) is True
    assert procfs.alive(4242, start_ticks=112232) is False  # another process now has the pid
    assert procfs.alive(4242, running_at=started + 60) is True  # it ran then: the same one
    assert procfs.alive(4242, running_at=started - 60) is False  # started after: a later one


def test_a_leftover_directory_of_a_reused_pid_is_stale(tmp_path):
    """The dataset cache's and the server fetcher's partial directories name their builder's pid:
    a live process that started after the directory was written is not that builder."""
    import os

    from suites.datasets import stale

    me = ProcFS().stat(os.getpid())
    d = tmp_path / f".prepare-x-{os.getpid()}"
    d.mkdir()
    assert stale._builder_runs(os.getpid(), d) is True  # this process wrote it: it runs
    old = ProcFS().boot_time() + me.starttime_ticks / CLK_TCK - 3600
    os.utime(d, (old, old))  # written an hour before this process started
    assert stale._builder_runs(os.getpid(), d) is False


def test_group_members_and_kernel_threads_from_one_walk(tmp_path):
    root = tmp_path / "proc"
    rest = " ".join(["0"] * 40)
    for pid, comm, state, ppid, pgrp in (
        (2, "kthreadd", "S", 0, 0),
        (31, "khugepaged", "S", 2, 0),
        (100, "sh", "Z", 1, 100),  # the group's leader, exited
        (101, "mariadbd", "S", 1, 100),  # its child, still running
        (102, "cat", "Z", 1, 100),  # a zombie of the group: gone in every way that matters
        (103, "khugepaged", "S", 1, 103),  # the name, not a kernel thread
    ):
        (root / str(pid)).mkdir(parents=True)
        (root / str(pid) / "stat").write_text(f"{pid} ({comm}) {state} {ppid} {pgrp} {rest}\n")
    (root / "104").mkdir()  # gone between the listing and the read
    procfs = ProcFS(root)
    assert procfs.group_members(100) == [101]
    assert procfs.group_members(555) == []
    assert procfs.kernel_thread("khugepaged") == 31 and procfs.kernel_thread("kswapd0") is None
