"""A real soak on the host's MariaDB 10.11 (issue 34 item 2): `run --soak 2m` of a small copy of
the fragmentation smoke suite under glibc and jemalloc, two scenarios soaked apart (a minute
each), the runner killed with SIGKILL once both arms have checkpointed cycles of the first, then
`--resume`d to the end; and a soak of three scenarios together, interrupted with Ctrl-C.

The oracles: the run's own records (one cell = one server life, its cycles numbered on without a
gap; every arm's server alive while the other's ran; the break recorded where the last checkpoint
was), the verdicts file (growth in MB/h, no ratio), the manifest's looks (their spending within
5%), and /proc (no process of the run outlives it)."""

from __future__ import annotations

import json
import re
import signal
from collections import defaultdict

import pytest

from analysis import soak_looks
from tests.integration.runs_helpers import (
    mallocsweep,
    manifest,
    processes_mentioning,
    run_dir_of,
    scratch_dir,
    start_run,
    wait_for,
)

pytestmark = pytest.mark.integration

SUITE = """
[suite]
name = "soak-test"
kind = "fragmentation"
[server]
buffer_pool_mb = 32
[allocators]
use = ["glibc", "jemalloc"]
[dataset]
tables = 1
table_size = 1000
[warmup]
min_s = 1
cap_s = 2
threads = 2
scan = false
[fragmentation]
scenarios = ["dump", "session_churn", "fulltext"]
cycle_s = 1
soak_look_s = 30
[dump]
background_threads = 1
[session_churn]
threads = 2
statements = 2
rows = 200
thread_cache_sizes = [2]
[fulltext]
docs = 300
words = 10
vocabulary = 200
threads = 2
"""
# Two scenarios soaked apart: each in lives of its own, one after the other, a minute each
APART = SUITE.replace('"session_churn", "fulltext"]', '"fulltext"]\nsoak_scenarios = "apart"')
CYCLE = re.compile(r"^(?P<wl>.+)@\d+#c(?P<k>\d+)$")


def _checkpointed(run_dir, cycles: int):
    cps = list((run_dir / "checkpoints").glob("*/head.json")) if run_dir.exists() else []
    got = []
    for p in cps:
        try:
            got.append(json.loads(p.read_text()).get("cycles") or 0)
        except (OSError, ValueError):
            return False
    return len(got) == 2 and min(got) >= cycles


