"""The alternate design on real MariaDB: glibc and its A/A arm (`glibc-aa`) alive together in
every round, each level run on them in turn in short blocks, through `mallocsweep run --design
alternate`. Checked: every life proven and stopped, both servers alive through every block of
the round (the blocks of one round interleave on the wall clock, one arm loaded at a time, the
rotation as planned), the level's steady rate derived from its blocks, the verdict computed from
them with the design recorded in the manifest, verdicts.csv and the report; a resume that
re-runs a whole pending round, and the refusal of a half-done one. Nothing asserts how close
the A/A ratio came to 1 (the machine's noise is what it is)."""

from __future__ import annotations

import csv
import json
import math
import shutil
import signal
from datetime import datetime
from pathlib import Path

import pytest

from rundir.derive.blocks import cpu_us_per_op, level_rate, pair_log_ratios
from rundir.read import load_run
from suites.cli.main import main
from suites.runner.alternate import schedule
from tests.integration.runs_helpers import (
    kill_quietly,
    manifest,
    processes_mentioning,
    run_dir_of,
    run_in_process,
    scratch_dir,
    small_suite,
    start_run,
    wait_for,
)
from tests.integration.test_reliability import alive, descendants

pytestmark = pytest.mark.integration

BLOCK_S, BLOCKS = 3, 2
SUITE = small_suite(
    "alternate",
    "alternate design: glibc and its A/A arm in blocks",
    sysbench={"threads": [4]},
    run={"repeat": 2, "aa": True, "design": "alternate", "block_s": BLOCK_S, "blocks": BLOCKS},
)


@pytest.fixture(scope="module")
def alt_run(dataset_cache):
    with run_in_process("ms-alt-", SUITE, "--quiet", cache=dataset_cache) as run:
        code, run_dir = run
        kept = Path(str(run_dir) + "-copy")  # for the resume tests, before the scratch goes
        shutil.copytree(run_dir, kept)
        yield code, run_dir, kept
        shutil.rmtree(kept, ignore_errors=True)


def _raw(run_dir: Path) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in (run_dir / "raw").glob("*.json")}


