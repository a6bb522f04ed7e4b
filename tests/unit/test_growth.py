"""Growth, its verdicts in MB per hour and the reports' claims (analysis/growth.py,
growth_rate.py, fragmentation.py) on made-up lives whose answer is known, and the dump client's
lookup (one line naming the package when it is missing)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from analysis import growth as g
from analysis import growth_rate as gr
from analysis import verdicts
from analysis.fragmentation import REPRODUCED, claims_table, growth_table, release_table
from rundir.read import Run
from servers.root import ServerRoot
from suites.errors import SuiteError
from suites.families.mysql.flavor import ServerBinary
from suites.workloads.fragmentation.dumpclient import find_dump_client

SERVER = "mariadb-10.11.19"


def rows_of(cell, alloc, rnd, workload, rss, held=None, used=None, tps=100.0, returned=None):
    out = []
    for k, r in enumerate(rss, 1):
        out.append(
            {
                "cell": cell, "server": SERVER, "allocator": alloc, "thp": "system",
                "repeat": rnd, "workload": workload, "threads": 4, "status": "ok",
                "scenario_cycle": k, "scenario_end_s": 60.0 * k, "rss_end_kb": r, "rss_start_kb": r, "rss_peak_kb": r,
                "alloc_held_resident_kb": None if held is None else held[k - 1],
                "server_memory_used_kb": None if used is None else used[k - 1],
                "tps": tps, "qps": tps, "burst_returned": returned, "burst_return_s": None,
            }
        )  # fmt: skip
    return out


def make_run(lives: dict[tuple[str, int], dict[str, list]]) -> Run:
    """lives: (allocator, round) -> workload -> RSS per cycle (kB)."""
    rows, cells = [], []
    for i, ((alloc, rnd), wls) in enumerate(lives.items()):
        cid = f"{SERVER}__{alloc}__thp-system__r{rnd}"
        cells.append({"id": cid, "index": i, "status": "ok", "allocator": {"name": alloc}})
        for wl, spec in wls.items():
            rows += rows_of(cid, alloc, rnd, wl, **spec)
    manifest = {"cells": cells, "design": {"baseline": "glibc"}, "status": "finished"}
    return Run(path=Path("/nonexistent"), manifest=manifest, rows=rows)


def test_slope_and_its_interval():
    s = g.slope([10.0, 12.0, 14.0, 16.0])
    assert s.kb == pytest.approx(2.0) and s.lo == pytest.approx(2.0) and s.hi == pytest.approx(2.0)
    s = g.slope([10.0, 13.0, 14.0, 17.0])
    assert s.kb == pytest.approx(2.2) and s.lo < 2.2 < s.hi
    assert g.slope([1.0, 2.0]).lo is None and g.slope([1.0]) is None


def steady(start, per_cycle, n=8, noise=0.0):
    return [start + per_cycle * k + (noise if k % 2 else -noise) for k in range(n)]


LIVES = {
    # glibc: the dump keeps 2 MB per cycle, the server's own account flat
    **{
        ("glibc", r): {
            "dump": {
                "rss": steady(200_000, 2048, noise=100 * r),
                "used": [50_000] * 8,
                "held": steady(10_000, 2000),
            },
            "spike": {"rss": [300_000, 300_500], "returned": 0.1 + 0.01 * r},
        }  # fmt: skip
        for r in (1, 2, 3)
    },
    # tcmalloc: levelled off after warming up
    **{
        ("tcmalloc", r): {
            "dump": {
                "rss": [200_000, 201_000, 201_500, 201_800] + [201_800 + 10 * r] * 4,
                "used": [50_000] * 8,
                "held": [1000] * 8,
            },
            "spike": {"rss": [300_000, 300_500], "returned": 0.2 + 0.01 * r},
        }  # fmt: skip
        for r in (1, 2, 3)
    },
    # jemalloc: grows like glibc
    **{
        ("jemalloc", r): {
            "dump": {
                "rss": steady(201_000, 2100, noise=50 * r),
                "used": [50_000] * 8,
                "held": steady(9_000, 2100),
            },
            "spike": {"rss": [300_000, 300_500], "returned": 0.9 + 0.01 * r},
        }  # fmt: skip
        for r in (1, 2, 3)
    },
}


@pytest.fixture(scope="module")
def run() -> Run:
    return make_run(LIVES)


def test_lives_and_states(run):
    lives = {(x.allocator, x.workload, x.repeat): x for x in gr.life_rates(run)}
    dump = lives[("glibc", "dump", 1)]
    # 2048 kB per cycle, a cycle a minute: 120 MB per hour, 200 MB per 100 cycles
    assert dump.cycles == 8 and dump.hours == pytest.approx(7 / 60)
    assert dump.rss.value == pytest.approx(120, abs=10) and dump.state(10) == gr.GROWING
    assert dump.rss_per_100.value == pytest.approx(200, abs=15)
    assert dump.account.value == 0 and dump.held.value == pytest.approx(2000 / 1024 * 60)
    assert lives[("tcmalloc", "dump", 2)].state(10) == gr.LEVELLED
    # too few cycles for growth: a spike's release instead
    assert ("jemalloc", "spike", 3) not in lives
    spike = {(x.allocator, x.workload, x.repeat): x for x in g.life_growth(run)}
    assert spike[("jemalloc", "spike", 3)].returned == pytest.approx(0.93)


def test_verdicts_paired_by_round(run):
    judged = {(v.metric, v.workload, v.allocator): v for v in verdicts.run_verdicts(run, "glibc")}
    tc = judged[(gr.RSS_GROWTH_MB_PER_HOUR, "dump", "tcmalloc")]
    assert tc.verdict == "better" and tc.word == "grows less" and tc.unit == "MB/h"
    # a difference in MB/h, never a ratio: tcmalloc's last half is flat, glibc adds ~120 MB/h
    lives = {
        (x.allocator, x.repeat): x.rss.value for x in gr.life_rates(run) if x.workload == "dump"
    }
    diffs = [lives[("tcmalloc", r)] - lives[("glibc", r)] for r in (1, 2, 3)]
    assert min(diffs) <= tc.ratio <= max(diffs) and tc.hi < 0
    jm = judged[(gr.RSS_GROWTH_MB_PER_HOUR, "dump", "jemalloc")]
    assert jm.verdict == "none" and jm.meaning == "no difference beyond 10 MB/h"
    assert -10 <= jm.lo <= jm.hi <= 10
    assert judged[(gr.HELD_GROWTH_MB_PER_HOUR, "dump", "tcmalloc")].verdict == "better"
    back = judged[(g.BURST_RETURNED, "spike", "jemalloc")]
    assert back.verdict == "better" and back.word == "returns more"
    assert back.ratio == pytest.approx(1.8)  # 80 points more of the burst
    assert (gr.RSS_GROWTH_MB_PER_HOUR, "spike", "jemalloc") not in judged
    csv_text = verdicts.verdicts_csv(list(judged.values()))
    for metric in (*g.METRICS, *gr.METRICS):
        assert f",{metric}," in csv_text
    # growth rows carry no ratio: the ratio columns are empty, the difference has its unit
    import csv
    import io

    for row in csv.DictReader(io.StringIO(csv_text)):
        if row["metric"] in gr.METRICS:
            assert row["ratio"] == row["lo"] == row["hi"] == ""
            assert row["unit"] == "MB/h" and float(row["diff_lo"]) <= float(row["diff_hi"])


def test_report_tables_and_the_mdev_30889_claim(run):
    judged = verdicts.run_verdicts(run, "glibc")
    growth = growth_table(run, judged, "glibc")
    col = growth.columns.index("growth vs baseline")
    tc = next(r for r in growth.rows if r[0].text == "dump" and r[1].text == "tcmalloc")
    assert "MB/h" in tc[col].text and "grows less" in tc[col].text and "×" not in tc[col].text
    state = growth.columns.index("state")
    glibc = next(r for r in growth.rows if r[1].text == "glibc")
    assert (
        glibc[state].text.startswith("still growing") and "still growing 3/3" in glibc[state].text
    )
    release = release_table(run, judged, "glibc")
    assert {r[0].text for r in release.rows} == {"glibc", "tcmalloc", "jemalloc"}
    claims = {r[0].text: r for r in claims_table(run, judged, "glibc").rows}
    # glibc grows dump after dump, tcmalloc does not, jemalloc does: MDEV-30889 as reported
    assert claims["MDEV-30889"][4].text == REPRODUCED
    assert "tcmalloc vs glibc" in claims["MDEV-30889"][3].text
    # no jemalloc-bg / tuned arms in this run: those claims are left out
    assert "mariadb-operator #1808" not in claims and "Callaghan 2025" not in claims


def test_no_growth_verdict_with_one_round():
    one = make_run({k: v for k, v in LIVES.items() if k[1] == 1})
    assert verdicts.run_verdicts(one, "glibc") == []
    assert claims_table(one, [], "glibc").notes


def test_levelled_off_is_within_the_margin_in_mb_per_hour():
    life = gr.life_rates(
        make_run({("glibc", 1): {"dump": {"rss": [100_000] * 4 + steady(100_000, 100, 4)}}})
    )[0]
    # 100 kB per one-minute cycle in the last half = 5.9 MB/h: within 10 MB/h, a tight interval
    assert life.state(10) == gr.LEVELLED and math.isclose(life.tail.value, 100 / 1024 * 60)
    assert life.state(5) == gr.GROWING


def _binary(tmp_path: Path, flavor: str, root: bool) -> ServerBinary:
    r = ServerRoot(str(tmp_path), None, None, None, None) if root else None
    return ServerBinary(
        path="/usr/sbin/mysqld" if root else str(tmp_path / "sbin" / "mysqld"),
        flavor=flavor, version="9.7.4", version_string="9.7.4", install_tool=None,
        basedir="/usr" if root else str(tmp_path), root=r,
    )  # fmt: skip


def test_dump_client_in_a_root_and_its_package_when_missing(tmp_path):
    with pytest.raises(
        SuiteError, match=r"no mysqldump in the server root .*install package mysql-client-core"
    ):
        find_dump_client(_binary(tmp_path, "mysql", root=True))
    dump = tmp_path / "usr" / "bin" / "mysqldump"
    dump.parent.mkdir(parents=True)
    dump.write_text("#!/bin/sh\n")
    dump.chmod(0o755)
    found = find_dump_client(_binary(tmp_path, "mysql", root=True))
    assert found.path == "/usr/bin/mysqldump" and found.in_root


def test_dump_client_beside_a_basedir_server(tmp_path):
    (tmp_path / "bin").mkdir()
    dump = tmp_path / "bin" / "mariadb-dump"
    dump.write_text("#!/bin/sh\n")
    dump.chmod(0o755)
    found = find_dump_client(_binary(tmp_path, "mariadb", root=False))
    assert found.path == str(dump) and not found.in_root


RECORDED = Path(__file__).parent.parent / "fixtures" / "runs" / "real-fragmentation-format5"


def test_a_recorded_run_gives_the_three_memory_metrics_and_adds_up():
    """The recorded format-5 run (real MariaDB, glibc and jemalloc, two rounds): its parts add up
    to RSS at every cycle, and the verdicts have each memory metric."""
    from rundir.read import load_run

    run = load_run(RECORDED)
    for r in run.rows:
        parts = sum(
            r[k] for k in ("heap_resident_kb", "bufpool_resident_kb", "stacks_kb", "file_kb")
        )
        assert abs(parts - r["rss_end_kb"]) <= r["rss_end_kb"] / 100
    metrics = {(v.workload, v.metric) for v in verdicts.run_verdicts(run, "glibc")}
    assert {
        ("dump", gr.RSS_GROWTH_MB_PER_HOUR),
        ("dump", gr.HELD_GROWTH_MB_PER_HOUR),
        ("spike", g.BURST_RETURNED),
    } <= metrics
