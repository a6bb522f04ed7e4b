"""compare: verdicts, exit codes, warnings and bad input on synthetic run pairs."""

from __future__ import annotations

import json
import shutil
import statistics
from html.parser import HTMLParser

import pytest
from fixtures.make_runs import make_run

from analysis.compare import (
    FAILED_IN_NEW,
    NO_VERDICT,
    POSSIBLY_SLOWER,
    SLOWER,
    compare_runs,
)
from analysis.compare_output import points_table, render_text, write_outputs
from analysis.errors import AnalysisError
from rundir.errors import RunDirError
from rundir.format import FORMAT_VERSION
from rundir.read import load_run
from suites.cli.main import main


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
        "upgrade_rep_slow": make_run(
            root,
            "synthetic-upgrade-rep",
            seed=33,
            repeats=3,
            server_version="10.11.20",
            speed={"jemalloc": 0.88},
        ),
        "short_a": make_run(root, "synthetic-short-a", seed=34, intervals=6),
        "short_slow": make_run(root, "synthetic-short-slow", seed=35, intervals=6, speed=0.8),
        "rep_jemalloc_crash": make_run(
            root, "synthetic-rep-crash", seed=36, repeats=3, failed_cells=("jemalloc",)
        ),
        "level_fail": make_run(
            root, "synthetic-level-fail", seed=37, failed_levels=("point_select@64",)
        ),
        "rep_level_fail": make_run(
            root, "synthetic-rep-level-fail", seed=38, repeats=3, failed_levels=("oltp_ro@8",)
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
        "iibench_b": make_run(
            root, "synthetic-iibench-b", seed=52, workloads=("iibench",), threads=(10,)
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
    assert not [p for p in cmp.points if p.verdict in (SLOWER, POSSIBLY_SLOWER)]
    assert all(p.weak and "batch means" in p.evidence for p in cmp.points)
    assert any("one server life per side" in w for w in cmp.warnings)


def test_ten_percent_drop_in_single_runs_is_only_a_possible_regression(runs):
    """One run per side measures noise within a server life only: shown, not failed on."""
    cmp = compare_runs(runs["same_a"], runs["slow"])
    assert cmp.exit_code == 0
    assert all(p.verdict == POSSIBLY_SLOWER and not p.regression for p in cmp.points)
    assert all(0.85 < p.ratio < 0.95 and p.hi < 1.0 for p in cmp.points)
    assert all("weak evidence: 1 run per side" in p.note for p in cmp.points)
    text = render_text(cmp)
    assert "POSSIBLE REGRESSION (weak evidence: 1 run per side): 24 point(s)" in text
    assert "--allow-weak" in text


def test_allow_weak_fails_on_single_run_slowdowns(runs):
    cmp = compare_runs(runs["same_a"], runs["slow"], allow_weak=True)
    assert cmp.exit_code == 1
    assert all(p.verdict == POSSIBLY_SLOWER and p.regression for p in cmp.points)
    assert "REGRESSION: 24 point(s) significantly slower" in render_text(cmp)
    # --allow-weak never turns noise into a regression
    assert compare_runs(runs["same_a"], runs["same_b"], allow_weak=True).exit_code == 0


def test_short_levels_give_no_weak_verdict(runs):
    """Fewer than MIN_INTERVALS intervals per level: raw 1 s intervals are autocorrelated."""
    cmp = compare_runs(runs["short_a"], runs["short_slow"], allow_weak=True)
    assert all(p.verdict == NO_VERDICT and p.evidence == "none" for p in cmp.points)
    assert cmp.exit_code == 2 and cmp.nothing_judged


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
    cmp = compare_runs(runs["rep_a"], runs["upgrade_rep_slow"])
    assert cmp.mode == "upgrade"
    assert {(p.base_server, p.new_server) for p in cmp.points} == {
        ("mariadb-10.11.19", "mariadb-10.11.20")
    }
    slow = {p.allocator for p in cmp.points if p.verdict == SLOWER}
    assert slow == {"jemalloc"}
    assert cmp.exit_code == 1
    assert any("upgrade check" in w for w in cmp.warnings)
    # the binary is what an upgrade compares: not warned as a setting difference
    assert not any("server.binary" in w for w in cmp.warnings)


def test_upgrade_from_single_runs_is_weak(runs):
    cmp = compare_runs(runs["same_a"], runs["upgrade_slow"])
    assert {p.allocator for p in cmp.points if p.verdict == POSSIBLY_SLOWER} == {"jemalloc"}
    assert cmp.exit_code == 0
    assert compare_runs(runs["same_a"], runs["upgrade_slow"], allow_weak=True).exit_code == 1


def test_differences_in_host_thp_and_dataset_are_warned(runs):
    cmp = compare_runs(runs["same_a"], runs["other_host"])
    text = "\n".join(cmp.warnings)
    assert "host kernel differs" in text
    assert "system THP enabled differs" in text
    assert "dataset differs: dataset.tables = 4 (base) vs 8 (new)" in text
    assert "host hostname" not in text  # same machine: not flagged
    assert "WARNING: host kernel differs" in render_text(cmp)
    assert "context-switch source" not in text  # both synthetic runs used perf


def test_a_different_context_switch_source_is_flagged(runs, tmp_path):
    """perf counters cost the server throughput, taskstats does not: comparing a run measured
    one way with a run measured the other says so."""
    new = tmp_path / "same-b-taskstats"
    shutil.copytree(runs["same_b"], new)
    m = json.loads((new / "manifest.json").read_text())
    for c in m["cells"]:
        c["ctxsw_source"] = c["collectors"]["ctxsw_source"] = "taskstats"
    (new / "manifest.json").write_text(json.dumps(m))
    for f in (new / "cells").glob("*.json"):  # the records say it too (they are the truth)
        rec = json.loads(f.read_text())
        rec["cell"]["ctxsw_source"] = rec["cell"]["collectors"]["ctxsw_source"] = "taskstats"
        f.write_text(json.dumps(rec))
    text = "\n".join(compare_runs(runs["same_a"], new).warnings)
    assert "context-switch source differs: perf (base) vs taskstats (new)" in text


def test_without_samples_single_runs_get_no_verdict_and_exit_2(runs):
    """Nothing could be judged: a CI job must not pass silently on a comparison that saw nothing."""
    cmp = compare_runs(runs["no_samples_a"], runs["no_samples_b"])
    assert all(p.verdict == NO_VERDICT and p.evidence == "none" for p in cmp.points)
    assert cmp.exit_code == 2 and cmp.to_json()["nothing_judged"]
    assert all(p.ratio == pytest.approx(0.8, abs=0.05) for p in cmp.points)  # still shown
    text = render_text(cmp)
    assert "NO VERDICT: none of the 24 point(s) had enough evidence" in text
    assert "exit code 2" in text


def test_standin_never_gets_a_verdict(runs):
    cmp = compare_runs(runs["standin_a"], runs["standin_b"])
    assert cmp.exit_code == 0
    assert all(p.verdict == NO_VERDICT and "stand-in" in p.note for p in cmp.points)
    assert any("stand-in" in w for w in cmp.warnings)


def test_iibench_compares_rows_per_second(runs):
    cmp = compare_runs(runs["iibench"], runs["iibench_b"])
    assert [p.metric for p in cmp.points] == ["qps"] * 3  # iibench's qps: rows inserted per second
    assert cmp.exit_code == 0
    assert "rows inserted/s" in render_text(cmp)


def test_nothing_in_common_is_an_error(runs):
    with pytest.raises(AnalysisError, match="no point in common"):
        compare_runs(runs["same_a"], runs["iibench"])


def test_bad_inputs_are_one_line_errors(runs, tmp_path):
    with pytest.raises(RunDirError, match="not a mallocsweep run directory"):
        compare_runs(tmp_path, runs["same_a"])
    future = make_run(tmp_path, "synthetic-future", format_version=FORMAT_VERSION + 1)
    with pytest.raises(RunDirError, match="newer mallocsweep"):
        compare_runs(runs["same_a"], future)
    with pytest.raises(AnalysisError, match="threshold"):
        compare_runs(runs["same_a"], runs["same_b"], threshold_pct=-1)


def test_json_is_serialisable_and_complete(runs):
    cmp = compare_runs(runs["rep_a"], runs["rep_slow"])
    data = json.loads(json.dumps(cmp.to_json()))
    assert data["exit_code"] == 1 and data["regressions"] == 24
    assert data["allow_weak"] is False and data["possible_regressions"] == 0
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
    cmp = compare_runs(runs["rep_a"], runs["rep_slow"])
    text = render_text(cmp)
    assert "REGRESSION: 24 point(s) significantly slower by more than 5%" in text
    assert "\x1b[" not in text  # no colour codes for logs and CI
    files = write_outputs(cmp, tmp_path / "out")
    stem = "compare-synthetic-rep-a-vs-synthetic-rep-slow10"
    assert [f.name for f in files] == [f"{stem}.md", f"{stem}.html"]
    # the same pair again never replaces the first comparison: the next free suffix
    again = write_outputs(cmp, tmp_path / "out")
    assert [f.name for f in again] == [f"{stem}.2.md", f"{stem}.2.html"]
    assert files[0].read_text() == again[0].read_text()
    md = files[0].read_text()
    assert "REGRESSION" in md and "| workload |" in md
    html = files[1].read_text()
    srcs: list[str] = []

    class P(HTMLParser):
        def handle_starttag(self, tag, attrs):
            srcs.extend(v for k, v in attrs if k in ("src", "href"))

    P().feed(html)
    assert srcs and all(s.startswith("data:image/png;base64,") for s in srcs)
    assert "synthetic-rep-slow10" in html


def test_base_and_new_are_the_geometric_means_the_ratio_uses(runs):
    cmp = compare_runs(runs["rep_a"], runs["rep_slow"])
    b, n = load_run(runs["rep_a"]), load_run(runs["rep_slow"])
    for p in cmp.points:

        def vals(run, p=p):
            return [
                r["qps"]
                for r in run.rows
                if (r["workload"], r["allocator"], r["threads"])
                == (p.workload, p.allocator, p.threads)
            ]

        gb, gn = statistics.geometric_mean(vals(b)), statistics.geometric_mean(vals(n))
        assert p.base == pytest.approx(gb) and p.new == pytest.approx(gn)
        assert p.ratio == pytest.approx(gn / gb)
    assert "base (geo. mean)" in points_table(cmp).columns


# -- failures in NEW are regressions ------------------------------------------------------------
def test_a_cell_that_failed_in_new_is_a_regression(runs):
    """jemalloc's server failed at start in every NEW cell: each jemalloc point BASE measured."""
    cmp = compare_runs(runs["rep_a"], runs["rep_jemalloc_crash"])
    failed = [p for p in cmp.points if p.verdict == FAILED_IN_NEW]
    assert {p.allocator for p in failed} == {"jemalloc"} and len(failed) == 8
    assert all(p.regression and "signal 11" in p.note for p in failed)
    assert cmp.exit_code == 1
    assert "8 point(s) measured in BASE failed in NEW" in render_text(cmp)
    assert not cmp.unmatched["base_only"]  # not a mere "only in base" warning


def test_a_level_that_failed_in_new_is_a_regression_even_from_single_runs(runs):
    cmp = compare_runs(runs["same_a"], runs["level_fail"])
    failed = {
        (p.allocator, p.workload, p.threads) for p in cmp.points if p.verdict == FAILED_IN_NEW
    }
    assert failed == {(a, "point_select", 64) for a in ("glibc", "jemalloc", "tcmalloc")}
    assert cmp.exit_code == 1


def test_a_failure_in_base_is_listed_not_judged(runs):
    cmp = compare_runs(runs["level_fail"], runs["same_a"])
    assert not [p for p in cmp.points if p.verdict == FAILED_IN_NEW]
    assert len(cmp.unmatched["failed_in_base"]) == 3
    assert any("failed in BASE but worked in NEW" in w for w in cmp.warnings)
    assert cmp.exit_code == 0


def test_memory_uses_only_complete_cells_and_means(runs):
    """A cell with a failed level covers a different stretch of its server's life: left out."""
    cmp = compare_runs(runs["rep_a"], runs["rep_b"])
    assert cmp.memory_basis == "server"
    manifest = json.loads((runs["rep_b"] / "manifest.json").read_text())
    for p in cmp.memory:
        # the manifest's server start/stop readings, the same figures as the report's table
        growths = [
            c["memory"]["server_stop"]["rss_kb"] - c["memory"]["server_start"]["rss_kb"]
            for c in manifest["cells"]
            if c["allocator"]["name"] == p.allocator
        ]
        assert len(growths) == 3
        assert p.new == pytest.approx(statistics.mean(growths))
    partial = compare_runs(runs["rep_a"], runs["rep_level_fail"])
    assert partial.memory == []  # every NEW cell had a failed level: no memory figure at all


def test_memory_of_an_older_run_is_compared_over_levels_on_both_sides(runs, tmp_path):
    """An older BASE has no server start/stop memory: both sides fall back to level figures."""
    old = make_run(tmp_path, "synthetic-rep-old", seed=21, repeats=3, legacy=True)
    cmp = compare_runs(old, runs["rep_b"])
    assert cmp.memory_basis == "levels"
    assert any("base run predates the server start/stop readings" in w for w in cmp.warnings)
    run = load_run(runs["rep_b"])
    for p in cmp.memory:
        growths = []
        for cid in {r["cell"] for r in run.rows if r["allocator"] == p.allocator}:
            rows = [r for r in run.rows if r["cell"] == cid]
            growths.append(rows[-1]["rss_end_kb"] - rows[0]["rss_start_kb"])
        assert p.new == pytest.approx(statistics.mean(growths))
    assert "over the measured levels" in render_text(cmp)


# -- warnings -------------------------------------------------------------------------------------
def test_every_differing_suite_setting_is_warned(runs, tmp_path):
    changed = shutil.copytree(runs["same_b"], tmp_path / "synthetic-changed")
    m = json.loads((changed / "manifest.json").read_text())
    m["suite"]["sysbench"]["rate"] = 5000
    m["suite"]["server"]["settings"] = {"innodb_flush_method": "O_DIRECT"}
    m["suite"]["run"]["out"] = "/elsewhere"  # where it went does not matter
    (changed / "manifest.json").write_text(json.dumps(m))
    text = "\n".join(compare_runs(runs["same_a"], changed).warnings)
    assert "sysbench.rate = '(not set)' (base) vs 5000 (new)" in text
    assert "server.settings.innodb_flush_method" in text
    assert "run.out" not in text


def test_a_server_in_one_run_only_is_warned(runs, tmp_path):
    both = _merge(tmp_path / "synthetic-two-servers", runs["same_a"], runs["upgrade_slow"])
    cmp = compare_runs(both, runs["same_b"])
    assert cmp.mode == "same server"
    assert any("mariadb-10.11.20 (base only)" in w for w in cmp.warnings)


def _merge(dst, *srcs):
    """One run directory holding the cells of several (two servers in one run)."""
    dst.mkdir()
    manifest, lines = None, []
    for src in srcs:
        m = json.loads((src / "manifest.json").read_text())
        if manifest is None:
            manifest = m
        else:
            manifest["cells"] += m["cells"]
        text = (src / "results.csv").read_text().splitlines()
        lines += text if not lines else text[1:]
        for sub in ("samples", "cells"):
            (dst / sub).mkdir(exist_ok=True)
            for f in (src / sub).iterdir():
                shutil.copy(f, dst / sub / f.name)
    (dst / "manifest.json").write_text(json.dumps(manifest))
    (dst / "results.csv").write_text("\n".join(lines) + "\n")
    return dst


# -- the command ----------------------------------------------------------------------------------
def test_cli_files_that_cannot_be_written_are_an_error_not_a_verdict(runs, tmp_path, capsys):
    """A comparison whose .md/.html cannot be written is exit 2 (one line naming the place),
    never a verdict whose evidence is not on disk; and nothing is half-written."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    code = main(
        ["compare", str(runs["rep_a"]), str(runs["rep_slow"]), "--out", str(blocker / "sub")]
    )
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.strip().splitlines() == [err.strip()] and str(blocker / "sub") in err
    assert "nothing was written" in err


def test_cli_json_warnings_also_go_to_stderr(runs, tmp_path, capsys):
    code = main(
        ["compare", str(runs["same_a"]), str(runs["other_host"]), "--json", "--out", str(tmp_path)]
    )
    out, err = capsys.readouterr()
    assert code == 0 and json.loads(out)["warnings"]
    assert "WARNING: host kernel differs" in err


def test_cli_allow_weak(runs, tmp_path):
    args = ["compare", str(runs["same_a"]), str(runs["slow"]), "--out", str(tmp_path)]
    assert main(args) == 0
    assert main([*args, "--allow-weak"]) == 1


def test_cli_internal_error_is_exit_2_not_a_verdict(runs, tmp_path, monkeypatch, capsys):
    import analysis.compare

    def broken(*a, **k):
        raise ZeroDivisionError("float division by zero")

    monkeypatch.setattr(analysis.compare, "compare_runs", broken)
    monkeypatch.delenv("MALLOCSWEEP_DEBUG", raising=False)
    code = main(["compare", str(runs["same_a"]), str(runs["same_b"]), "--out", str(tmp_path)])
    assert code == 2
    err = capsys.readouterr().err
    assert "internal error while comparing (ZeroDivisionError" in err and err.count("\n") == 1
