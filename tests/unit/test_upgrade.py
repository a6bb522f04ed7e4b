"""Several servers in one run (an upgrade check): the suite's forms, the plan over server x
allocator arms, and the statistics of analysis/upgrade.py on synthetic runs with a known upgrade
effect (NEW/BASE per allocator, the interaction, the server A/A check, verdicts.csv)."""

from __future__ import annotations

import csv
import io
import math
import random
from collections import Counter
from pathlib import Path

import pytest

from analysis import upgrade
from analysis.metrics import BETTER, NONE, WORSE
from analysis.stats import ratio_ci
from analysis.verdicts import CSV_COLUMNS, run_verdicts, verdicts_csv
from rundir.format import FORMAT_VERSION
from rundir.migrations import RawRun, update_to_5
from rundir.read import Run
from suites.errors import SuiteError
from suites.families.registry import server_entries
from suites.runner.plan import ServerPlan, plan_cells
from suites.suite.model import parse_suite, suite_from_dict
from suites.suite.overrides import apply_overrides

REPO = Path(__file__).resolve().parents[2]
SMOKE = (REPO / "configs/suites/smoke.toml").read_text()


def _suite(extra: str):
    return parse_suite(
        SMOKE.replace("buffer_pool_mb = 64", "buffer_pool_mb = 64\n" + extra), "s.toml"
    )


# -- the suite ------------------------------------------------------------------------------------
def test_servers_table_list_and_option_forms_name_the_same_servers():
    a = _suite('servers = { old = "fetched:mariadb-10.11.18", new = "host" }')
    b = _suite('servers = ["old=fetched:mariadb-10.11.18", "new=host"]')
    c = _suite(
        'servers = [{ name = "old", fetched = "mariadb-10.11.18" }, { name = "new", spec = "host" }]'
    )
    d = apply_overrides(_suite(""), servers="old=fetched:mariadb-10.11.18,new=host")
    for s in (a, b, c, d):
        assert [(e.name, e.spec) for e in s.server.servers] == [
            ("old", "fetched:mariadb-10.11.18"),
            ("new", "host"),
        ]
        assert s.server.baseline_name == "old"
        entries = server_entries(s)
        assert [n for n, _ in entries] == ["old", "new"]
        # each entry is the whole [server] section with its own source
        assert entries[0][1].fetched == "mariadb-10.11.18" and entries[1][1].fetched == ""
        assert all(sec.buffer_pool_mb == 64 and not sec.servers for _, sec in entries)
    # recorded as the run's manifest keeps it, and read back the same (--resume, merge)
    again = suite_from_dict(a.as_dict(), "manifest")
    assert again.server.servers == a.server.servers
    # one server: recorded as before servers existed
    assert "servers" not in _suite("").as_dict()["server"]


def test_baseline_server_and_the_options_that_replace_the_servers():
    s = _suite(
        'servers = { old = "fetched:mariadb-10.11.18", new = "host" }\nbaseline_server = "new"'
    )
    assert s.server.baseline_name == "new"
    assert apply_overrides(s, baseline_server="old").server.baseline_name == "old"
    # --server: one server again, the file's list and baseline dropped
    one = apply_overrides(s, server="/usr/sbin/mariadbd")
    assert (one.server.servers, one.server.baseline_server) == ([], "")
    with pytest.raises(SuiteError, match=r"--server .* with --servers: give one server"):
        apply_overrides(s, server="mariadbd", servers="a=host,b=host")
    with pytest.raises(SuiteError, match=r"--baseline-server x: server\.baseline_server: not one"):
        apply_overrides(s, baseline_server="x")


