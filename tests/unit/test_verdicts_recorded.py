"""Verdicts on recorded real runs, verdicts.csv, the report's glance, and the budget's decisions.

Real data with known truth: real-regress-base-a and -b are the same configuration recorded twice
(5 rounds each): joined round by round under two names they are a real A/A pair. real-regress-slow
is the same configuration made ~12% slower by a rate cap (3 rounds).
"""

from __future__ import annotations

import copy
import csv
import json
import shutil
import time
from pathlib import Path

import pytest

from analysis.report import write_report
from analysis.sequential import Design
from analysis.verdicts import (
    CSV_COLUMNS,
    RSS_GROWTH,
    RSS_STOP,
    THROUGHPUT,
    aa_alarm,
    run_verdicts,
    why_no_verdicts,
)
from rundir.errors import RunDirError
from rundir.read import load_run
from suites.runner.budget import Budget

RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "runs"


def joined(
    tmp_path: Path, other: str, name: str, scale: float = 1.0, rss_scale: float = 1.0
) -> Path:
    """real-regress-base-a with the rows of `other` added as allocator `name` (rounds kept), their
    throughput multiplied by `scale`."""
    out = tmp_path / f"joined-{name}"
    shutil.copytree(RUNS / "real-regress-base-a", out)
    manifest = json.loads((out / "manifest.json").read_text())
    other_manifest = json.loads((RUNS / other / "manifest.json").read_text())
    with (out / "results.csv").open() as f:
        reader = csv.DictReader(f)
        cols, rows = reader.fieldnames, list(reader)
    with (RUNS / other / "results.csv").open() as f:
        extra = list(csv.DictReader(f))
    ids = {}
    for r in extra:
        new_id = r["cell"].replace("__glibc__", f"__{name}__")
        ids[r["cell"]] = new_id
        r.update(cell=new_id, allocator=name, qps=str(float(r["qps"]) * scale))
        r["rss_end_kb"] = str(float(r["rss_end_kb"]) * rss_scale)
        rows.append(r)
    for c in other_manifest["cells"]:
        c = copy.deepcopy(c)
        c["id"] = ids.get(c["id"], c["id"])
        c["index"] = 100 + c["index"]
        c["allocator"]["name"] = name
        # A synthetic life of its own (a pid beyond any pid_max): the same recorded life under two
        # cell names is refused as duplicated data (rundir/admissible.py, issue 35)
        if isinstance(c.get("verification"), dict) and c["verification"].get("pid") is not None:
            c["verification"]["pid"] = 10_000_000 + int(c["verification"]["pid"])
        manifest["cells"].append(c)
    (out / "manifest.json").write_text(json.dumps(manifest))
    with (out / "results.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        w.writerows(rows)
    return out


def test_recorded_aa_pair_is_never_called_different(tmp_path):
    run = load_run(joined(tmp_path, "real-regress-base-b", "glibc-aa"))
    vs = run_verdicts(run)
    assert {v.metric for v in vs} == {THROUGHPUT, RSS_GROWTH, RSS_STOP}
    assert all(v.aa_arm for v in vs)
    assert aa_alarm(vs) == []
    (tp,) = [v for v in vs if v.metric == THROUGHPUT]
    assert tp.rounds == 5 and tp.lo < 1 < tp.hi
    assert tp.verdict in ("none", "undecided")


def test_recorded_slowdown_is_never_called_faster(tmp_path):
    # The slow run had 3 rounds, the base 5: joined, rounds 4 and 5 lack the capped arm, which no
    # runner leaves (every planned cell is listed from the start): refused as unpaired (issue 35),
    # and read over the rounds both have when the user allows an incomplete run.
    path = joined(tmp_path, "real-regress-slow", "capped")
    with pytest.raises(RunDirError, match=r"round 4 has no cell of \S+__capped__"):
        load_run(path)
    run = load_run(path, allow_incomplete=True)
    (tp,) = [v for v in run_verdicts(run) if v.metric == THROUGHPUT]
    assert tp.rounds == 3  # paired over the rounds both have
    assert tp.ratio < 1
    assert tp.verdict in ("worse", "undecided")


def test_a_clear_difference_is_called_and_named_at_a_glance(tmp_path):
    run_dir = joined(tmp_path, "real-regress-base-a", "fast", scale=1.5)
    vs = run_verdicts(load_run(run_dir))
    (tp,) = [v for v in vs if v.metric == THROUGHPUT]
    assert tp.verdict == "better" and tp.ratio == pytest.approx(1.5)
    write_report(run_dir)
    rows = list(csv.DictReader((run_dir / "verdicts.csv").open()))
    assert list(rows[0]) == CSV_COLUMNS
    # the verdict column says each row in its metric's words (never "slower" for memory)
    words = {"none", "undecided", "faster", "slower", "less memory", "more memory"}
    assert {r["verdict"] for r in rows} <= words | {"grows less", "grows more"}
    assert any(r["allocator"] == "fast" and r["verdict"] == "faster" for r in rows)
    assert all(
        r["verdict"] not in ("faster", "slower") for r in rows if r["metric"] != "throughput"
    )
    md = (run_dir / "summary.md").read_text()
    assert "fast 1.50×" in md and "What differs from glibc" in md.replace("what", "What")


def test_more_memory_is_the_worse_side(tmp_path):
    vs = run_verdicts(load_run(joined(tmp_path, "real-regress-base-a", "fat", rss_scale=1.3)))
    (stop,) = [v for v in vs if v.metric == RSS_STOP]
    assert stop.ratio == pytest.approx(1.3, rel=0.01)
    assert stop.verdict == "worse" and stop.meaning == "more memory"
    (grow,) = [v for v in vs if v.metric == RSS_GROWTH]
    assert grow.ratio > 1.05 and grow.verdict == "worse" and grow.meaning == "grows more"


def test_memory_verdicts_are_said_in_memory_words_everywhere(tmp_path):
    """The console's end-of-run tables, summary.md's "at a glance" and the report say "more
    memory" / "grows more" for memory points, never "slower"."""
    from suites.cli.commands.run import verdict_tables

    run_dir = joined(tmp_path, "real-regress-base-a", "fat", rss_scale=1.3)
    tables, _notes = verdict_tables(run_dir)
    (mem,) = [t for t in tables if str(t.title).startswith("memory")]
    cells = [c for col in mem.columns for c in col.cells]
    fat = [c for c in cells if "×" in c]
    assert fat and all("slower" not in c and "faster" not in c for c in fat)
    assert any(c.endswith("more memory[/]") for c in fat)
    assert any(c.endswith("grows more[/]") for c in fat)
    write_report(run_dir)
    md = (run_dir / "summary.md").read_text()
    glance = md[md.index("t a glance") :].split("\n\n## ")[0]
    assert "better than glibc" in glance and "worse than glibc" in glance
    assert "fat 1.30×" in glance and "more memory" in glance and "grows more" in glance
    assert "slower" not in "".join(line for line in glance.splitlines() if "memory:" in line)
    html = (run_dir / "report.html").read_text()
    assert "more memory" in html


def test_one_round_gives_no_verdict_and_says_why(tmp_path):
    run = load_run(RUNS / "real-smoke-1")
    assert "one round only" in why_no_verdicts(run)
    assert run_verdicts(run) == []
    shutil.copytree(RUNS / "real-smoke-1", tmp_path / "r")
    write_report(tmp_path / "r")
    md = (tmp_path / "r" / "summary.md").read_text()
    assert "No verdicts: one round only" in md
    assert "fastest" not in md.lower()
    assert (tmp_path / "r" / "verdicts.csv").read_text().strip() == ",".join(CSV_COLUMNS)


def test_budget_stops_early_when_every_point_is_decided(tmp_path):
    run_dir = joined(tmp_path, "real-regress-base-a", "fast", scale=1.5)
    budget = Budget(3600, Design(3, 20), "glibc", time.monotonic())
    d = budget.after_round(run_dir, 5, 10.0)
    assert not d.more
    assert "every point decided" in d.message


def test_budget_adds_rounds_while_undecided_and_runs_out_gracefully(tmp_path):
    run_dir = joined(tmp_path, "real-regress-base-b", "glibc-aa")
    started = time.monotonic()
    more = Budget(3600, Design(3, 20), "glibc", started).after_round(run_dir, 5, 10.0)
    assert more.more and "undecided: glibc-aa" in more.message and "round 6 next" in more.message
    out = Budget(5, Design(3, 20), "glibc", started).after_round(run_dir, 5, 10.0)
    assert not out.more and "budget left" in out.message and "undecided" in out.message
    last = Budget(3600, Design(3, 5), "glibc", started).after_round(run_dir, 5, 10.0)
    assert not last.more and "planned maximum" in last.message


def test_a_resumed_budget_goes_on_with_the_recorded_design_and_the_time_left():
    """--resume keeps the looks planned before the first round (the spending must not be planned
    again after seeing data) and the time the cells already took (not the pause between)."""
    from suites.runner.budget import recorded_design, spent_s

    fresh = Design(3, 3)
    got = recorded_design(
        {"first_look": 3, "max_rounds": 9, "alpha": 0.05, "min_effect_pct": 2.5}, fresh
    )
    assert (got.first_look, got.max_rounds, got.min_effect_pct) == (3, 9, 2.5)
    assert recorded_design({}, fresh) is fresh  # a run recorded before designs: as planned now
    assert recorded_design({"first_look": "x", "max_rounds": 4}, fresh) is fresh
    cells = [
        {"started_at": "2026-11-28T10:00:00+00:00", "finished_at": "2026-11-28T10:01:30+00:00"},
        {"started_at": "2026-11-28T12:00:00+00:00", "finished_at": "2026-11-28T12:00:30+00:00"},
        {"started_at": "2026-11-28T12:01:00+00:00", "finished_at": None},  # interrupted
        {},  # pending
    ]
    assert spent_s(cells) == 120.0


def test_paired_noise_is_the_spread_of_the_differences_to_the_baseline(tmp_path, monkeypatch):
    """The recorded A/A pair: the noise `make bench` simulates with is sd(log b - log a) / sqrt 2
    over the five rounds, and the bench's verdict figure says it came from that run (the
    simulation itself is test_sequential's; here it only records what it was given)."""
    import math

    from analysis import simulate
    from analysis.verdicts import paired_noise, throughput_points
    from bench.bench import verdicts_figure

    run_dir = joined(tmp_path, "real-regress-base-b", "glibc-aa")
    run = load_run(run_dir)
    noise = paired_noise(run)
    ((_, values),) = throughput_points(run)
    d = [math.log(values["glibc-aa"][r] / values["glibc"][r]) for r in sorted(values["glibc"])]
    m = sum(d) / len(d)
    sd = math.sqrt(sum((x - m) ** 2 for x in d) / (len(d) - 1))
    assert noise.sigma == pytest.approx(sd / math.sqrt(2))
    assert (noise.points, noise.arms, noise.rounds) == (1, 1, 5)
    assert paired_noise(load_run(RUNS / "real-smoke-1")) is None  # one round: nothing to measure
    monkeypatch.setattr(
        simulate,
        "budget_vs_fixed",
        lambda sigma, others, order, points: {"sigma": sigma, "others": others, "points": points},
    )
    fig = verdicts_figure(tmp_path)
    assert fig["sigma"] == pytest.approx(noise.sigma) and fig["others"] == 0
    assert str(run_dir) in fig["noise_source"]
    # the simulated point shares the 5% with the run's other points, as its verdicts do
    assert fig["points"] == noise.points == 1
    fallback = verdicts_figure(tmp_path / "nothing-here")
    assert "recorded in tests/fixtures" in fallback["noise_source"] and fallback["others"] == 5
    assert fallback["points"] == pytest.approx(
        2.2
    )  # the quick suite's: 2 OLTP_RO + 2 settled at a tenth


def test_glance_has_a_server_column_only_when_a_run_holds_several_servers(tmp_path):
    from dataclasses import replace

    from analysis.verdict_tables import glance_table

    run = load_run(joined(tmp_path, "real-regress-base-a", "fast", scale=1.5))
    vs = run_verdicts(run)
    one = glance_table(run, vs, "glibc")
    assert "server" not in one.columns
    # the same verdicts again under a second engine's label: its rows must say which is which
    two = glance_table(run, vs + [replace(v, server=v.server + "+rocksdb") for v in vs], "glibc")
    assert two.columns[0] == "server" and len(two.rows) == 2 * len(one.rows)
    assert {r[0].text for r in two.rows} == {vs[0].server, vs[0].server + "+rocksdb"}
