"""`--resume` finishes every arm a run plans (issue 35): an A/A arm (once refused with "unknown
allocator 'glibc-aa'"), an allocator variant, a run of several servers. Each run is interrupted
for real (SIGINT, or SIGKILL of the runner) in its first cell's first level, so every later cell,
the special arm among them, is left for --resume to plan again; kept short (one thread level,
three-second levels, the smoke dataset). Also what the user is told: a Ctrl-C prints the run
directory and the command that finishes it, and `report` on a run whose runner was killed says
"interrupted" with that command, not "running"."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.runs_helpers import (
    REPO,
    kill_quietly,
    manifest,
    run_dir_of,
    server_pid,
    start_run,
    wait_for,
)

pytestmark = pytest.mark.integration

SMOKE = REPO / "configs/suites/smoke.toml"
SHORT = ["--threads", "4", "--duration", "3"]


def in_first_level(run_dir: Path) -> bool:
    cells = manifest(run_dir)["cells"]
    logs = run_dir / "logs" / cells[0]["id"]
    return bool(any(logs.glob("*@*.log")) and server_pid(run_dir))


def owned_scratch(pid: int) -> list[Path]:
    """The /tmp directories of process `pid` (servers/scratch.py names them after their owner)."""
    return [p for p in Path("/tmp").glob(f"ms-*-{pid}.*-*") if p.is_dir()]


def suite_with_aa(out: Path) -> str:
    path = out / "aa.toml"
    path.write_text(SMOKE.read_text() + "\n[run]\naa = true\n")
    return str(path)


def interrupt_then_resume(args: list[str], suite: str, out: Path, cache: Path, sig) -> dict:
    """Run `suite` with `args`, send `sig` in the first level, check what was said, resume
    without options and return the final manifest."""
    proc = start_run([suite, "--out", str(out), *SHORT, *args], cache)
    try:
        run_dir = run_dir_of(out)
        wait_for(lambda: in_first_level(run_dir), 300, "the first level to start")
        if sig == signal.SIGKILL:  # killed while its level's clients run from their scratch
            wait_for(lambda: owned_scratch(proc.pid), 60, "the level's scratch in /tmp")
        proc.send_signal(sig)
        proc.wait(180)
        err = proc.stderr.read()
    finally:
        kill_quietly(proc)
    m = manifest(run_dir)
    planned = [c["allocator"]["name"] for c in m["cells"]]
    if sig == signal.SIGINT:
        assert proc.returncode == 130, err
        # the directory and the command that finishes it, on the interrupt's line
        assert f"run directory {run_dir}" in err, err
        assert f"--resume {run_dir}" in err and "Traceback" not in err, err
    else:
        assert proc.returncode == -signal.SIGKILL
        wait_for(lambda: not server_pid(run_dir), 60, "the killed runner's server to go")
        said = report(run_dir)
        assert said.returncode == 0, said.stderr
        assert "INTERRUPTED by the loss of its runner" in said.stderr, said.stderr
        assert f"--resume {run_dir}" in said.stderr, said.stderr
        assert "is running" not in said.stderr
    resumed = start_run([suite, "--resume", str(run_dir)], cache)
    try:
        resumed.wait(900)
        err = resumed.stderr.read()
        assert resumed.returncode == 0, err
    finally:
        kill_quietly(resumed)
    # The killed runner had a level scratch in /tmp (waited for above) and no finally removed it;
    # the next run to make one (this resume, or any other run meanwhile) did: a directory named
    # after a dead owner does not stay.
    assert owned_scratch(proc.pid) == [] and owned_scratch(resumed.pid) == []
    m = manifest(run_dir)
    assert m["status"] == "finished", m.get("error")
    assert [c["status"] for c in m["cells"]] == ["ok"] * len(m["cells"])
    # a budget may have added rounds after the planned ones
    assert [c["allocator"]["name"] for c in m["cells"]][: len(planned)] == planned
    return m


def report(run_dir: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "suites.cli.main", "report", str(run_dir)],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_an_aa_arm_is_resumed_and_its_budget_goes_on(out, dataset_cache):
    """Also the budget (issue 34): a resumed run once added no rounds ("the budget adds no rounds
    to a resumed run"); now its budget looks after the planned rounds, with the design recorded
    before the first round."""
    m = interrupt_then_resume(
        ["--allocators", "glibc", "--repeat", "2", "--budget", "2m"],
        suite_with_aa(out),
        out,
        dataset_cache,
        signal.SIGINT,
    )
    arms = {c["allocator"]["name"] for c in m["cells"]}
    assert arms == {"glibc", "glibc-aa"}
    aa = next(c for c in m["cells"] if c["allocator"]["name"] == "glibc-aa")
    assert aa["verification"]["verdict"] == "verified"
    design = m["design"]
    looks = design.get("looks") or []
    assert looks and looks[0]["rounds"] == 2, design
    assert "decided" in looks[0]["message"] and design.get("stopped"), design
    rounds = {c["round"] for c in m["cells"]}
    assert max(rounds) <= design["max_rounds"] and len(looks) == max(rounds) - 1


def test_a_variant_is_resumed_after_the_runner_was_killed(out, dataset_cache):
    m = interrupt_then_resume(
        ["--allocators", "glibc,glibc-arena1"], str(SMOKE), out, dataset_cache, signal.SIGKILL
    )
    variant = next(c for c in m["cells"] if c["allocator"]["name"] == "glibc-arena1")
    assert variant["allocator"]["tunables"] == ["glibc.malloc.arena_max=1"]


def test_several_servers_are_resumed(out, dataset_cache):
    m = interrupt_then_resume(
        ["--allocators", "glibc", "--servers", "a=host,b=host"],
        str(SMOKE),
        out,
        dataset_cache,
        signal.SIGINT,
    )
    names = sorted((c["server"] or {}).get("name") for c in m["cells"])
    assert names == ["a", "b"]
