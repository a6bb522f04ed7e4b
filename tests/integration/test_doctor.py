"""`mallocsweep doctor` finds what a killed run left behind, by pid files in run directories."""

from __future__ import annotations

import json

import pytest

from servers.allocators import resolve
from suites.cli.main import main
from suites.families.mysql.server import MySQLServer, MySQLSettings, find_mysql

pytestmark = pytest.mark.integration


def test_doctor_reports_a_leftover_server_by_its_pid_file(short_tmp, capsys, copy_pristine):
    work = short_tmp / "runs" / "quick-x" / "work" / "cell1"
    copy_pristine(find_mysql(), work)
    srv = MySQLServer(
        find_mysql(), work, MySQLSettings(buffer_pool_mb=32, max_threads=8), resolve(["glibc"])[0]
    )
    try:
        srv.start()
        assert main(["doctor", "--json", "--runs", str(short_tmp / "runs")]) == 0
        checks = json.loads(capsys.readouterr().out)
        left = [c for c in checks if c["name"] == "leftover server"]
        assert len(left) == 1 and f"pid {srv.pid}" in left[0]["detail"] and not left[0]["ok"]
        assert f"kill {srv.pid}" in left[0]["fix"]
        names = {c["name"] for c in checks}
        assert {"sysbench", "THP", "mongod (optional)"} <= names
        ts = next(c for c in checks if c["name"] == "taskstats (context switches)")
        assert ts["ok"] and "keeps exited threads" in ts["detail"], ts  # tests run as root
        assert {"perf counters (fallback)", "tracefs (perf fallback)"} <= names
    finally:
        srv.stop()
    assert main(["doctor", "--json", "--runs", str(short_tmp / "runs")]) == 0
    assert not [c for c in json.loads(capsys.readouterr().out) if c["name"] == "leftover server"]
