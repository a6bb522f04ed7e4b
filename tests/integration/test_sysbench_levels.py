"""sysbench levels through our wrapper against a real MariaDB (private socket, always stopped)."""

from __future__ import annotations

import json
import re
import threading
import time

import pytest

from suites.families.mysql.server import MySQLSettings
from suites.workloads.sysbench import SysbenchOptions, run_level
from suites.workloads.sysbench.runner import WRAPPER, records_path
from tests.integration.mariadb import SMALL_DATASET, start_prepared
from tests.integration.runs_helpers import scratch_dir

pytestmark = pytest.mark.integration
OPTS = SMALL_DATASET  # what the session's mariadb_life holds


@pytest.fixture(scope="module")
def server(mariadb_life, tmp_path_factory):
    """The session's MariaDB under glibc, sized for 1536 clients (max_connections, thread cache,
    prepared statements), OPTS loaded; the levels only read from it."""
    srv, target, _ = mariadb_life("glibc")
    return srv, target, tmp_path_factory.mktemp("sb-logs")


def printed(log) -> dict:
    text = log.read_text()
    return {
        "qps": float(
            re.search(r"^\s*queries:\s+\d+\s+\(([\d.]+) per sec\.\)", text, re.M).group(1)
        ),
        "tps": float(
            re.search(r"^\s*transactions:\s+\d+\s+\(([\d.]+) per sec\.\)", text, re.M).group(1)
        ),
        "p95": float(re.search(r"95th percentile:\s+([\d.]+)", text).group(1)),
    }


@pytest.mark.parametrize("workload", ["oltp_ro", "point_select"])
def test_level_figures_match_sysbench_raw_log(server, workload):
    _, target, logs = server
    seen = []
    res = run_level(
        target,
        workload,
        8,
        3,
        OPTS,
        logs / f"{workload}@8.log",
        on_interval=lambda t, tps, qps: seen.append((t, tps, qps)),
    )
    assert res.status == "ok", res.error
    want = printed(logs / f"{workload}@8.log")
    assert res.qps > 0 and round(res.qps, 2) == pytest.approx(want["qps"], abs=0.011)
    assert round(res.tps, 2) == pytest.approx(want["tps"], abs=0.011)
    assert round(res.lat_p95_ms, 2) == pytest.approx(want["p95"], abs=0.011)
    assert (
        0 < res.lat_p50_ms <= res.lat_p95_ms <= res.lat_p99_ms <= res.lat_p999_ms <= res.lat_max_ms
    )
    assert res.sysbench.problems == []  # the histogram holds exactly sysbench's event count
    assert len(seen) >= 2 and all(qps > 0 for _, _, qps in seen)
    assert len(res.intervals) == len(seen) and res.intervals[0]["lat_p95_ms"] > 0
    # sysbench ran its --time (3 s) to the end; how long past it depends on the machine's load
    assert res.events > 0 and res.errors == 0 and res.duration_s >= 2.9


def test_1536_point_select_threads_complete(server):
    srv, target, logs = server
    res = run_level(target, "point_select", 1536, 3, OPTS, logs / "point_select@1536.log")
    assert res.status == "ok", res.error
    assert res.events > 0 and res.qps > 0 and res.errors == 0
    assert res.lat_p50_ms <= res.lat_p95_ms <= res.lat_p99_ms <= res.lat_max_ms
    status = srv.global_status()
    assert status["Max_used_connections"] >= 1536
    report = res.sysbench.priority["report_thread"]
    assert report is not None and report["tid"] > 0  # it named itself among 1536 workers
    if report["policy"]:  # boosted (root): it stayed idle, so the guard kept the boost
        assert report["revoked"] is None and report["max_cpu_share"] < 0.05, report


def test_a_stalled_level_is_killed_and_failed(server):
    """No event can complete (the table is write-locked): the level must not hang."""
    srv, target, logs = server
    opts = SysbenchOptions(tables=1, table_size=2000, extra_args=("--histogram=on",))
    locker = srv.connect()
    cur = locker.cursor()
    cur.execute("LOCK TABLES sbtest.sbtest1 WRITE")
    try:
        started = time.monotonic()
        res = run_level(target, "point_select", 4, 2, opts, logs / "stalled.log", timeout_s=8)
        took = time.monotonic() - started
    finally:
        cur.execute("UNLOCK TABLES")
        locker.close()
    # killed by the level's own timeout (8 s), not left to end by itself: it never could
    assert res.status == "failed" and "killed" in res.error and "zero events" in res.error
    assert res.sysbench.exit["signal"] == 9 and took >= 8


def test_server_gone_mid_level_is_a_failed_level(tmp_path, mariadb_binary, copy_pristine):
    """A server that dies under load: the level fails with the reason; nothing raises."""
    opts = SysbenchOptions(tables=1, table_size=500)
    settings = MySQLSettings(buffer_pool_mb=32, max_threads=64, innodb_log_file_mb=16)
    with scratch_dir("ms-sbg-") as work:
        copy_pristine(mariadb_binary, work)  # killed below: a life of its own
        srv, target, _ = start_prepared(work, opts, settings, tmp_path / "prepare.log")
        try:
            killer = threading.Timer(1.5, lambda: srv.child.signal_group(9))
            killer.start()
            res = run_level(target, "point_select", 4, 5, opts, tmp_path / "gone.log", timeout_s=40)
            killer.join()
        finally:
            srv.stop()
    assert res.status == "failed"
    assert "server stopped answering" in res.error or "Lost connection" in res.error, res.error


