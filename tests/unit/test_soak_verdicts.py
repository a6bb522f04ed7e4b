"""A soak's verdicts from a recorded run (tests/fixtures/runs/real-fragmentation-format5, a real
fragmentation run on MariaDB 10.11 under glibc and jemalloc), reduced to one life per arm as a
soak has: growth is judged from that one life, in MB/h; what needs rounds says why it is not."""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import pytest

from analysis import growth_rate, soak_looks
from analysis.metrics import HELD_GROWTH_MB_PER_HOUR, RSS_GROWTH_MB_PER_HOUR
from analysis.report import write_report
from analysis.verdicts import SOAK_ONE_LIFE, run_verdicts, why_no_verdicts
from rundir.read import load_run

RUN = Path(__file__).resolve().parents[1] / "fixtures" / "runs" / "real-fragmentation-format5"


def one_life_per_arm(tmp_path: Path, soak: dict | None) -> Path:
    """The recorded run with its round-2 lives removed (cells, raw, samples, manifest, rows),
    and a soak's manifest record when `soak` is given."""
    d = tmp_path / "run"
    shutil.copytree(RUN, d)
    m = json.loads((d / "manifest.json").read_text())
    gone = [c["id"] for c in m["cells"] if c["round"] == 2]
    m["cells"] = [c for c in m["cells"] if c["id"] not in gone]
    m["suite"]["run"]["repeat"] = 1
    if soak is not None:
        m["soak"] = soak
    (d / "manifest.json").write_text(json.dumps(m))
    for cid in gone:
        for sub, ext in (("cells", "json"), ("raw", "json"), ("samples", "csv")):
            (d / sub / f"{cid}.{ext}").unlink(missing_ok=True)
    text = (d / "results.csv").read_text()
    rows = list(csv.DictReader(io.StringIO(text)))
    out = io.StringIO()
    w = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
    w.writeheader()
    w.writerows(r for r in rows if r["cell"] not in gone)
    (d / "results.csv").write_text(out.getvalue())
    return d


SOAK = soak_looks.design(3600.0, 600.0, 5, growth_rate.MARGIN_MB_PER_HOUR) | {
    "looks": [{"look": 1}, {"look": 2}],
    "judged_at_end": True,
    "stopped": "stopped early at 0.35 h of 1.00 h: every growth verdict was decided at look 2 of 6",
}


def test_a_one_round_run_is_still_refused(tmp_path):
    run = load_run(one_life_per_arm(tmp_path, None))
    assert "one round only" in why_no_verdicts(run)
    assert run_verdicts(run) == []


def test_a_soak_judges_growth_from_one_life_per_arm_at_its_look_level(tmp_path):
    d = one_life_per_arm(tmp_path, SOAK)
    run = load_run(d)
    assert why_no_verdicts(run) is None
    vs = run_verdicts(run)
    growth = [v for v in vs if v.metric in (RSS_GROWTH_MB_PER_HOUR, HELD_GROWTH_MB_PER_HOUR)]
    assert growth, [v.metric for v in vs]
    level = soak_looks.look_level(2, 6)
    for v in growth:
        assert v.unit == "MB/h" and v.rounds == 1
        assert v.level == pytest.approx(level)
        assert v.lo <= v.ratio <= v.hi and v.hi - v.lo < float("inf")
    # the one life's own slopes behind one verdict: the difference and its error from both
    lives = {(x.allocator, x.workload): x for x in growth_rate.life_rates(run)}
    v = next(x for x in growth if x.metric == RSS_GROWTH_MB_PER_HOUR)
    a, b = lives[("jemalloc", v.workload)].rss, lives[("glibc", v.workload)].rss
    assert v.ratio == pytest.approx(a.value - b.value)
    d_ = growth_rate.unpaired_difference(a, b, level, growth_rate.MARGIN_MB_PER_HOUR)
    assert (v.lo, v.hi) == pytest.approx((d_.lo, d_.hi))
    # what needs rounds says why it is undecided
    assert SOAK_ONE_LIFE in vs.notices
    write_report(d)
    md = (d / "summary.md").read_text()
    assert "one server life per arm" in md and "The soak ended: stopped early" in md


def test_a_soak_of_several_scenarios_is_judged_once_per_arm(tmp_path):
    """The scenarios of a soak take turns in one server life: one growth verdict per arm and
    metric, from every cycle of the life in the order they ended (not the life's one trend
    judged again for each scenario)."""
    d = one_life_per_arm(tmp_path, SOAK)
    run = load_run(d)
    scenarios = {r["workload"] for r in run.ok_rows if r.get("scenario_cycle") is not None}
    assert len(scenarios) > 1
    growth = [v for v in run_verdicts(run) if v.unit == growth_rate.UNIT]
    keys = [(v.allocator, v.metric) for v in growth]
    assert growth and len(keys) == len(set(keys))
    assert {v.workload for v in growth} == {growth_rate.SOAK_SERIES}


