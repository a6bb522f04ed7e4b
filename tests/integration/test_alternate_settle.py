"""Blocks that settle (`[run] block_settle_cap_s`, docs/designs.md) on real MariaDB: glibc and its
A/A arm alive together, each block run until block_s seconds of reports follow its ramp, at most
block_s + the cap. Checked: the cap is recorded in the manifest's run_design; every block ran
past block_s (its first report is its ramp, and the rule needs block_s seconds after it) and
stopped by the cap at the latest; the levels still derive a steady rate from their blocks and
the verdicts come from them. Nothing asserts how long a ramp lasted (the machine's load decides)."""

from __future__ import annotations

import csv
import json

import pytest

from rundir.read import load_run
from tests.integration.runs_helpers import (
    manifest,
    processes_mentioning,
    run_in_process,
    small_suite,
)

pytestmark = pytest.mark.integration

BLOCK_S, BLOCKS, CAP = 3, 2, 4
SUITE = small_suite(
    "alternate-settle",
    "alternate design with blocks that settle",
    sysbench={"threads": [4]},
    run={"repeat": 2, "aa": True, "design": "alternate", "block_s": BLOCK_S, "blocks": BLOCKS,
         "block_settle_cap_s": CAP},
)  # fmt: skip


def test_blocks_run_until_their_ramp_is_over_within_the_cap(dataset_cache):
    with run_in_process("ms-alts-", SUITE, "--quiet", cache=dataset_cache) as (code, run_dir):
        assert code == 0
        m = manifest(run_dir)
        assert m["run_design"] == {
            "name": "alternate", "block_s": BLOCK_S, "blocks": BLOCKS, "block_settle_cap_s": CAP,
        }  # fmt: skip
        assert all(c["status"] == "ok" for c in m["cells"]) and len(m["cells"]) == 4
        blocks = [
            b
            for p in (run_dir / "raw").glob("*.json")
            for lv in json.loads(p.read_text())["levels"]
            for b in lv["blocks"]
        ]
        assert len(blocks) == 4 * BLOCKS  # cells x blocks (one level)
        for b in blocks:
            assert b["status"] == "ok"
            times = [t for t, _ in b["intervals"]]
            # the first report, then at least block_s seconds of reports after the ramp
            assert times[-1] >= BLOCK_S + 1 - 1e-6, times
            # never past the planned --time (block_s + cap): at most that many one-second reports.
            # A report's stamp is when sysbench's timer fired, late by milliseconds on a busy
            # machine (7.008 for the 7th of a 7-second block in a clean-clone make test), so the
            # count is the guarantee, and the stamp stays within half an interval of it.
            assert len(times) <= BLOCK_S + CAP and times[-1] < BLOCK_S + CAP + 0.5, times
        run = load_run(run_dir)
        rows = [r for r in run.ok_rows if r["workload"] == "point_select"]
        assert rows and all(float(r["steady_qps"]) > 0 for r in rows)
        verdicts = list(csv.DictReader((run_dir / "verdicts.csv").open()))
        tp = [v for v in verdicts if v["metric"] == "throughput"]
        assert {v["threads"] for v in tp} == {"4"} and {v["design"] for v in tp} == {"alternate"}
        assert processes_mentioning(str(run_dir)) == []