def _at(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


def test_every_life_proven_and_the_design_recorded(alt_run):
    code, run_dir, _ = alt_run
    assert code == 0
    m = manifest(run_dir)
    assert m["run_design"] == {"name": "alternate", "block_s": BLOCK_S, "blocks": BLOCKS}
    cells = m["cells"]
    assert len(cells) == 4 and all(c["status"] == "ok" for c in cells)
    assert all(c["verification"]["verdict"] == "verified" for c in cells)
    assert all(c["exit"] is not None for c in cells)  # each life reaped: its own wait4
    assert "alternate" in (run_dir / "summary.md").read_text()
    assert processes_mentioning(str(run_dir)) == []


def test_both_servers_alive_through_every_block_of_the_round(alt_run):
    _, run_dir, _ = alt_run
    m = manifest(run_dir)
    raw = _raw(run_dir)
    for rnd in (1, 2):
        cells = [c for c in m["cells"] if c["round"] == rnd]
        blocks = []  # (started_at, ended_at, allocator, index, position)
        for c in cells:
            (level,) = raw[c["id"]]["levels"]
            assert len(level["blocks"]) == BLOCKS
            assert [b["index"] for b in level["blocks"]] == list(range(BLOCKS))
            assert all(b["status"] == "ok" and b["intervals"] for b in level["blocks"])
            blocks += [
                (b["started_at"], b["ended_at"], c["allocator"]["name"], b["index"], b["position"])
                for b in level["blocks"]
            ]
        first, last = min(b[0] for b in blocks), max(b[1] for b in blocks)
        for c in cells:
            # Every server's timeline (the sampler reads its /proc/PID once a second: only a live
            # process gives a sample) has samples in the level's phase from before the round's
            # first block to after its last: alive, idle or loaded, through all of them.
            (level,) = raw[c["id"]]["levels"]
            b0 = level["blocks"][0]
            spawned = b0["started_at"] - b0["start_s"]  # the cell's clock on the wall clock
            with (run_dir / c["samples_file"]).open() as f:
                seen = [spawned + float(r["t_s"]) for r in csv.DictReader(f)
                        if r["phase"] == level["phase"]]  # fmt: skip
            assert seen and min(seen) < first + 1.5 and max(seen) > last - 1.5, c["id"]
            assert _at(c["started_at"]) <= first and _at(c["finished_at"]) + 1 >= last, c["id"]
        blocks.sort()
        for a, b in zip(blocks, blocks[1:], strict=False):
            assert a[1] <= b[0] + 1e-3, (a, b)  # one arm loaded at a time
        # the rotation as planned: cycle k in row round + k of the Williams design
        arms = [c["allocator"]["name"] for c in sorted(cells, key=lambda c: c["index"])]
        order = [b[2] for b in blocks]
        assert order == [a for cycle in schedule(arms, rnd, BLOCKS) for a in cycle]
        for _, _, name, k, pos in blocks:
            assert schedule(arms, rnd, BLOCKS)[k][pos] == name


def test_the_verdict_comes_from_the_pairs(alt_run):
    _, run_dir, _ = alt_run
    run = load_run(run_dir)
    raw = _raw(run_dir)
    rows = {(r["allocator"], r["repeat"]): r for r in run.ok_rows}
    per_round = []
    for rnd in (1, 2):
        ids = {r["allocator"]: r["cell"] for (a, rr), r in rows.items() if rr == rnd}
        base = raw[ids["glibc"]]["levels"][0]["blocks"]
        aa = raw[ids["glibc-aa"]]["levels"][0]["blocks"]
        for name, blocks in (("glibc", base), ("glibc-aa", aa)):
            assert rows[(name, rnd)]["steady_qps"] == pytest.approx(level_rate(blocks), rel=1e-3)
            # the server's CPU read around each block: the level's CPU per query is the blocks'
            assert all(b["cpu_s"] > 0 for b in blocks), blocks
            assert rows[(name, rnd)]["cpu_us_per_op"] == pytest.approx(
                cpu_us_per_op(blocks), rel=1e-3
            )
            assert rows[(name, rnd)]["cpu_us_per_op"] > 0
        logs = pair_log_ratios(base, aa)
        assert len(logs) == BLOCKS
        per_round.append(sum(logs) / len(logs))
    verdicts = list(csv.DictReader((run_dir / "verdicts.csv").open()))
    assert verdicts and {v["design"] for v in verdicts} == {"alternate"}
    (tp,) = [v for v in verdicts if v["metric"] == "throughput"]
    assert tp["allocator"] == "glibc-aa" and int(tp["rounds"]) == 2
    # the round is the unit: the ratio is exp(mean over rounds of each round's mean log pair ratio)
    want = math.exp(sum(per_round) / len(per_round))
    assert float(tp["ratio"]) == pytest.approx(want, rel=2e-3)
    assert float(tp["lo"]) <= float(tp["ratio"]) <= float(tp["hi"])


def _resume(run_dir: Path) -> int:
    return main(["run", str(run_dir.parent / "suite.toml"), "--resume", str(run_dir), "--quiet"])


def test_resume_reruns_a_whole_pending_round(alt_run, dataset_cache, monkeypatch):
    """Round 2 as a run interrupted before its cells were written leaves it: resumed, it runs
    again as an alternate round of both arms."""
    _, _, kept = alt_run
    with scratch_dir("ms-alt-resume-") as d:
        run_dir = d / kept.name
        shutil.copytree(kept, run_dir)
        (d / "suite.toml").write_text(SUITE)
        m = json.loads((run_dir / "manifest.json").read_text())
        for c in m["cells"]:
            if c["round"] == 2:
                _mark(run_dir, c, "interrupted")  # what a signal leaves: resumed, run again
                (run_dir / "raw" / f"{c['id']}.json").unlink()
        m["status"] = "interrupted"
        (run_dir / "manifest.json").write_text(json.dumps(m))
        monkeypatch.setenv("MALLOCSWEEP_CACHE", str(dataset_cache))
        assert _resume(run_dir) == 0
        again = manifest(run_dir)
        assert all(c["status"] == "ok" for c in again["cells"])
        raw = _raw(run_dir)
        assert all(len(raw[c["id"]]["levels"][0]["blocks"]) == BLOCKS for c in again["cells"])
        assert processes_mentioning(str(d)) == []


def _mark(run_dir: Path, entry: dict, status: str) -> None:
    """The cell recorded as the runner records one that did not finish: its record with the
    status, no rows (suites.runner.matrix.record_interrupted)."""
    path = run_dir / "cells" / f"{entry['id']}.json"
    rec = json.loads(path.read_text())
    rec["cell"]["status"] = entry["status"] = status
    rec["cell"]["error"] = entry["error"] = f"{status} (made by the test)"
    rec["rows"] = []
    path.write_text(json.dumps(rec))


def test_resume_refuses_a_half_done_round(alt_run, capsys):
    _, _, kept = alt_run
    with scratch_dir("ms-alt-half-") as d:
        run_dir = d / kept.name
        shutil.copytree(kept, run_dir)
        (d / "suite.toml").write_text(SUITE)
        m = json.loads((run_dir / "manifest.json").read_text())
        victim = next(
            c for c in m["cells"] if c["round"] == 2 and c["allocator"]["name"] == "glibc-aa"
        )
        _mark(run_dir, victim, "failed")  # its server died in the round; glibc's cell is ok
        m["status"] = "interrupted"
        (run_dir / "manifest.json").write_text(json.dumps(m))
        before = sorted(p.name for p in run_dir.rglob("*"))
        assert _resume(run_dir) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "round 2 of this alternate run is half done" in err[0], err
        assert "glibc-aa" in err[0]
        assert sorted(p.name for p in run_dir.rglob("*")) == before  # nothing written


def test_sigint_in_a_block_stops_every_server_then_resume_finishes(out, dataset_cache):
    """Ctrl-C while the round's servers are all alive and one is loaded: every server and load
    generator is stopped, the round's cells are recorded interrupted, and --resume runs the
    round again as a whole."""
    suite = out / "alternate.toml"
    suite.write_text(SUITE)
    proc = start_run([str(suite), "--out", str(out)], dataset_cache)
    try:
        run_dir = run_dir_of(out)

        def second_arm_in_a_block():
            cells = manifest(run_dir)["cells"]
            logs = run_dir / "logs" / cells[1]["id"]
            return any(logs.glob("*.block1.log"))

        wait_for(second_arm_in_a_block, 240, "the second arm's first block")
        procs = descendants(proc.pid)
        servers = [p for p in procs if "mariadbd" in Path(f"/proc/{p}/cmdline").read_text()]
        assert len(servers) == 2, "both arms' servers alive together"
        proc.send_signal(signal.SIGINT)
        proc.wait(120)
        assert proc.returncode == 130, proc.stderr.read()
        assert wait_for(lambda: not [p for p in procs if alive(p)], 30, "children to be gone")
        m = manifest(run_dir)
        assert m["status"] == "interrupted"
        assert [c["status"] for c in m["cells"] if c["round"] == 1] == ["interrupted"] * 2
    finally:
        kill_quietly(proc)
    resumed = start_run([str(suite), "--resume", str(run_dir)], dataset_cache)
    try:
        resumed.wait(300)
        assert resumed.returncode == 0, resumed.stderr.read()
    finally:
        kill_quietly(resumed)
    m = manifest(run_dir)
    assert m["status"] == "finished" and all(c["status"] == "ok" for c in m["cells"])
    raw = _raw(run_dir)
    assert all(len(raw[c["id"]]["levels"][0]["blocks"]) == BLOCKS for c in m["cells"])
    assert processes_mentioning(str(run_dir)) == []
