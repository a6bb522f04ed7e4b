"""THP as a matrix dimension on a real server (issue 7): set per cell, read back, always restored;
`never` per server via prctl when sysfs cannot be written; what MariaDB does to its own THP."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from suites.cli.main import main
from suites.runner import thp as thpmod
from tests.integration.runs_helpers import (
    kill_quietly,
    manifest,
    results,
    run_dir_of,
    scratch_dir,
    server_pid,
    start_run,
    wait_for,
)

ENABLED = thpmod.SYSFS / "enabled"

pytestmark = [
    pytest.mark.integration,
    pytest.mark.system_settings,  # sets THP always/madvise system-wide for its cells
    pytest.mark.skipif(
        not thpmod.writable(), reason="THP sysfs is not writable: these tests need root"
    ),
]

SUITE = """
[suite]
name = "thp-test"
[server]
buffer_pool_mb = {pool}
[allocators]
use = {allocators}
[thp]
modes = {modes}
keep_server_thp = {keep}
[dataset]
tables = 1
table_size = 2000
[warmup]
min_s = 1
cap_s = 2
[sysbench]
workloads = ["point_select"]
threads = [4]
duration_s = {duration}
"""


@pytest.fixture
def work(monkeypatch):
    with scratch_dir("ms-thp-") as d:
        monkeypatch.setenv("MALLOCSWEEP_CACHE", "/tmp/ms-thp-cache")
        monkeypatch.setenv("MALLOCSWEEP_STATE", str(d / "state"))
        before = thpmod.current()
        yield d
        after = thpmod.current()
    assert after == before, f"THP left changed: {before} -> {after}"


def suite_file(d: Path, modes, keep=False, pool=64, duration=3, allocators=("glibc",)) -> Path:
    p = d / "thp.toml"
    p.write_text(
        SUITE.format(
            allocators=json.dumps(list(allocators)),
            modes=json.dumps(modes),
            keep=str(keep).lower(),
            pool=pool,
            duration=duration,
        )
    )
    return p


def other_mode() -> str:
    """A mode that differs from the machine's, so that 'set and restored' is observable."""
    return "always" if thpmod.current()["enabled"] != "always" else "never"


@pytest.fixture
def not_always(work):
    """A system setting other than `always`, so that setting `always` is observable."""
    before = thpmod.current()["enabled"]
    if before == "always":
        ENABLED.write_text("madvise")
    yield thpmod.current()
    ENABLED.write_text(before)


def test_always_is_in_force_during_the_cell_and_restored_after(work, not_always):
    original = not_always
    code = main(
        [
            "run",
            str(suite_file(work, ["always"], pool=256)),
            "--out",
            str(work / "runs"),
            "--quiet",
            "--no-report",
        ]
    )
    assert code == 0
    run_dir = next((work / "runs").iterdir())
    m = manifest(run_dir)
    cell = m["cells"][0]
    assert cell["thp"]["method"] == "sysfs"
    assert cell["thp"]["in_force"]["enabled"] == "always"  # read back after writing, not assumed
    assert cell["host_at_start"]["thp"]["enabled"] == original["enabled"]  # before the cell's write
    assert thpmod.current() == original
    assert m["thp_restored"] == original and thpmod.leftover() is None
    assert not (run_dir / thpmod.PENDING_NAME).exists()
    # MariaDB turns THP off for itself after mapping its buffer pool: recorded per process.
    assert cell["thp"]["process_thp_enabled"] == 0
    # The buffer pool, mapped before that, did get hugepages under `always`.
    rows = results(run_dir)
    assert max(int(r["anon_huge_kb"] or 0) for r in rows) > 0, rows


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_mid_cell_restores_thp(work, sig):
    original = thpmod.current()
    mode = other_mode()
    proc = start_run(
        [str(suite_file(work, [mode], duration=30)), "--out", str(work / "runs")],
        Path("/tmp/ms-thp-cache"),
        state=work / "state",
    )
    try:
        run_dir = run_dir_of(work / "runs")
        wait_for(
            lambda: any((run_dir / "logs").glob("*/point_select@4.log")), 120, "the level to start"
        )
        assert thpmod.current()["enabled"] == mode  # in force while the cell runs
        assert thpmod.leftover()["original"] == original  # recorded for doctor meanwhile
        proc.send_signal(sig)
        proc.wait(120)
        assert proc.returncode == 128 + sig
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert thpmod.current() == original
    assert thpmod.leftover() is None
    m = manifest(run_dir)
    assert m["thp_restored"] == original
    assert m["interrupted_by"] == signal.Signals(sig).name


