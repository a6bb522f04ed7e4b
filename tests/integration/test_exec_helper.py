"""The exec helper (servers/exec/msexec.c) every child starts through: what each child gets before
its binary runs, checked on real processes (no server needed; a few seconds in all)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from servers.errors import ServerError
from servers.exec_helper import helper, helper_argv
from servers.launch import spawn

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def _out(tmp_path: Path, argv: list[str], **kw) -> str:
    log = tmp_path / "out.log"
    log.unlink(missing_ok=True)
    child = spawn(argv, stdout=log, stderr=log, **kw)
    ended = child.wait(30)
    assert ended is not None and ended.returncode == 0, log.read_text()
    return log.read_text()


def test_environment_is_exactly_the_given_one(tmp_path):
    assert _out(tmp_path, ["/usr/bin/env"], env={"A": "1", "LD_PRELOAD": ""}) == "A=1\n"
    libm = next(
        p for p in ("/lib/x86_64-linux-gnu/libm.so.6", "/usr/lib/libm.so.6") if Path(p).exists()
    )
    got = _out(tmp_path, ["/usr/bin/env"], env={"B": "2", "LD_PRELOAD": libm})
    assert sorted(got.splitlines()) == ["B=2", f"LD_PRELOAD={libm}"]


def test_open_file_limit_is_the_childs_only(tmp_path):
    ours = os.sysconf("SC_OPEN_MAX")
    want = 777 if ours != 777 else 778
    got = _out(tmp_path, ["/bin/sh", "-c", "ulimit -n"], env={}, rlimits={"nofile": want})
    assert got.strip() == str(want)
    assert os.sysconf("SC_OPEN_MAX") == ours


def test_thp_opt_out_reaches_the_binary(tmp_path):
    def thp(disable: bool) -> str:
        text = _out(tmp_path, ["/bin/cat", "/proc/self/status"], env={}, thp_disable=disable)
        return re.search(r"^THP_enabled:\s*(\d)", text, re.M).group(1)

    assert thp(True) == "0"
    assert thp(False) == "1"


def test_own_process_group_and_same_pid_through_exec(tmp_path):
    seen = []
    child = spawn(["sleep", "30"], env={}, on_spawn=seen.append)
    try:
        assert seen == [child.pid]
        assert os.getpgid(child.pid) == child.pid != os.getpgid(0)
        deadline = time.monotonic() + 10
        while Path(f"/proc/{child.pid}/comm").read_text().strip() != "sleep":
            assert time.monotonic() < deadline, "the helper never exec'ed sleep"
            time.sleep(0.01)
    finally:
        child.terminate(term_timeout=5)


def test_child_dies_with_the_runner(tmp_path):
    """SIGKILL the process that spawned the child: the parent-death signal ends the child."""
    script = (
        "import sys, time, signal\n"
        "from servers.launch import spawn\n"
        "c = spawn(['sleep', '120'], env={}, death_signal=signal.SIGKILL)\n"
        "print(c.pid, flush=True)\n"
        "time.sleep(120)\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script], cwd=REPO, stdout=subprocess.PIPE, text=True
    )
    try:
        pid = int(parent.stdout.readline())
        assert Path(f"/proc/{pid}").exists()
    finally:
        parent.kill()
        parent.wait()
    deadline = time.monotonic() + 10
    while Path(f"/proc/{pid}").exists() and "Z" not in _state(pid):
        assert time.monotonic() < deadline, f"child {pid} outlived its parent"
        time.sleep(0.02)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def test_parent_already_gone_and_gate_closed_exit_without_exec():
    # --parent names a pid that is not our parent: as if the runner died before the prctl.
    argv = helper_argv(["/bin/true"], parent=1, death_signal=signal.SIGKILL, gate=False)
    done = subprocess.run(argv, env={}, capture_output=True, text=True)
    assert done.returncode == 98 and "parent exited before start" in done.stderr
    # The gate closed without "go": the runner gave up, nothing is executed.
    argv = helper_argv(["/bin/sh", "-c", "echo ran"], parent=os.getpid(), death_signal=9)
    done = subprocess.run(argv, env={}, input="", capture_output=True, text=True)
    assert done.returncode == 97 and "ran" not in done.stdout
    # A binary that does not exist: one line naming it, status 127.
    argv = helper_argv(["/nonexistent/bin"], parent=os.getpid(), death_signal=9, gate=False)
    done = subprocess.run(argv, env={}, capture_output=True, text=True)
    assert done.returncode == 127 and "exec /nonexistent/bin" in done.stderr


def test_missing_helper_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("MALLOCSWEEP_MSEXEC", str(tmp_path / "msexec"))
    with pytest.raises(ServerError, match=r"make setup"):
        helper()
    with pytest.raises(ServerError, match=r"make setup"):
        spawn(["/bin/true"], env={})


def test_no_python_runs_between_fork_and_exec():
    """Nothing of ours asks subprocess to run Python in the child (preexec_fn) or to make a session
    in Python's place; children start through servers.launch.spawn."""
    offenders = []
    for tree in ("servers", "suites", "collectors", "analysis", "rundir"):
        for f in (REPO / tree).rglob("*.py"):
            text = f.read_text()
            if re.search(r"preexec_fn\s*=", text) or re.search(r"start_new_session\s*=", text):
                offenders.append(str(f.relative_to(REPO)))
    assert offenders == []


