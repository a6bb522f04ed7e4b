"""compare: verdicts, exit codes, warnings and bad input on synthetic run pairs."""

from __future__ import annotations

import json
from html.parser import HTMLParser

import pytest
from fixtures.make_runs import make_run

from analysis.compare import NO_VERDICT, SLOWER, compare_runs, render_text, write_outputs
from analysis.errors import AnalysisError


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    return {
        "same_a": make_run(root, "synthetic-same-a", seed=11),
        "same_b": make_run(root, "synthetic-same-b", seed=12),
        "slow": make_run(root, "synthetic-slow10", seed=13, speed=0.90),
        "rep_a": make_run(root, "synthetic-rep-a", seed=21, repeats=3),
        "rep_b": make_run(root, "synthetic-rep-b", seed=22, repeats=3),
        "rep_slow": make_run(root, "synthetic-rep-slow10", seed=23, repeats=3, speed=0.90),
        "rep_fat": make_run(root, "synthetic-rep-fat", seed=24, repeats=3, mem_scale=3.0),
        "upgrade_slow": make_run(
            root, "synthetic-upgrade", seed=31, server_version="10.11.20", speed={"jemalloc": 0.88}
        ),
        "other_host": make_run(
            root,
            "synthetic-other-host",
            seed=32,
            host={"kernel": "6.12.0-synthetic", "thp": {"enabled": "always", "defrag": "madvise"}},
            dataset={"tables": 8, "table_size": 10000},
        ),
        "no_samples_a": make_run(root, "synthetic-nosamples-a", seed=41, with_samples=False),
        "no_samples_b": make_run(
            root, "synthetic-nosamples-b", seed=42, with_samples=False, speed=0.8
        ),
        "iibench": make_run(
            root, "synthetic-iibench", seed=51, workloads=("iibench",), threads=(10,)
        ),
        "standin_a": make_run(
            root,
            "synthetic-standin-a",
            seed=61,
            allocators=("glibc",),
            standin=True,
            workloads=("iibench",),
            threads=(10,),
        ),
        "standin_b": make_run(
            root,
            "synthetic-standin-b",
            seed=62,
            allocators=("glibc",),
            standin=True,
            workloads=("iibench",),
            threads=(10,),
            speed=0.5,
        ),
    }


def test_same_config_single_runs_are_not_a_regression(runs):
    cmp = compare_runs(runs["same_a"], runs["same_b"])
    assert cmp.exit_code == 0
    assert len(cmp.points) == 24
    assert not [p for p in cmp.points if p.verdict == SLOWER]
    assert all(p.weak and "intervals" in p.evidence for p in cmp.points)
    assert any("one server life per side" in w for w in cmp.warnings)


def test_ten_percent_drop_in_single_runs_is_detected(runs):
    cmp = compare_runs(runs["same_a"], runs["slow"])
    assert cmp.exit_code == 1
    assert all(p.verdict == SLOWER and p.regression for p in cmp.points)
    assert all(0.85 < p.ratio < 0.95 and p.hi < 1.0 for p in cmp.points)


def test_same_config_repeats_are_not_a_regression(runs):
    cmp = compare_runs(runs["rep_a"], runs["rep_b"])
    assert cmp.exit_code == 0
    assert all(p.evidence == "repeats 3+3" and not p.weak for p in cmp.points)
    assert not cmp.regressions
    assert [p.verdict for p in cmp.memory] == ["no significant change"] * 3


def test_ten_percent_drop_with_repeats_is_detected(runs):
    cmp = compare_runs(runs["rep_a"], runs["rep_slow"])
    assert cmp.exit_code == 1
    assert sum(p.verdict == SLOWER for p in cmp.points) == len(cmp.points)


def test_threshold_decides_what_counts(runs):
    cmp = compare_runs(runs["rep_a"], runs["rep_slow"], threshold_pct=15.0)
    assert cmp.exit_code == 0
    assert all(p.verdict == "no significant change" for p in cmp.points)
    assert all("within ±15%" in p.note for p in cmp.points)  # significant, but small


def test_reversed_drop_is_faster_not_a_regression(runs):
    cmp = compare_runs(runs["rep_slow"], runs["rep_a"])
    assert cmp.exit_code == 0
    assert all(p.verdict == "faster" for p in cmp.points)


def test_memory_growth_regression_with_repeats(runs):
    cmp = compare_runs(runs["rep_a"], runs["rep_fat"])
    assert {p.allocator: p.verdict for p in cmp.memory}["glibc"] == "more memory"
    assert cmp.exit_code == 1
    assert all(p.kind == "memory" for p in cmp.regressions)


