"""The CollectorSession facade on a mutable copy of the fixture procfs (no perf, no real process)."""

from __future__ import annotations

import collections
import csv
import re
import shutil
import time
from pathlib import Path

import pytest

from collectors.collector_session import CollectorSession
from collectors.errors import CollectorError
from collectors.procfs import CLK_TCK, ProcFS
from rundir.derive.phases import FIGURE_KEYS
from suites.families.mysql.plugin import MYSQL

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "procfs"
COLUMNS = [
    "t_s", "phase", "rss_kb", "vsz_kb", "hwm_kb", "rss_anon_kb", "anon_huge_kb", "threads",
    "cpu_user_s", "cpu_sys_s", "ctxsw_voluntary", "ctxsw_involuntary",
    "workload_tps", "workload_qps",
]  # fmt: skip
PID = 4242


def _write(path: Path, text: str) -> None:
    """Replace a file atomically: the sampler thread must never read it half-written (an empty
    status reads as a process that is gone)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


class FakeProc:
    """Edits the fixture files of pid 4242 the way a running server would change them."""

    def __init__(self, root: Path):
        self.root = root
        self.dir = root / str(PID)

    def set(self, *, rss=None, utime=None, invol_worker=None, huge=None, vm=None):
        if rss is not None:
            p = self.dir / "status"
            lines = [
                f"VmRSS:\t{rss} kB" if ln.startswith("VmRSS:") else ln
                for ln in p.read_text().splitlines()
            ]
            _write(p, "\n".join(lines) + "\n")
        if utime is not None:
            p = self.dir / "stat"
            head, _, tail = p.read_text().rpartition(")")
            f = tail.split()
            f[11] = str(utime)  # field 14 (utime), counted from field 3 after the comm
            _write(p, head + ") " + " ".join(f) + "\n")
        if invol_worker is not None:
            _write(
                self.dir / "task" / "4250" / "status",
                f"voluntary_ctxt_switches:\t300\nnonvoluntary_ctxt_switches:\t{invol_worker}\n",
            )
        if huge is not None:
            # smaps_rollup (the sampler's periodic reads) and smaps (the boundaries'), where the
            # 600 MB anonymous mapping holds every huge page
            for name, block in (("smaps_rollup", ""), ("smaps", "7f3c00000000-")):
                p = self.dir / name
                lines, here = [], False
                for ln in p.read_text().splitlines():
                    if re.match(r"[0-9a-f]+-[0-9a-f]+ ", ln):
                        here = ln.startswith(block)
                    if here and ln.startswith("AnonHugePages:"):
                        ln = f"AnonHugePages:    {huge} kB"
                    lines.append(ln)
                _write(p, "\n".join(lines) + "\n")
        if vm is not None:
            _write(self.root / "vmstat", "".join(f"{k} {v}\n" for k, v in vm.items()))

    def exit(self):
        shutil.rmtree(self.dir)


@pytest.fixture
def proc(tmp_path) -> FakeProc:
    root = tmp_path / "proc"
    shutil.copytree(FIXTURE, root)
    return FakeProc(root)


def _collectors(tmp_path, proc, **kw) -> CollectorSession:
    kw.setdefault("sample_interval_s", 0.02)
    return CollectorSession(
        tmp_path / "samples" / "cell.csv", COLUMNS, proc_root=str(proc.root), use_perf=False, **kw
    )


def _rows(path: Path) -> list[dict]:
    with open(path) as f:
        return list(csv.DictReader(f))


def _wait_for(cond, timeout=120.0):  # a hang's deadline, never a speed: the machine may be busy
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


def test_phase_deltas_status_and_manifest(tmp_path, proc):
    c = _collectors(tmp_path, proc)
    status = {"Threads_created": 10, "Innodb_buffer_pool_reads": 100,
              "Innodb_buffer_pool_read_requests": 1000, "Memory_used": 2048 * 1024,
              "Uptime": 5, "version": "10.11.6-MariaDB"}  # fmt: skip
    c.on_spawn(PID)
    c.start(PID, "startup")
    c.set_status_source(lambda: dict(status), counters=MYSQL.counters())
    proc.set(vm={"thp_fault_alloc": 500, "thp_collapse_alloc": 1, "thp_split_page": 0})
    c.begin_phase("oltp_ro@8")
    proc.set(rss=500_000, utime=1234 + 3 * CLK_TCK, invol_worker=140, huge=4096,
             vm={"thp_fault_alloc": 520, "thp_collapse_alloc": 4, "thp_split_page": 2})  # fmt: skip
    _wait_for(lambda: c.writer.rows >= 4)
    c.set_throughput(1500.0, 30000.0)
    n = c.writer.rows
    _wait_for(lambda: c.writer.rows >= n + 2)  # a whole sample taken after the figures
    proc.set(rss=450_000)
    status.update(Threads_created=18, Innodb_buffer_pool_reads=130,
                  Innodb_buffer_pool_read_requests=9000, Memory_used=4096 * 1024)  # fmt: skip
    c.begin_phase("shutdown")
    proc.exit()
    section = c.stop({"ru_utime": 99.0, "ru_stime": 1.0, "ru_nvcsw": 1, "ru_nivcsw": 1})

    fig = c.phase_figures("oltp_ro@8")
    assert set(fig) == set(FIGURE_KEYS)
    assert fig["rss_start_kb"] == 398120 and fig["rss_end_kb"] == 450_000
    assert fig["rss_peak_kb"] == 500_000
    assert fig["cpu_user_s"] == pytest.approx(3.0)
    assert fig["ctxsw_involuntary"] == 100 and fig["ctxsw_voluntary"] == 0
    assert fig["anon_huge_kb"] == 4096
    assert (fig["thp_fault_alloc"], fig["thp_collapse_alloc"], fig["thp_split"]) == (20, 3, 2)
    assert fig["threads_created"] == 8 and fig["bp_reads"] == 30
    assert fig["bp_read_requests"] == 8000
    assert fig["server_memory_used_kb"] == 4096
    assert fig["status_delta"]["Uptime"] == 0 and "version" not in fig["status_delta"]
    assert fig["process_thp_enabled"] == 0
    assert fig["wall_s"] > 0

    # The last phase ends with wait4's exact CPU totals; status is unreadable after exit.
    shut = section["phases"]["shutdown"]
    assert shut["cpu_user_s"] == pytest.approx(99.0 - (1234 + 3 * CLK_TCK) / CLK_TCK, abs=0.01)
    assert shut["threads_created"] is None
    assert section["reconciliation"]["check"] == "not-checked"
    assert section["ctxsw_source"] == "procfs-task-sum"
    assert "not the live /proc" in section["ctxsw_fallback_reason"]
    assert section["samples"] >= 5 and section["errors"] == []
    assert set(section["phases"]) == {"startup", "oltp_ro@8", "shutdown"}

    rows = _rows(tmp_path / "samples" / "cell.csv")
    assert list(rows[0]) == COLUMNS
    assert {r["phase"] for r in rows} == {"startup", "oltp_ro@8", "shutdown"}
    boundary = [r for r in rows if r["anon_huge_kb"] != ""]
    assert len(boundary) >= 3  # every boundary reads smaps
    assert any(r["workload_qps"] == "30000.0" for r in rows)
    assert all(r["workload_qps"] == "" for r in rows if r["phase"] == "startup")


def test_smaps_only_at_boundaries_when_interval_is_zero(tmp_path, proc):
    c = _collectors(tmp_path, proc, smaps_interval_s=0)
    c.on_spawn(PID)
    c.start(PID)
    _wait_for(lambda: c.writer.rows >= 6)
    c.begin_phase("shutdown")
    c.stop(None)
    rows = _rows(tmp_path / "samples" / "cell.csv")
    assert sum(r["anon_huge_kb"] != "" for r in rows) == 2
    assert c.stop(None)["smaps_reads"] == 2  # stop is idempotent


@pytest.mark.parametrize("parts", [False, True], ids=["hugepages", "hugepages+parts"])
def test_a_boundary_reads_smaps_once(tmp_path, proc, monkeypatch, parts):
    """Each boundary walks the server's page tables once: one read of smaps gives the snapshot's
    AnonHugePages, the hugepage reading and (with parts) RSS by mapping, and smaps_rollup is not
    read beside it. The pool's mapping is the same one for the parts and the hugepage reading."""
    reads = collections.Counter()
    real = ProcFS._read

    def counting(self, pid, name):
        if name in ("smaps", "smaps_rollup"):
            reads[name] += 1
        return real(self, pid, name)

    monkeypatch.setattr(ProcFS, "_read", counting)
    c = _collectors(tmp_path, proc, smaps_interval_s=0, parts=parts, pool_kb=600 * 1024)
    c.on_spawn(PID)
    per = []
    c.start(PID)
    per.append(dict(reads))
    for name in ("warmup", "oltp_ro@8"):
        reads.clear()
        c.begin_phase(name)
        per.append(dict(reads))
    reads.clear()
    proc.exit()
    section = c.stop(None)
    assert per == [{"smaps": 1}] * 3 and not reads  # the last boundary: the server is gone
    assert section["smaps_reads"] == 3

    end = c.raw_phases()["warmup"]["end"]
    huge = end["hugepages"]
    assert end["snap"]["anon_huge_kb"] == huge["anon_huge_kb"] == 317440  # smaps_rollup's figure
    pool = (huge["pool_mappings"], huge["pool_kb"], huge["pool_anon_huge_kb"])
    assert pool == (1, 614400, 317440)  # the 600 MB mapping, by its size
    assert huge["heap_anon_huge_kb"] == 0
    if parts:
        p = end["snap"]["parts"]
        assert p["bufpool"]["rss_kb"] == 350000 and p["bufpool"]["anon_huge_kb"] == 317440
        assert sum(p[k]["rss_kb"] for k in ("bufpool", "stacks", "file", "heap")) == 398120
        assert p["marked"]  # found by its size: the fixture's pool has no don't-dump mark
    else:
        assert "parts" not in end["snap"]
    # The first boundary takes nothing apart (collectors.collector_session._snapshot)
    assert "parts" not in c.raw_phases()["startup"]["start"]["snap"]


