"""A thread-churn life's cycles are one repeat, not several (analysis/lives.py).

Fixture: the recorded real-regress runs (5 server lives each, one POINT_SELECT level per life),
made into churn runs by giving each life three churn cycles of that level at 0.8x, 1.0x and 1.2x
its recorded throughput: a life's median is then its recorded figure, and every table, verdict and
comparison must come out as for the recorded run, over 5 lives, not over 15 "repeats".
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from analysis import point_tables
from analysis.compare import compare_runs
from analysis.stats import median_ci
from analysis.verdicts import THROUGHPUT, noise_floor, run_verdicts
from rundir.read import load_run
from tests.unit.test_verdicts_recorded import joined

RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "runs"
CYCLE_SCALE = (0.8, 1.0, 1.2)


def churned(src: Path, out: Path) -> Path:
    """`src` with each results row repeated as churn cycles 1..3 of the same life."""
    shutil.copytree(src, out)
    with (out / "results.csv").open() as f:
        reader = csv.DictReader(f)
        cols, rows = list(reader.fieldnames), list(reader)
    cols += [c for c in ("churn_cycle", "thread_cache_size") if c not in cols]
    cycled = []
    for r in rows:
        for cycle, k in enumerate(CYCLE_SCALE, start=1):
            c = dict(r, churn_cycle=str(cycle), thread_cache_size="2")
            c["qps"] = str(float(r["qps"]) * k)
            c["tps"] = str(float(r["tps"]) * k)
            cycled.append(c)
    with (out / "results.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        w.writerows(cycled)
    # ... and its manifest says so: each cell's levels are its cycles' visits (as a churn run's)
    m = json.loads((out / "manifest.json").read_text())
    for c in m["cells"]:
        c["levels"] = [
            dict(lv, phase=f"{lv['phase']}#c{cycle}/tc2")
            for lv in c.get("levels") or []
            for cycle in range(1, len(CYCLE_SCALE) + 1)
        ]
    (out / "manifest.json").write_text(json.dumps(m))
    return out


def test_points_are_over_lives_not_cycles(tmp_path):
    plain = load_run(RUNS / "real-regress-base-a")
    churn = load_run(churned(RUNS / "real-regress-base-a", tmp_path / "churn"))
    assert len(churn.ok_rows) == 3 * len(plain.ok_rows)
    (p,) = point_tables.points(plain, "point_select", "qps").values()
    (c,) = point_tables.points(churn, "point_select", "qps").values()
    assert c.n == p.n == 5
    assert (c.median, c.lo, c.hi) == pytest.approx((p.median, p.lo, p.hi))
    # the recorded run reads as before: its lives are its rows
    assert p == median_ci([r["qps"] for r in plain.ok_rows])
    table = point_tables.throughput_table(churn, "point_select")
    notes = " ".join(table.notes)
    assert "medians over 5 repeats" in notes and "up to 3 times" in notes
    assert "Thread churn" not in " ".join(
        point_tables.throughput_table(plain, "point_select").notes
    )


def test_verdicts_and_noise_floor_count_lives(tmp_path):
    run_dir = churned(joined(tmp_path, "real-regress-base-a", "fast", scale=1.5), tmp_path / "c")
    run = load_run(run_dir)
    vs = run_verdicts(run)
    (tp,) = [v for v in vs if v.metric == THROUGHPUT]
    assert tp.rounds == 5 and tp.ratio == pytest.approx(1.5) and tp.verdict == "better"
    nf = noise_floor(run, vs)
    plain = load_run(joined(tmp_path, "real-regress-base-a", "fast2", scale=1.5))
    nf_plain = noise_floor(plain, run_verdicts(plain))
    # one spread per (allocator, point) over its 5 lives, the same as without churn
    assert nf.lives == nf_plain.lives == 2
    assert nf.life_spread_pct_median == pytest.approx(nf_plain.life_spread_pct_median)


def test_compare_counts_lives_per_side(tmp_path):
    base = churned(RUNS / "real-regress-base-a", tmp_path / "base")
    new = churned(RUNS / "real-regress-base-b", tmp_path / "new")
    (c,) = compare_runs(base, new).points
    (p,) = compare_runs(RUNS / "real-regress-base-a", RUNS / "real-regress-base-b").points
    assert c.evidence == p.evidence == "repeats 5+5"
    assert (c.ratio, c.lo, c.hi) == pytest.approx((p.ratio, p.lo, p.hi))
    assert c.verdict == p.verdict


def test_a_scenarios_cycles_are_named_as_such_not_as_thread_churn():
    """A fragmentation scenario repeats its level once per cycle in one life, like churn; its
    table says so in the scenario's words (a soak's dump table once said "thread cache size")."""
    run = load_run(RUNS / "real-fragmentation-format5")
    notes = " ".join(point_tables.throughput_table(run, "dump").notes)
    assert "Scenario cycles: each server life ran this level up to" in notes
    assert "Thread churn" not in notes
