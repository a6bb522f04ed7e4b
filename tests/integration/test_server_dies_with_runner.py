"""A runner SIGKILLed while its server starts leaves no server behind.

MariaDB 10.11 loses a SIGTERM that lands in its first ~0.1 s of start-up and then runs on for ever
(a killed tune left one such server alive for 11 minutes). The parent-death signal of every child
is therefore SIGKILL (servers.launch). Here a real runner-like process starts a real server and is
SIGKILLed at several moments of the server's start-up, the early window included."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration.runs_helpers import scratch_dir

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]

# Starts the server; prints its pid from on_spawn (before the helper execs the binary), then waits
# for start() to finish, which it never does: the test kills this process first.
RUNNER = """
import sys, time
from pathlib import Path
from servers.allocators import resolve
from suites.families.mysql.server import MySQLServer, MySQLSettings, find_mysql
work = Path(sys.argv[1])
(alloc,) = resolve(["jemalloc" if resolve(["jemalloc"])[0].usable else "glibc"])
settings = MySQLSettings(buffer_pool_mb=32, max_threads=16, innodb_log_file_mb=16)
srv = MySQLServer(find_mysql(), work, settings, alloc)
srv.start(on_spawn=lambda pid: print(pid, flush=True))
time.sleep(600)
"""


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state == "Z"


@pytest.mark.parametrize("delay_s", [0.05, 0.1, 0.15, 1.0])
def test_server_in_start_up_dies_with_its_killed_runner(delay_s, mariadb_binary, copy_pristine):
    with scratch_dir("ms-pdeath-") as base:
        work = base / "life"
        copy_pristine(mariadb_binary, work)
        runner = subprocess.Popen(
            [sys.executable, "-c", RUNNER, str(work)], cwd=REPO, stdout=subprocess.PIPE, text=True
        )
        pid = None
        try:
            pid = int(runner.stdout.readline())
            time.sleep(delay_s)  # the server execs as soon as on_spawn returns
        finally:
            runner.kill()
            runner.wait()
        assert pid is not None
        deadline = time.monotonic() + 30
        while not _gone(pid):
            if time.monotonic() > deadline:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
                subprocess.run(["kill", "-9", str(pid)], check=False)
                pytest.fail(f"server {pid} outlived its runner by 30 s: {cmd.decode()}")
            time.sleep(0.1)