def test_process_exiting_mid_phase_does_not_raise(tmp_path, proc):
    c = _collectors(tmp_path, proc)
    c.on_spawn(PID)
    c.start(PID)
    c.begin_phase("oltp_ro@8")
    proc.set(rss=420_000)
    _wait_for(lambda: c._last is not None and c._last.rss_kb == 420_000)
    proc.exit()
    _wait_for(lambda: c.gone)
    c.begin_phase("shutdown")  # boundary on a gone process: last known values
    section = c.stop(None)
    fig = c.phase_figures("oltp_ro@8")
    assert fig["rss_end_kb"] == 420_000
    assert "gone" in section["gone"]
    assert section["reconciliation"]["check"] == "not-checked"


def test_status_source_failure_is_tolerated(tmp_path, proc):
    c = _collectors(tmp_path, proc)
    c.on_spawn(PID)
    c.start(PID)

    def broken():
        raise ConnectionError("server has gone away")

    c.set_status_source(broken, counters=MYSQL.counters())
    c.begin_phase("warmup")
    section = c.stop(None)
    assert c.phase_figures("startup")["threads_created"] is None
    assert any("server has gone away" in e for e in section["errors"])


def test_bad_settings_and_misuse(tmp_path, proc):
    with pytest.raises(CollectorError, match="not produced"):
        CollectorSession(tmp_path / "x.csv", COLUMNS + ["bogus"], proc_root=str(proc.root))
    with pytest.raises(CollectorError, match="sample_interval_s"):
        CollectorSession(tmp_path / "x.csv", COLUMNS, sample_interval_s=0)
    with pytest.raises(CollectorError, match="smaps_interval_s"):
        CollectorSession(tmp_path / "x.csv", COLUMNS, smaps_interval_s=-1)
    c = _collectors(tmp_path, proc)
    with pytest.raises(CollectorError, match="before start"):
        c.begin_phase("warmup")
    c.on_spawn(PID)
    c.start(PID)
    try:
        with pytest.raises(CollectorError, match="twice"):
            c.begin_phase("startup")
        with pytest.raises(KeyError):
            c.phase_figures("startup")  # still open
    finally:
        c.stop(None)