def test_a_third_signal_skips_sigterm_but_still_kills_and_reaps():
    """A child that ignores SIGTERM: normally terminate() waits out term_timeout; once the user
    has insisted (third Ctrl-C) it is SIGKILLed at once, and reaped."""
    from servers.interrupts import Interrupts

    child = spawn(["/bin/sh", "-c", "trap '' TERM; sleep 60"], env={})
    gate = Interrupts(say=lambda _: None, detach=lambda: None)
    gate.install()
    try:
        for _ in range(3):
            gate.handle(signal.SIGINT)
        t0 = time.monotonic()
        ended = child.terminate(term_timeout=30)
        took = time.monotonic() - t0
    finally:
        gate.uninstall()
        child.terminate(term_timeout=1)
    # escalated at once: it did not wait the 30 s grace the TERM-ignoring child would have had
    assert ended.signal == signal.SIGKILL and took < 30
    assert _state(child.pid) in ("gone",) or _state(child.pid) != "Z"


def test_terminate_returns_only_when_what_the_child_forked_is_gone_too(tmp_path):
    # mariadb-install-db's shape: a script that dies at once on SIGTERM, and a child of it that
    # takes a while to stop and writes on meanwhile (the bootstrap server: 0.7 s measured). The
    # caller removes the directory right after terminate(); nothing may still write into it.
    done = tmp_path / "written-after-sigterm"
    writer = (
        "import signal, sys, time\n"
        "def late(*_):\n"
        "    time.sleep(0.7)\n"
        f"    open({str(done)!r}, 'w').write('x')\n"
        "    sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, late)\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )
    log = tmp_path / "out.log"
    child = spawn(
        ["/bin/sh", "-c", f'{sys.executable} -c "$W" & wait'],
        env={"W": writer},
        stdout=log,
        stderr=log,
    )
    deadline = time.monotonic() + 20
    while "ready" not in (log.read_text() if log.exists() else ""):
        assert time.monotonic() < deadline, "the writer never started"
        time.sleep(0.05)
    ended = child.terminate(term_timeout=10)
    assert ended.signal == signal.SIGTERM  # the script died at once, as the real one does
    assert done.read_text() == "x"  # the writer finished before terminate returned
    ps = subprocess.run(["ps", "-eo", "pgid=,stat="], capture_output=True, text=True).stdout
    # a zombie waiting for init to reap it is gone in every way that matters
    assert [ln for ln in ps.splitlines() if ln.split()[0] == str(child.pid) and "Z" not in ln] == []
