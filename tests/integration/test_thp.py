"""THP as a matrix dimension on a real server (issue 7): set per cell, read back, always restored;
`never` per server via prctl when sysfs cannot be written; what MariaDB does to its own THP."""

from __future__ import annotations

import json
import os
import shutil
import signal
import tempfile
from pathlib import Path

import pytest

from suites import thp as thpmod
from suites.cli import main
from tests.integration.runs_helpers import manifest, results, run_dir_of, start_run, wait_for

pytestmark = [
    pytest.mark.integration,
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
    d = Path(tempfile.mkdtemp(prefix="ms-thp-", dir="/tmp"))
    monkeypatch.setenv("MALLOCSWEEP_CACHE", "/tmp/ms-thp-cache")
    monkeypatch.setenv("MALLOCSWEEP_STATE", str(d / "state"))
    before = thpmod.current()
    yield d
    after = thpmod.current()
    shutil.rmtree(d, ignore_errors=True)
    assert after == before, f"THP left changed: {before} -> {after}"


def suite_file(d: Path, modes, keep=False, pool=64, duration=2, allocators=("glibc",)) -> Path:
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


def test_always_is_in_force_during_the_cell_and_restored_after(work):
    original = thpmod.current()
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
    cell = manifest(run_dir)["cells"][0]
    assert cell["thp"]["method"] == "sysfs"
    assert cell["thp"]["in_force"]["enabled"] == "always"  # read back, not assumed
    assert cell["host_at_start"]["thp"]["enabled"] in ("always", original["enabled"])
    assert thpmod.current() == original
    # MariaDB turns THP off for itself after mapping its buffer pool: recorded per process.
    assert cell["thp"]["process_thp_enabled"] == 0
    # The buffer pool, mapped before that, did get hugepages under `always`.
    rows = results(run_dir)
    assert max(int(r["anon_huge_kb"] or 0) for r in rows) > 0, rows


def test_sigint_mid_cell_restores_thp(work):
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
        proc.send_signal(signal.SIGINT)
        proc.wait(120)
        assert proc.returncode == 130
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert thpmod.current() == original
    assert thpmod.leftover() is None
    assert manifest(run_dir)["thp_restored"]["enabled"] == original["enabled"]


def test_never_by_prctl_when_sysfs_cannot_be_written(work, monkeypatch):
    """With the keep_thp shim the server cannot switch THP off itself, so THP_enabled 0 is ours."""
    monkeypatch.setattr(thpmod, "writable", lambda sysfs=None: False)
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
    cells = manifest(next((work / "runs").iterdir()))["cells"]
    assert len(cells) == 4 and all(c["status"] == "ok" for c in cells), [
        c.get("error") for c in cells
    ]
    for c in cells:
        assert "keep_server_thp" in c["experiment"]
        if c["thp"]["requested"] == "never":
            assert c["thp"]["method"] == "prctl"
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