# -- the plan: arms server x allocator ------------------------------------------------------------
def test_every_round_runs_every_server_allocator_arm_once_in_a_balanced_order():
    servers = [ServerPlan("old", "old:mariadb-10.11.18"), ServerPlan("new", "new:mariadb-10.11.19")]
    cells = plan_cells(servers, ["glibc", "jemalloc"], ["system"], 4)
    arms = {(c.server, c.allocator) for c in cells}
    assert len(arms) == 4
    for rnd in range(1, 5):
        mine = [(c.server, c.allocator) for c in cells if c.round == rnd]
        assert sorted(mine) == sorted(arms)  # each arm once per round
    # Williams: over 4 rounds every arm takes every place once ...
    places = Counter((i % 4, (c.server, c.allocator)) for i, c in enumerate(cells))
    assert set(places.values()) == {1}
    # ... and follows every other arm equally often (once) within rounds
    follows = Counter(
        ((a.server, a.allocator), (b.server, b.allocator))
        for a, b in zip(cells, cells[1:], strict=False)
        if a.round == b.round
    )
    assert set(follows.values()) == {1} and len(follows) == 12
    # the baseline server's baseline allocator opens the run; cell ids name the server
    assert (cells[0].server, cells[0].allocator) == ("old", "glibc")
    assert cells[0].id == "old_mariadb-10.11.18__glibc__thp-system__r1"
    assert len({c.id for c in cells}) == len(cells)


def test_a_server_with_its_own_allocators_runs_only_those():
    servers = [
        ServerPlan("a", "a:x-1", ("glibc", "jemalloc")),
        ServerPlan("b", "b:y-2", ("jemalloc",)),
    ]
    cells = plan_cells(servers, [], ["system"], 2)
    assert sorted((c.server, c.allocator) for c in cells if c.round == 1) == [
        ("a", "glibc"), ("a", "jemalloc"), ("b", "jemalloc"),
    ]  # fmt: skip


# -- the statistics on synthetic runs -------------------------------------------------------------
SPEED = {"glibc": 1.0, "jemalloc": 1.08}


def synthetic(
    rounds: int,
    effect: dict[tuple[str, str], float],
    *,
    sigma: float = 0.02,
    round_sd: float = 0.25,
    seed: int = 1,
    same_build: bool = False,
    allocators: tuple[str, ...] = ("glibc", "jemalloc"),
) -> Run:
    """A run of two servers (old, new) x `allocators`, `rounds` rounds, in memory. Each life's
    throughput: a base rate x the allocator's speed x effect[(server, allocator)] x a drift shared
    by the whole round (sd `round_sd` on the log scale: big, as between runs on a loaded VM) x its
    own noise (sd `sigma`). p95 latency is the inverse; RSS at stop grows with throughput."""
    rng = random.Random(seed)
    labels = {"old": "old:mariadb-10.11.18", "new": "new:mariadb-10.11.19"}
    binary = {"old": "/srv/old/mariadbd", "new": "/srv/new/mariadbd"}
    if same_build:
        labels = {"old": "old:mariadb-10.11.19", "new": "new:mariadb-10.11.19"}
        binary = {"old": "/usr/sbin/mariadbd", "new": "/usr/sbin/mariadbd"}
    cells, rows = [], []
    for rnd in range(1, rounds + 1):
        drift = math.exp(rng.gauss(0, round_sd))
        for srv in ("old", "new"):
            for a in allocators:
                cid = f"{labels[srv]}__{a}__thp-system__r{rnd}".replace(":", "_")
                q = 20000 * SPEED.get(a, 1.0) * effect.get((srv, a), 1.0) * drift
                q *= math.exp(rng.gauss(0, sigma))
                cells.append(
                    {
                        "id": cid,
                        "index": len(cells),
                        "status": "ok",
                        "round": rnd,
                        "server": {"label": labels[srv], "name": srv, "binary": binary[srv]},
                        "allocator": {"name": a},
                        "engine": "innodb",
                    }
                )
                rows.append(
                    {
                        "cell": cid, "server": labels[srv], "allocator": a, "thp": "system",
                        "workload": "point_select", "threads": 16, "repeat": rnd, "status": "ok",
                        "qps": q, "tps": q, "lat_p95_ms": 16000.0 / q, "engine": "",
                        "rss_start_kb": 100_000.0, "rss_end_kb": 300_000.0 * (q / 20000) ** 0.1,
                    }
                )  # fmt: skip
    manifest = {
        "format_version": 5,
        "run_id": "synthetic-upgrade",
        "design": {"baseline": "glibc", "baseline_server": "old"},
        "servers": [
            {"name": s, "label": labels[s], "binary": binary[s], "version_string": labels[s][4:]}
            for s in ("old", "new")
        ],
        "cells": cells,
    }
    return Run(path=Path("/synthetic-upgrade"), manifest=manifest, rows=rows)