def _taking_turns(workloads: tuple[str, str], mb_per_h: float) -> list[dict]:
    """One life's rows: six cycles of each workload taking turns (one every 5 minutes), RSS
    rising `mb_per_h` across both."""
    rows = []
    for i in range(6):
        for j, wl in enumerate(workloads):
            t = 600.0 * i + 300.0 * j
            rows.append({"cell": "c", "server": "s", "allocator": "glibc", "thp": "system",
                         "repeat": 1, "workload": wl, "scenario_cycle": i + 1, "scenario_end_s": t,
                         "rss_end_kb": 1024.0 * (1000 + t * mb_per_h / 3600.0)})  # fmt: skip
    return rows


def test_one_series_orders_every_scenario_cycle_by_when_it_ended():
    """Two scenarios taking turns, RSS rising 60 MB an hour across both: one life, every cycle,
    the slope of the whole life (each scenario alone would have it too, judged twice)."""
    rows = _taking_turns(("churn", "dump"), mb_per_h=60.0)
    (life,) = growth_rate.lives_of_rows("c", rows)
    assert life.workload == growth_rate.SOAK_SERIES and life.cycles == 12
    assert life.rss.value == pytest.approx(60.0)
    # a part without its cycles' times cannot be ordered: no rate rather than a wrong one
    rows[0] = {**rows[0], "scenario_end_s": None}
    assert growth_rate.lives_of_rows("c", rows) == []


def test_one_scenarios_blocks_keep_its_name_as_one_series():
    """session_churn soaked alone (a stage of a soak of scenarios apart) runs a block per thread
    cache size in one life: one series, named after the scenario, not "all scenarios"."""
    rows = _taking_turns(("session_churn_tc4", "session_churn_tcsized"), mb_per_h=120.0)
    (life,) = growth_rate.lives_of_rows("c", rows)
    assert life.workload == "session_churn" and life.cycles == 12
    assert life.rss.value == pytest.approx(120.0)
    rows[1] = {**rows[1], "workload": "table_cache"}  # two scenarios: the life's one series
    (life,) = growth_rate.lives_of_rows("c", rows)
    assert life.workload == growth_rate.SOAK_SERIES


def _only(d: Path, workload: str) -> None:
    """The run's rows of one scenario only: a soak of that scenario alone."""
    text = (d / "results.csv").read_text()
    rows = list(csv.DictReader(io.StringIO(text)))
    out = io.StringIO()
    w = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
    w.writeheader()
    w.writerows(r for r in rows if r["workload"] == workload)
    (d / "results.csv").write_text(out.getvalue())
    for p in (d / "cells").glob("*.json"):
        rec = json.loads(p.read_text())
        rec["rows"] = [r for r in rec["rows"] if r["workload"] == workload]
        rec["cell"]["levels"] = [x for x in rec["cell"]["levels"] if x["workload"] == workload]
        p.write_text(json.dumps(rec))
    m = json.loads((d / "manifest.json").read_text())
    for c in m["cells"]:
        c["levels"] = [x for x in c.get("levels") or [] if x["workload"] == workload]
    (d / "manifest.json").write_text(json.dumps(m))


def test_the_reports_claims_read_the_series_a_soak_judged(tmp_path):
    """A scenario soaked alone is judged as one series named after it: the reports' claims read
    that series and its verdicts (not the blocks' names, which have no rate in a soak: the claim
    once said "no growth figure" beside a decided verdict). Every scenario in one life has no
    scenario's series: no claim about a scenario is made from it."""
    from analysis.fragmentation import claims_table

    d = one_life_per_arm(tmp_path, SOAK)
    together = load_run(d)
    t = claims_table(together, run_verdicts(together), "glibc")
    assert not [r for r in t.rows if r[0].text == "MDEV-30889"], t.rows
    _only(d, "dump")
    alone = load_run(d)
    judged = run_verdicts(alone)
    t = claims_table(alone, judged, "glibc")
    (row,) = [r for r in t.rows if r[0].text == "MDEV-30889"]
    measured = row[3].text
    assert "no growth figure" not in measured
    assert "glibc +" in measured or "glibc -" in measured, measured
    v = next(
        x
        for x in judged
        if x.workload == "dump" and x.allocator == "jemalloc" and x.metric == RSS_GROWTH_MB_PER_HOUR
    )
    assert "jemalloc vs glibc: " in measured and v.word in measured