def test_timeline_is_never_overwritten(tmp_path, proc):
    (tmp_path / "samples").mkdir()
    (tmp_path / "samples" / "cell.csv").write_text("old\n")
    c = _collectors(tmp_path, proc)
    c.on_spawn(PID)
    with pytest.raises(CollectorError, match="never overwritten"):
        c.start(PID)
    assert (tmp_path / "samples" / "cell.csv").read_text() == "old\n"


# -- the launch gate, server start/stop memory, measured windows, a dead sampler ---------------


def test_gate_snapshots_before_exec_give_no_memory_figures(tmp_path, proc):
    """start() runs in the launch hook, while the pid is still /bin/sh: its counters are the
    baseline, its memory is not the server's and never reaches a figure or the timeline."""
    exe = proc.dir / "exe"
    exe.symlink_to("/bin/sh")
    proc.set(rss=1700)  # the gate shell
    c = _collectors(tmp_path, proc)
    c.on_spawn(PID)
    c.start(PID, "startup")
    time.sleep(0.1)  # several sampler ticks, all still in the gate
    assert c.writer.rows == 0
    proc.set(rss=100_000)  # what the server will have (read only once exe says it is there)
    exe.unlink()
    exe.symlink_to("/usr/sbin/mariadbd")  # execve
    _wait_for(lambda: c.writer.rows >= 2)
    proc.set(rss=120_000)
    c.set_status_source(lambda: {"Threads_connected": 1}, counters=MYSQL.counters())
    c.begin_phase("warmup", mark="server_start")
    proc.set(rss=150_000)
    c.begin_phase("shutdown", mark="server_stop")
    proc.exit()
    section = c.stop(None)

    start = c.phase_figures("startup")
    assert start["rss_start_kb"] == 100_000  # the server's first snapshot, not the shell's
    assert start["rss_end_kb"] == 120_000
    assert start["cpu_user_s"] is not None  # counters from the gate's baseline
    rows = _rows(tmp_path / "samples" / "cell.csv")
    assert rows and all(int(r["rss_kb"]) >= 100_000 for r in rows)
    mem = section["memory"]
    assert mem["server_start"]["rss_kb"] == 120_000 and mem["server_start"]["vsz_kb"] > 0
    assert mem["server_stop"]["rss_kb"] == 150_000
    assert mem["server_start"]["source"] == "boundary"


