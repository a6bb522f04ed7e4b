"""compare on recorded real runs with repeats (tests/fixtures/runs/record/record.sh made them):
a real, deliberately ~12% slower run is a regression; the same configuration twice is not."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from analysis.compare import NO_CHANGE, SLOWER, compare_runs

RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "runs"
BASE_A, BASE_B, SLOW = (
    RUNS / n for n in ("real-regress-base-a", "real-regress-base-b", "real-regress-slow")
)
REPO = Path(__file__).resolve().parents[2]


def test_fixtures_are_real_runs_with_repeats():
    for run in (BASE_A, BASE_B, SLOW):
        m = json.loads((run / "manifest.json").read_text())
        assert m["status"] == "finished" and not m["run_id"].startswith("synthetic")
        assert all(c["status"] == "ok" for c in m["cells"])
    assert json.loads((SLOW / "manifest.json").read_text())["suite"]["sysbench"]["rate"] > 0


def test_the_deliberately_slower_run_is_a_regression():
    cmp = compare_runs(BASE_A, SLOW, threshold_pct=5.0)
    (point,) = cmp.points
    assert point.verdict == SLOWER and point.regression and not point.weak
    assert point.hi < 1.0  # significant: the interval excludes "no change"
    assert 0.80 < point.ratio < 0.95
    assert cmp.exit_code == 1


def test_the_same_configuration_twice_is_not_a_regression():
    cmp = compare_runs(BASE_A, BASE_B, threshold_pct=5.0)
    (point,) = cmp.points
    assert point.verdict == NO_CHANGE and not point.weak and point.evidence == "repeats 5+5"
    assert point.lo < 1.0 < point.hi
    assert cmp.exit_code == 0
    assert not any("sysbench.rate" in w for w in cmp.warnings)  # same settings: nothing to warn


def test_a_different_suite_setting_is_warned():
    """The slow run differs from the baseline in sysbench.rate only (and run.repeat, which the
    evidence rules account for): that one setting is named."""
    cmp = compare_runs(BASE_A, SLOW)
    diffs = [w for w in cmp.warnings if "suite setting differs" in w]
    assert len(diffs) == 1 and "sysbench.rate = 0 (base) vs 91026 (new)" in diffs[0]


@pytest.mark.parametrize("new, code", [(SLOW, 1), (BASE_B, 0)])
def test_cli_exit_codes(tmp_path, new, code):
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "suites.cli.main",
            "compare",
            str(BASE_A),
            str(new),
            "--json",
            "--out",
            str(tmp_path),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert r.returncode == code, r.stderr
    verdicts = json.loads(r.stdout)
    assert verdicts and len(list(tmp_path.glob("compare-*-vs-*.md"))) == 1
    assert len(list(tmp_path.glob("compare-*-vs-*.html"))) == 1