def _one(uv, metric, allocator):
    (v,) = [x for x in uv if x.metric == metric and x.allocator == allocator]
    return v


def test_a_known_10pct_upgrade_regression_is_found_and_the_allocator_choice_carries_over():
    effect = {("new", "glibc"): 0.90, ("new", "jemalloc"): 0.90}
    run = synthetic(10, effect)
    uv = upgrade.upgrade_verdicts(run)
    for a in ("glibc", "jemalloc"):
        v = _one(uv, upgrade.THROUGHPUT, a)
        assert (v.server, v.baseline_server) == ("new:mariadb-10.11.19", "old:mariadb-10.11.18")
        assert v.lo < 0.90 < v.hi and v.verdict == WORSE and v.word == "slower"
        p95 = _one(uv, upgrade.LAT_P95, a)  # latency up by 1/0.9: "higher p95", the worse side
        assert p95.lo < 1 / 0.90 < p95.hi and p95.verdict == WORSE and p95.word == "higher p95"
    inter = _one(uv, upgrade.INTERACTION, "jemalloc")
    assert (inter.baseline, inter.lo < 1 < inter.hi, inter.verdict) == ("glibc", True, NONE)
    assert inter.word == upgrade.CARRIES_OVER
    (answer,) = upgrade.answers(run, run_verdicts(run), uv)
    assert answer.verdict == upgrade.CARRIES_OVER
    # The drift between rounds (sd 25%) is 12x the lives' own noise: without the pairing, the
    # same lives compared as two separate runs (Welch, as `compare` does) cannot see the 10%.
    old = [
        r["qps"] for r in run.rows if r["server"].startswith("old") and r["allocator"] == "glibc"
    ]
    new = [
        r["qps"] for r in run.rows if r["server"].startswith("new") and r["allocator"] == "glibc"
    ]
    unpaired = ratio_ci(old, new)
    paired = _one(uv, upgrade.THROUGHPUT, "glibc")
    assert unpaired.lo < 1 < unpaired.hi
    # far wider on the log scale (the widths the intervals are built on)
    assert math.log(unpaired.hi / unpaired.lo) > 5 * math.log(paired.hi / paired.lo)


def test_an_allocator_that_gains_on_glibc_only_after_the_upgrade_changes_the_choice():
    effect = {("new", "glibc"): 0.90, ("new", "jemalloc"): 0.90 * 1.15}
    run = synthetic(10, effect)
    uv = upgrade.upgrade_verdicts(run)
    inter = _one(uv, upgrade.INTERACTION, "jemalloc")
    assert inter.lo < 1.15 < inter.hi and inter.verdict == BETTER
    assert inter.word == upgrade.CHANGES and "jemalloc gains on glibc" in inter.meaning
    (answer,) = upgrade.answers(run, run_verdicts(run), uv)
    assert answer.verdict == upgrade.CHANGES
    assert "changes with the upgrade (jemalloc 1.1" in answer.sentence()
    glance = upgrade.glance_table(run, run_verdicts(run), uv)
    last = [c.text for c in glance.rows[-1]]
    assert last[0] == "recommended" and last[-1] == upgrade.CHANGES


def test_servers_without_a_difference_are_rarely_called_different():
    """False positives of NEW/BASE and of the interaction, 3 rounds, at the spent level (5%):
    simulated A/A servers with round drift and per-life noise."""
    called = Counter()
    n = 300
    for seed in range(n):
        uv = upgrade.upgrade_verdicts(synthetic(3, {}, sigma=0.10, round_sd=0.2, seed=seed))
        for v in uv:
            if v.metric in (upgrade.THROUGHPUT, upgrade.INTERACTION) and not (v.lo < 1 < v.hi):
                called[v.metric] += 1
    # 2 allocators x 1 point = 600 NEW/BASE intervals; 300 interactions
    assert called[upgrade.THROUGHPUT] / (2 * n) <= 0.08
    assert called[upgrade.INTERACTION] / n <= 0.08