def test_soak_killed_resumed_and_judged_per_scenario_in_mb_per_hour(dataset_cache):
    with scratch_dir("ms-soak-") as out:
        suite = out / "soak.toml"
        suite.write_text(APART)
        proc = start_run([str(suite), "--soak", "2m", "--out", str(out / "runs")], dataset_cache)
        try:
            rd = run_dir_of(out / "runs")
            wait_for(lambda: _checkpointed(rd, 3), 300, "both arms' checkpoints with 3 cycles")
            proc.send_signal(signal.SIGKILL)
            proc.wait(30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(30)
        # the servers die with the runner (their parent-death signal): nothing of the run is left
        wait_for(lambda: not processes_mentioning(str(out)), 60, "the killed run's processes")
        before = {
            p.parent.name: json.loads(p.read_text())
            for p in (rd / "checkpoints").glob("*/head.json")
        }

        r = mallocsweep(["run", str(suite), "--resume", str(rd)], cache=dataset_cache, timeout=900)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        assert not processes_mentioning(str(out)), "a process outlived the resumed soak"

        m = manifest(rd)
        soak = m["soak"]
        cells = m["cells"]
        assert [c["status"] for c in cells] == ["ok"] * 6, [c.get("error") for c in cells]
        by_seg = defaultdict(dict)
        for c in cells:
            by_seg[c["soak"]["segment"]][c["allocator"]["name"]] = c
        assert sorted(by_seg) == [1, 2, 3] and all(len(v) == 2 for v in by_seg.values())
        # the first stage (dump) broke and went on in new lives of dump; then fulltext's lives
        assert [x.get("scenario") for x in soak["segments"]] == ["dump", "dump", "fulltext"]

        # the break: each first segment kept exactly the cycles of its last checkpoint, says why
        for alloc, c in by_seg[1].items():
            s = c["soak"]
            assert "killed" in s["ended"], s
            assert s["cycles"] == before[c["id"]]["cycles"] >= 3
            assert s["broken_after"] == c["levels"][-1]["phase"]
            assert any("broken" in w for w in c.get("warnings", [])), alloc
        assert soak["segments"][0]["ended"].startswith("the runner was killed")
        assert not list((rd / "checkpoints").iterdir()), "checkpoints left behind"

        for seg, arms in by_seg.items():
            a, b = arms["glibc"], arms["jemalloc"]
            want = "fulltext" if seg == 3 else "dump"
            # one server life per cell, its scenario alone: its cycles numbered 1, 2, ... no gap
            for c in (a, b):
                assert c["soak"]["scenario"] == want, c["soak"]
                ks = [int(CYCLE.match(x["phase"])["k"]) for x in c["levels"]]
                assert {CYCLE.match(x["phase"])["wl"] for x in c["levels"]} == {want}
                assert ks == list(range(1, len(ks) + 1)), ks
                raw = json.loads((rd / "raw" / f"{c['id']}.json").read_text())
                # past its first block it waited while the other arm ran: the arms took turns
                if len(c["levels"]) > 1:
                    waits = [p for p in raw["phases"] if p.startswith("soak_wait#")]
                    assert waits, list(raw["phases"])
            # both servers alive at once: each life started before the other ended
            assert a["started_at"] < b["finished_at"] and b["started_at"] < a["finished_at"]
            assert a["server"]["pid"] != b["server"]["pid"]

        # each stage had its share: the second what the first left, and its own looks and 5%
        first, second = soak["stages"]
        assert (first["scenario"], second["scenario"]) == ("dump", "fulltext")
        assert first["seconds"] == pytest.approx(soak["seconds"] / 2, abs=0.2)
        assert second["seconds"] == pytest.approx(soak["seconds"] - second["from_s"], abs=0.2)
        for stage in (first, second):
            assert stage["stopped"] and stage["looks"], stage
            assert [x["look"] for x in stage["looks"]] == sorted(
                {x["look"] for x in stage["looks"]}
            )
            assert sum(1 - x["level"] for x in stage["looks"]) <= 0.05 + 1e-9
        assert soak["stopped"].startswith("every scenario soaked apart: dump ")
        assert by_seg[3]["glibc"]["soak"]["ended"] == f"stage 'fulltext': {second['stopped']}"

        verdicts = (rd / "verdicts.csv").read_text().splitlines()
        head = verdicts[0].split(",")
        rows = [dict(zip(head, v.split(","), strict=False)) for v in verdicts[1:]]
        growth = [v for v in rows if v["metric"].endswith("_growth_mb_per_hour")]
        # judged per scenario: each scenario's own lives, once per arm and metric
        assert {v["workload"] for v in growth} == {"dump", "fulltext"}, growth
        keys = [(v["workload"], v["allocator"], v["metric"]) for v in growth]
        assert len(keys) == len(set(keys)), keys
        for v in growth:
            assert v["unit"] == "MB/h" and v["ratio"] == "" and v["difference"] != ""
            assert float(v["diff_lo"]) <= float(v["difference"]) <= float(v["diff_hi"])
            # at its own stage's look: the one it stopped at, judged on the same cycles
            stage = first if v["workload"] == "dump" else second
            k = len(stage["looks"]) if stage["judged_at_end"] else len(stage["looks"]) + 1
            level = soak_looks.look_level(k, stage["looks_planned"])
            assert float(v["level"]) == pytest.approx(level, abs=1e-4)
        last = second["looks"][-1]
        if second["judged_at_end"]:
            mine = [v for v in growth if v["workload"] == "fulltext"]
            decided = [v for v in mine if v["verdict"] != "undecided"]
            assert (last["verdicts"], last["decided"]) == (len(mine), len(decided))
        summary = (rd / "summary.md").read_text()
        assert "BROKE" in summary and "one server life per arm" in summary


def test_an_interrupted_soak_records_every_arm_with_its_break(dataset_cache):
    """Ctrl-C (SIGINT) mid-soak: every arm's server stopped, its cycles recorded at once from
    its last checkpoint as an ok cell saying where and why its series broke; exit 130."""
    with scratch_dir("ms-soak-int-") as out:
        suite = out / "soak.toml"
        suite.write_text(SUITE)
        proc = start_run([str(suite), "--soak", "2m", "--out", str(out / "runs")], dataset_cache)
        try:
            rd = run_dir_of(out / "runs")
            wait_for(lambda: _checkpointed(rd, 3), 300, "both arms' checkpoints with 3 cycles")
            proc.send_signal(signal.SIGINT)
            assert proc.wait(120) == 130, proc.stderr.read()[-2000:]
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(30)
        assert not processes_mentioning(str(out)), "a process outlived the interrupted soak"
        m = manifest(rd)
        assert m["status"] == "interrupted"
        assert len(m["cells"]) == 2
        for c in m["cells"]:
            assert c["status"] == "ok", c.get("error")
            s = c["soak"]
            assert s["ended"] == "interrupted by SIGINT" and s["cycles"] >= 3
            assert s["broken_after"] == c["levels"][-1]["phase"]
            assert c["exit"] is not None  # stopped, not killed: its exit was recorded
            cell = json.loads((rd / "cells" / f"{c['id']}.json").read_text())
            assert len(cell["rows"]) == s["cycles"]
        assert m["soak"]["segments"][0]["ended"] == "interrupted by SIGINT"
        assert not list((rd / "checkpoints").iterdir())