def _policy(pid: int, tid: int | None = None) -> int:
    """Scheduling policy of a task (proc(5) stat field 41): 0 normal, 1 FIFO."""
    path = f"/proc/{pid}/task/{tid}/stat" if tid else f"/proc/{pid}/stat"
    with open(path) as f:
        return int(f.read().rsplit(")", 1)[1].split()[38])


def test_only_the_reporting_threads_are_boosted(server):
    """sysbench's report thread (as it named itself) and our reading thread wake promptly
    (SCHED_FIFO); the server, the sysbench workers and anything forked keep the normal policy;
    ours is restored after."""
    import os

    srv, target, logs = server
    if os.geteuid() != 0:
        pytest.skip("real-time priority needs root (the boost is then simply not applied)")
    seen = {}

    def during(_t, _tps, _qps):
        if seen:
            return
        me = threading.get_native_id()
        seen["runner"] = _policy(os.getpid(), me)
        children = [
            int(p)
            for p in os.listdir("/proc")
            if p.isdigit() and _ppid(int(p)) == os.getpid() and "sysbench" in _comm(int(p))
        ]
        sb = children[0]
        seen["sysbench"] = sb
        seen["policies"] = {int(t): _policy(sb, int(t)) for t in os.listdir(f"/proc/{sb}/task")}
        seen["server"] = _policy(srv.pid)

    res = run_level(target, "point_select", 64, 2, OPTS, logs / "prio.log", on_interval=during)
    assert res.status == "ok", res.error
    report = res.sysbench.priority["report_thread"]
    assert res.sysbench.priority["runner"] and report["policy"] and report["revoked"] is None
    # it used next to no CPU while boosted (the guard's own measure)
    assert 0 <= report["max_cpu_share"] < 0.05
    policies = seen.pop("policies")
    assert policies.pop(report["tid"]) == 1  # the thread that wrote the interval reports
    assert set(policies.values()) == {0} and len(policies) == 1 + 64  # main thread + workers
    assert seen == {"runner": 1, "sysbench": seen["sysbench"], "server": 0}
    # every interval report came from the boosted thread
    recs = [json.loads(x) for x in records_path(logs / "prio.log").read_text().splitlines()]
    assert {r["tid"] for r in recs if r["type"] == "interval"} == {report["tid"]}
    assert _policy(os.getpid(), threading.get_native_id()) == 0  # restored


def test_the_report_thread_names_itself_in_the_wrapper(tmp_path):
    """Without a server: our wrapper around a tiny workload, run by the real sysbench 1.0.20, with
    and without --rate (whose event thread has no Lua state). Exactly one report_thread record,
    from a thread of that sysbench other than its main thread, and every interval report (the
    hook runs only in sysbench's report thread) came from that same thread."""
    import os
    import shutil
    import subprocess

    if shutil.which("sysbench") is None:
        pytest.skip("sysbench is not installed (`make setup` installs it)")
    (tmp_path / "napper.lua").write_text(
        'local ffi = require("ffi")\n'
        'ffi.cdef("int usleep(unsigned int usec);")\n'
        "function event() ffi.C.usleep(2000) end\n"
    )
    for extra in ([], ["--rate=300"]):
        out = tmp_path / "out.jsonl"
        out.unlink(missing_ok=True)
        env = {
            "PATH": os.environ["PATH"],
            "HOME": str(tmp_path),
            "MALLOCSWEEP_WORKLOAD": "napper",
            "MALLOCSWEEP_OUT": str(out),
            "MALLOCSWEEP_DONE": str(tmp_path / "done"),
            "MALLOCSWEEP_THREADS": "3",
        }
        argv = ["sysbench", str(WRAPPER), "--threads=3", "--time=3", "--report-interval=1"]
        p = subprocess.Popen([*argv, *extra, "run"], cwd=tmp_path, env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        tids = set()
        while p.poll() is None:  # every thread sysbench has had
            try:
                tids |= {int(t) for t in os.listdir(f"/proc/{p.pid}/task")}
            except FileNotFoundError:
                break
            time.sleep(0.01)
        assert p.wait(30) == 0
        recs = [json.loads(x) for x in out.read_text().splitlines()]
        named = [r for r in recs if r["type"] == "report_thread"]
        assert len(named) == 1 and named[0]["sysbench_tid"] == 3, named
        tid = named[0]["tid"]
        assert tid in tids and tid != p.pid
        intervals = [r for r in recs if r["type"] == "interval"]
        assert {r["tid"] for r in intervals} <= {tid}
        # the --time=3 level reports at least once unless the machine starved it completely
        assert intervals or extra, recs


def _ppid(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return -1


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read()
    except OSError:
        return ""