def test_without_a_stop_boundary_server_stop_is_the_last_sample(tmp_path, proc):
    c = _collectors(tmp_path, proc)
    c.on_spawn(PID)
    c.start(PID)
    c.begin_phase("warmup", mark="server_start")
    proc.set(rss=333_333)
    _wait_for(lambda: c._last is not None and c._last.rss_kb == 333_333)
    proc.exit()
    section = c.stop(None)
    assert section["memory"]["server_stop"]["rss_kb"] == 333_333
    assert "last sample" in section["memory"]["server_stop"]["source"]
    with pytest.raises(CollectorError, match="mark must be"):
        c.begin_phase("x", mark="bogus")


def test_window_marks_bound_per_op_figures_inside_a_phase(tmp_path, proc):
    import threading

    # boundaries and report marks only (no periodic marks, a timeline sample every 10 s)
    c = _collectors(tmp_path, proc, sample_interval_s=10, mark_interval_s=0)
    status = {"Threads_connected": 3, "Threads_created": 5}
    slow = threading.Event()

    def status_fn():
        if threading.current_thread().name == "mallocsweep-mid-status":
            slow.wait()  # a SHOW GLOBAL STATUS still running: it ends when the test says
        return dict(status)

    c.on_spawn(PID)
    c.start(PID)
    c.set_status_source(status_fn, counters=MYSQL.counters())
    c.begin_phase("point_select@64")
    proc.set(utime=1234 + 2 * CLK_TCK, invol_worker=60)  # clients connecting: outside
    status.update(Threads_connected=65, Threads_created=70)
    m0 = c.mark_window()  # first interval report: all 64 clients (and our status connection) in
    proc.set(utime=1234 + 5 * CLK_TCK, invol_worker=90)
    m1 = c.mark_window()
    # marks never wait for the mid-level status read: it cannot end before slow.set() below, and
    # it is still in flight now that two marks have been taken
    assert c._phase.mid_status_thread.is_alive()
    proc.set(utime=1234 + 7 * CLK_TCK, invol_worker=95)
    m2 = c.mark_window()
    assert 0 < m0 < m1 < m2
    slow.set()
    c._phase.mid_status_thread.join()  # the read took the clients' figures, however long it took
    status.update(Threads_connected=1, Threads_created=70)
    proc.set(utime=1234 + 9 * CLK_TCK)  # teardown: outside the window
    c.begin_phase("shutdown")
    c.stop(None)

    fig = c.phase_figures("point_select@64")
    assert fig["cpu_user_s"] == pytest.approx(9.0)  # the whole phase
    assert fig["threads_connected"] == 65  # read mid-level, not at a boundary (1)
    assert fig["threads_created"] == 65 and fig["window_marks"] == 3
    win = c.window_figures("point_select@64", 0, -1)
    assert win["cpu_user_s"] == pytest.approx(5.0)
    # the procfs fallback is not read at marks (a walk over every thread): no window counts
    assert win["ctxsw_involuntary"] is None and win["ctxsw_voluntary"] is None
    assert fig["ctxsw_involuntary"] == 95 - 40  # the phase still has them (boundaries read it)
    assert win["ctxsw_source"] == "procfs-task-sum" and win["window_s"] > 0
    assert c.window_figures("point_select@64", 0, 1)["cpu_user_s"] == pytest.approx(3.0)
    assert c.window_figures("shutdown") is None  # no marks