def test_one_build_under_two_names_is_an_aa_check_and_its_alarm_fires_only_on_a_difference():
    quiet = synthetic(6, {}, same_build=True)
    (pair,) = upgrade.pairs(quiet)
    assert upgrade.same_build(quiet, pair)
    uv = upgrade.upgrade_verdicts(quiet)
    assert not upgrade.aa_alarm(quiet, uv)
    notes = upgrade.glance_table(quiet, run_verdicts(quiet), uv).notes
    assert any("same build (a server A/A check)" in n for n in notes)
    # the same build made 30% slower under one name: the machine was too noisy, said loudly
    loud = synthetic(6, {("new", "glibc"): 0.7, ("new", "jemalloc"): 0.7}, same_build=True)
    alarm = upgrade.aa_alarm(loud, upgrade.upgrade_verdicts(loud))
    assert alarm and all(v.significant for v in alarm)
    assert upgrade.aa_alarm_text(alarm).startswith("WARNING: one server build under two names")
    # different builds are no A/A check
    other = synthetic(6, {("new", "glibc"): 0.7})
    assert not upgrade.aa_alarm(other, upgrade.upgrade_verdicts(other))


def test_verdicts_csv_rows_name_the_server_pair():
    run = synthetic(4, {("new", "glibc"): 0.9, ("new", "jemalloc"): 0.9})
    rows = list(
        csv.DictReader(io.StringIO(verdicts_csv(run_verdicts(run) + upgrade.upgrade_verdicts(run))))
    )
    assert list(rows[0]) == CSV_COLUMNS and "baseline_server" in CSV_COLUMNS
    within = [r for r in rows if r["server"] == r["baseline_server"]]
    between = [r for r in rows if r["server"] != r["baseline_server"]]
    assert {r["server"] for r in within} == {"old:mariadb-10.11.18", "new:mariadb-10.11.19"}
    assert {(r["server"], r["baseline_server"]) for r in between} == {
        ("new:mariadb-10.11.19", "old:mariadb-10.11.18")
    }
    metrics = Counter(r["metric"] for r in between)
    assert metrics == {
        "throughput": 2,
        "lat_p95": 2,
        "interaction": 1,
        "rss_stop": 2,
        "rss_growth": 2,
    }
    inter = next(r for r in between if r["metric"] == "interaction")
    assert (inter["allocator"], inter["baseline"]) == ("jemalloc", "glibc")


def test_one_round_gives_no_verdict_between_servers():
    run = synthetic(1, {})
    assert upgrade.upgrade_verdicts(run) == []
    assert "one round only" in upgrade.why_no_upgrade_verdicts(run)
    t = upgrade.glance_table(run, [], [])
    assert not t.rows and "No verdicts between the servers" in t.notes[0]


# -- format 5 ----------------------------------------------------------------------------------
def test_update_to_5_records_the_one_server_of_an_older_run():
    manifest = {
        "format_version": 4,
        "design": {"baseline": "glibc"},
        "cells": [
            {"id": "a", "engine": "innodb", "server": {"label": "mariadb-10.11.19", "flavor": "mariadb", "version": "10.11.19"}},
            {"id": "b", "engine": "rocksdb", "server": {"label": "mariadb-10.11.19+rocksdb"}},
            {"id": "c", "server": {}},
        ],
    }  # fmt: skip
    got = update_to_5(RawRun(manifest=manifest)).manifest
    assert got["servers"] == [
        {"name": "", "label": "mariadb-10.11.19", "flavor": "mariadb", "version": "10.11.19"}
    ]
    assert got["design"]["baseline_server"] is None
    assert not upgrade.several(Run(Path("/x"), got, []))


