"""The Collectors facade on a mutable copy of the fixture procfs (no perf, no real process)."""

from __future__ import annotations

import csv
import shutil
import time
from pathlib import Path

import pytest

from collectors.errors import CollectorError
from collectors.procfs import CLK_TCK
from collectors.session import FIGURE_KEYS, Collectors

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "procfs"
COLUMNS = [
    "t_s", "phase", "rss_kb", "vsz_kb", "hwm_kb", "rss_anon_kb", "anon_huge_kb", "threads",
    "cpu_user_s", "cpu_sys_s", "ctxsw_voluntary", "ctxsw_involuntary",
    "workload_tps", "workload_qps",
]  # fmt: skip
PID = 4242


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
            p.write_text("\n".join(lines) + "\n")
        if utime is not None:
            p = self.dir / "stat"
            head, _, tail = p.read_text().rpartition(")")
            f = tail.split()
            f[11] = str(utime)  # field 14 (utime), counted from field 3 after the comm
            p.write_text(head + ") " + " ".join(f) + "\n")
        if invol_worker is not None:
            (self.dir / "task" / "4250" / "status").write_text(
                f"voluntary_ctxt_switches:\t300\nnonvoluntary_ctxt_switches:\t{invol_worker}\n"
            )
        if huge is not None:
            p = self.dir / "smaps_rollup"
            p.write_text(
                "\n".join(
                    f"AnonHugePages:    {huge} kB" if ln.startswith("AnonHugePages:") else ln
                    for ln in p.read_text().splitlines()
                )
                + "\n"
            )
        if vm is not None:
            (self.root / "vmstat").write_text("".join(f"{k} {v}\n" for k, v in vm.items()))

    def exit(self):
        shutil.rmtree(self.dir)


@pytest.fixture
def proc(tmp_path) -> FakeProc:
    root = tmp_path / "proc"
    shutil.copytree(FIXTURE, root)
    return FakeProc(root)


def _collectors(tmp_path, proc, **kw) -> Collectors:
    kw.setdefault("sample_interval_s", 0.02)
    return Collectors(
        tmp_path / "samples" / "cell.csv", COLUMNS, proc_root=str(proc.root), use_perf=False, **kw
    )


def _rows(path: Path) -> list[dict]:
    with open(path) as f:
        return list(csv.DictReader(f))


def _wait_for(cond, timeout=5.0):
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
    c.set_status_source(lambda: dict(status))
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
    assert "collect.perf" in section["ctxsw_fallback_reason"]
    assert section["samples"] >= 5 and section["errors"] == []
    assert set(section["phases"]) == {"startup", "oltp_ro@8", "shutdown"}

    rows = _rows(tmp_path / "samples" / "cell.csv")
    assert list(rows[0]) == COLUMNS
    assert {r["phase"] for r in rows} == {"startup", "oltp_ro@8", "shutdown"}
    boundary = [r for r in rows if r["anon_huge_kb"] != ""]
    assert len(boundary) >= 3  # every boundary reads smaps_rollup
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

    c.set_status_source(broken)
    c.begin_phase("warmup")
    section = c.stop(None)
    assert c.phase_figures("startup")["threads_created"] is None
    assert any("server has gone away" in e for e in section["errors"])


def test_bad_settings_and_misuse(tmp_path, proc):
    with pytest.raises(CollectorError, match="not produced"):
        Collectors(tmp_path / "x.csv", COLUMNS + ["bogus"], proc_root=str(proc.root))
    with pytest.raises(CollectorError, match="sample_interval_s"):
        Collectors(tmp_path / "x.csv", COLUMNS, sample_interval_s=0)
    with pytest.raises(CollectorError, match="smaps_interval_s"):
        Collectors(tmp_path / "x.csv", COLUMNS, smaps_interval_s=-1)
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