def test_periodic_marks_run_from_the_first_report_to_the_end_of_the_phase(tmp_path, proc):
    c = _collectors(tmp_path, proc, sample_interval_s=10, mark_interval_s=0.02)
    c.on_spawn(PID)
    c.start(PID)
    c.begin_phase("level")
    time.sleep(0.1)
    assert c._phase.marks == []  # nothing before the workload's first report
    first = c.mark_window()
    _wait_for(lambda: len(c._phase.marks) >= 5)
    c.begin_phase("shutdown")
    n = len(c.mark_times("level"))
    time.sleep(0.1)
    c.stop(None)
    times = c.mark_times("level")
    assert len(times) == n >= 5  # stopped with the phase
    assert times == sorted(times) and times[0] == pytest.approx(first)
    assert c.mark_times("shutdown") == []
    assert c.window_figures("level", 0, -1)["window_s"] > 0


def test_all_thp_vmstat_counters_per_phase_and_per_cell(tmp_path, proc):
    c = _collectors(tmp_path, proc)
    c.on_spawn(PID)
    c.start(PID)
    proc.set(vm={"thp_fault_alloc": 600, "thp_fault_fallback": 40, "thp_split_page": 2,
                 "thp_collapse_alloc": 11, "thp_swpout": 1, "nr_anon_pages": 5})  # fmt: skip
    c.begin_phase("level")
    proc.set(vm={"thp_fault_alloc": 610, "thp_fault_fallback": 90, "thp_split_page": 2,
                 "thp_collapse_alloc": 11, "thp_swpout": 4, "nr_anon_pages": 9})  # fmt: skip
    c.begin_phase("shutdown")
    section = c.stop(None)
    fig = c.phase_figures("level")
    assert fig["thp_fault_fallback"] == 50 and fig["thp_fault_alloc"] == 10
    assert fig["thp_vmstat"] == {
        "thp_collapse_alloc": 0, "thp_fault_alloc": 10, "thp_fault_fallback": 50,
        "thp_split_page": 0, "thp_swpout": 3,
    }  # fmt: skip
    startup = c.phase_figures("startup")["thp_vmstat"]
    assert startup["thp_fault_fallback"] == 37  # from the fixture's 3
    assert section["thp_vmstat_delta"]["thp_fault_fallback"] == 87
    assert "nr_anon_pages" not in section["thp_vmstat_delta"]


def test_a_sampler_that_died_fails_check_sampling(tmp_path, proc):
    c = _collectors(tmp_path, proc)
    c.on_spawn(PID)
    c.start(PID)
    c.check_sampling()  # running: fine
    good = (proc.dir / "stat").read_text()
    _write(proc.dir / "stat", "4242 garbage\n")  # not ProcessGone: a reader error
    _wait_for(lambda: c._sampler.error is not None)
    with pytest.raises(CollectorError, match="sampler stopped.*stat"):
        c.check_sampling()
    _write(proc.dir / "stat", good)
    section = c.stop(None)
    assert any("sampler" in e for e in section["errors"])


def test_pause_stops_sampling_and_marks_until_resume(tmp_path, proc):
    """make bench's raw blocks: while paused nothing of ours reads the process."""
    c = _collectors(tmp_path, proc, mark_interval_s=0.02)
    c.on_spawn(PID)
    c.start(PID)
    c.begin_phase("level")
    c.mark_window()
    _wait_for(lambda: c._sampler.samples >= 3 and len(c._phase.marks) >= 3)
    c.pause()
    samples, marks = c._sampler.samples, len(c._phase.marks)
    time.sleep(0.2)  # ten sample intervals and ten mark periods while paused
    assert (c._sampler.samples, len(c._phase.marks)) == (samples, marks)
    c.check_sampling()  # paused is not failed
    c.resume()
    _wait_for(lambda: c._sampler.samples >= samples + 3)
    assert c.sampler_paused_s >= 0.2
    c.pause()
    c.stop(None)  # a paused sampler stops at once
    assert not c._sampler.is_alive()