def test_resume_reads_back_each_cells_server_and_refuses_a_changed_one():
    from suites.runner.matrix import _pending
    from suites.runner.resume import check_resumable, plan_from_manifest

    servers = [ServerPlan("old", "old:mariadb-10.11.18"), ServerPlan("new", "new:mariadb-10.11.19")]
    cells = plan_cells(servers, ["glibc", "jemalloc"], ["system"], 2)
    manifest = {
        "format_version": FORMAT_VERSION,
        "suite": {},
        "host": {},
        "cells": [_pending(c) for c in cells],
    }
    assert plan_from_manifest(manifest, "old:mariadb-10.11.18") == cells
    labels = ["old:mariadb-10.11.18", "new:mariadb-10.11.19"]
    check_resumable(manifest, {}, labels, {})
    with pytest.raises(
        SuiteError, match=r"--resume: the server is now old:mariadb-10.11.18, new:mariadb-10.11.20"
    ):
        check_resumable(manifest, {}, [labels[0], "new:mariadb-10.11.20"], {})


def test_bench_rows_say_which_design_was_narrower_and_whether_the_aa_held():
    from rich.table import Table

    from bench.table import upgrade_rows
    from bench.upgrade import half_width_pct

    assert half_width_pct(0.81, 1.21) == pytest.approx(100 * (1.1 / 0.9 - 1), rel=1e-9)
    assert half_width_pct(None, 1.0) is None and half_width_pct(0.0, 1.0) is None
    fig = {
        "old": "mariadb-10.11.18",
        "rounds": 4,
        "ratio": 0.5,
        "inrun": {"median_half_width_pct": 5.0, "points": 8, "wall_s": 300, "significant": 2, "load": [1.0, 2.0]},
        "separate": {"median_half_width_pct": 10.0, "points": 8, "wall_s": 310, "significant": 0, "load": [3.0, 0.5]},
        "aa": {"verdicts": 24, "called_different": 0, "median_half_width_pct": 6.0, "load": [1.0, 1.0]},
    }  # fmt: skip
    t = Table()
    for _ in range(5):
        t.add_column("")
    upgrade_rows(t, fig)
    cells = [list(col._cells) for col in t.columns]
    assert "0.50x the width" in cells[2][0] and "yes" in cells[4][0]
    assert "load average 0.5-3.0" in cells[1][0]
    assert "0 of 24" in cells[2][1] and "yes" in cells[4][1]
    upgrade_rows(t, fig | {"ratio": 1.3, "aa": fig["aa"] | {"called_different": 1}})
    cells = [list(col._cells) for col in t.columns]
    assert "NOT met" in cells[4][2] and "NOT met" in cells[4][3]


# -- the server A/A on recorded data ------------------------------------------------------------
AA_RUN = REPO / "tests/fixtures/runs/real-servers-aa-format5"


def test_recorded_server_aa_one_build_under_two_names_is_not_called_different():
    from rundir.read import load_run

    run = load_run(AA_RUN)
    (pair,) = upgrade.pairs(run)
    assert (pair.base_name, pair.new_name) == ("a", "b")
    assert (pair.base, pair.new) == ("a:mariadb-10.11.19", "b:mariadb-10.11.19")
    assert upgrade.same_build(run, pair) and upgrade.same_flavor(run, pair)
    uv = upgrade.upgrade_verdicts(run)
    assert Counter(v.metric for v in uv) == {
        "throughput": 2, "lat_p95": 2, "rss_stop": 2, "rss_growth": 2, "interaction": 1,
    }  # fmt: skip
    assert all(v.rounds == 3 and v.baseline_server == pair.base for v in uv)
    assert not any(v.significant for v in uv) and not upgrade.aa_alarm(run, uv)
    assert not upgrade.differences(run, pair)  # one build: nothing differs besides the name
    glance = upgrade.glance_table(run, run_verdicts(run), uv)
    assert any("same build (a server A/A check)" in n for n in glance.notes)
    # The same recording with b's throughput cut by 60% in every life: now called different,
    # and said at the top as the machine's noise (these are one build).
    for r in run.rows:
        if r["server"] == pair.new:
            r["qps"] *= 0.4
    alarm = upgrade.aa_alarm(run, upgrade.upgrade_verdicts(run))
    assert {(v.metric, v.allocator) for v in alarm} == {
        ("throughput", "glibc"),
        ("throughput", "jemalloc"),
    }