def test_a_failed_cell_restores_thp(work):
    """The server crashes mid-level (we SIGKILL the mariadbd our run started): the cell fails,
    the run finishes (exit 3), THP comes back."""
    original = thpmod.current()
    mode = other_mode()
    proc = start_run(
        [str(suite_file(work, [mode], duration=30)), "--out", str(work / "runs")],
        Path("/tmp/ms-thp-cache"),
        state=work / "state",
    )
    try:
        run_dir = run_dir_of(work / "runs")
        wait_for(
            lambda: any((run_dir / "logs").glob("*/point_select@4.log")), 120, "the level to start"
        )
        pid = wait_for(lambda: server_pid(run_dir), 30, "the server's pid file")
        assert thpmod.current()["enabled"] == mode
        os.kill(pid, signal.SIGKILL)
        proc.wait(180)
        assert proc.returncode == 3, proc.stderr.read()
    finally:
        kill_quietly(proc)
    m = manifest(run_dir)
    (cell,) = m["cells"]
    assert cell["status"] == "failed" and cell["error"]
    assert cell["thp"]["in_force"]["enabled"] == mode
    assert thpmod.current() == original
    assert m["thp_restored"] == original and thpmod.leftover() is None


def test_an_unexpected_exception_restores_thp(work, monkeypatch, capsys):
    """A bug of ours while the cell has THP changed (in its clean-up after the server stopped,
    before the cell gives THP back): exit 4, THP restored by the run's last clean-up. (A cell
    gives its setting back as soon as its server is reaped, so a bug after that, e.g. in writing
    the finished cell, finds THP already restored.)"""
    from suites.runner.cell import CellRunner

    original = thpmod.current()
    mode = other_mode()
    seen = []

    def broken(self, *a, **k):
        seen.append(thpmod.current()["enabled"])
        raise RuntimeError("synthetic bug in the cell's clean-up")

    monkeypatch.setattr(CellRunner, "_remove_work", broken)
    monkeypatch.delenv("MALLOCSWEEP_DEBUG", raising=False)
    code = main(
        [
            "run",
            str(suite_file(work, [mode])),
            "--out",
            str(work / "runs"),
            "--quiet",
            "--no-report",
        ]
    )
    assert code == 4 and "synthetic bug" in capsys.readouterr().err
    assert seen == [mode]  # the exception came while THP was changed
    assert thpmod.current() == original
    assert thpmod.leftover() is None


def test_never_by_prctl_when_the_sysfs_write_fails(work, monkeypatch):
    """writable() says yes (we are root) but the write itself is refused: `never` falls back to
    PR_SET_THP_DISABLE for each server. With the keep_thp shim the server cannot switch THP off
    itself, so THP_enabled 0 is ours."""
    original = thpmod.current()
    attempts = []

    def refused(self, name, value):
        attempts.append((name, value))
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(thpmod.ThpController, "_write", refused)
    assert thpmod.writable()
    assert (
        main(
            [
                "run",
                # jemalloc too: the shim and the allocator are preloaded together, still verified.
                str(
                    suite_file(
                        work, ["never", "system"], keep=True, allocators=("glibc", "jemalloc")
                    )
                ),
                "--out",
                str(work / "runs"),
                "--quiet",
                "--no-report",
            ]
        )
        == 0
    )
    assert ("enabled", "never") in attempts  # the write was really tried, and failed
    assert thpmod.current() == original and thpmod.leftover() is None
    cells = manifest(next((work / "runs").iterdir()))["cells"]
    assert len(cells) == 4 and all(c["status"] == "ok" for c in cells), [
        c.get("error") for c in cells
    ]
    for c in cells:
        assert "keep_server_thp" in c["experiment"]
        if c["thp"]["requested"] == "never":
            assert c["thp"]["method"] == "prctl"
            assert c["thp"]["in_force"]["enabled"] == thpmod.PRCTL_NEVER
            assert c["thp"]["system"]["enabled"] == original["enabled"]
            assert c["thp"]["process_thp_enabled"] == 0
        else:
            # Control: without our prctl THP stays on (the shim stopped the server's own prctl).
            assert c["thp"]["process_thp_enabled"] == 1
    je = [c for c in cells if c["allocator"]["name"] == "jemalloc"]
    assert all("libjemalloc" in str(c["verification"]) for c in je)


def test_thp_always_refused_without_write_access(work, monkeypatch, capsys):
    monkeypatch.setattr(thpmod, "writable", lambda sysfs=None: False)
    code = main(["run", str(suite_file(work, ["always"])), "--out", str(work / "runs"), "--quiet"])
    assert code == 2
    err = capsys.readouterr().err
    assert "'always' needs write access" in err and "\n" not in err.strip()
    assert not os.path.exists(work / "runs")  # refused before anything was written