def test_memory_single_runs_get_no_verdict(runs):
    cmp = compare_runs(runs["same_a"], runs["same_b"])
    assert all(p.verdict == NO_VERDICT and "run-to-run" in p.note for p in cmp.memory)


def test_upgrade_matches_by_allocator(runs):
    cmp = compare_runs(runs["same_a"], runs["upgrade_slow"])
    assert cmp.mode == "upgrade"
    assert {(p.base_server, p.new_server) for p in cmp.points} == {
        ("mariadb-10.11.19", "mariadb-10.11.20")
    }
    slow = {p.allocator for p in cmp.points if p.verdict == SLOWER}
    assert slow == {"jemalloc"}
    assert cmp.exit_code == 1
    assert any("upgrade check" in w for w in cmp.warnings)


def test_differences_in_host_thp_and_dataset_are_warned(runs):
    cmp = compare_runs(runs["same_a"], runs["other_host"])
    text = "\n".join(cmp.warnings)
    assert "host kernel differs" in text
    assert "system THP enabled differs" in text
    assert "dataset differs" in text
    assert "host hostname" not in text  # same machine: not flagged
    assert "WARNING: host kernel differs" in render_text(cmp)


def test_without_samples_single_runs_get_no_verdict(runs):
    cmp = compare_runs(runs["no_samples_a"], runs["no_samples_b"])
    assert all(p.verdict == NO_VERDICT and p.evidence == "none" for p in cmp.points)
    assert cmp.exit_code == 0
    assert all(p.ratio == pytest.approx(0.8, abs=0.05) for p in cmp.points)  # still shown
    assert "NO VERDICT" in render_text(cmp)


def test_standin_never_gets_a_verdict(runs):
    cmp = compare_runs(runs["standin_a"], runs["standin_b"])
    assert cmp.exit_code == 0
    assert all(p.verdict == NO_VERDICT and "stand-in" in p.note for p in cmp.points)
    assert any("stand-in" in w for w in cmp.warnings)


def test_iibench_compares_rows_per_second(runs):
    cmp = compare_runs(runs["iibench"], runs["iibench"])
    assert [p.metric for p in cmp.points] == ["tps"] * 3
    assert cmp.exit_code == 0


def test_nothing_in_common_is_an_error(runs):
    with pytest.raises(AnalysisError, match="no point in common"):
        compare_runs(runs["same_a"], runs["iibench"])


def test_bad_inputs_are_one_line_errors(runs, tmp_path):
    with pytest.raises(AnalysisError, match="not a mallocsweep run directory"):
        compare_runs(tmp_path, runs["same_a"])
    future = make_run(tmp_path, "synthetic-future", format_version=2)
    with pytest.raises(AnalysisError, match="newer mallocsweep"):
        compare_runs(runs["same_a"], future)
    with pytest.raises(AnalysisError, match="threshold"):
        compare_runs(runs["same_a"], runs["same_b"], threshold_pct=-1)


def test_json_is_serialisable_and_complete(runs):
    cmp = compare_runs(runs["same_a"], runs["slow"])
    data = json.loads(json.dumps(cmp.to_json()))
    assert data["exit_code"] == 1 and data["regressions"] == 24
    p = data["points"][0]
    assert {
        "workload",
        "allocator",
        "thp",
        "threads",
        "ratio",
        "lo",
        "hi",
        "verdict",
        "change_pct",
    } <= set(p)
    assert p["change_pct"] == pytest.approx((p["ratio"] - 1) * 100)


def test_text_and_files(runs, tmp_path):
    cmp = compare_runs(runs["same_a"], runs["slow"])
    text = render_text(cmp)
    assert "REGRESSION: 24 point(s) significantly slower by more than 5%" in text
    assert "\x1b[" not in text  # no colour codes for logs and CI
    files = write_outputs(cmp, tmp_path / "out")
    assert [f.name for f in files] == ["compare.md", "compare.html"]
    md = files[0].read_text()
    assert "REGRESSION" in md and "| workload |" in md
    html = files[1].read_text()
    srcs: list[str] = []

    class P(HTMLParser):
        def handle_starttag(self, tag, attrs):
            srcs.extend(v for k, v in attrs if k in ("src", "href"))

    P().feed(html)
    assert srcs and all(s.startswith("data:image/png;base64,") for s in srcs)
    assert "synthetic-slow10" in html
