"""Growth per cycle, its verdicts and the reports' claims (analysis/growth.py, fragmentation.py)
on made-up lives whose answer is known, and the dump client's lookup (one line naming the
package when it is missing)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from analysis import growth as g
from analysis import verdicts
from analysis.fragmentation import REPRODUCED, claims_table, growth_table, release_table
from rundir.read import Run
from servers.mysql_flavor import ServerBinary
from servers.root import ServerRoot
from suites.errors import SuiteError
from suites.workloads.fragmentation.dumpclient import find_dump_client

SERVER = "mariadb-10.11.19"


def rows_of(cell, alloc, rnd, workload, rss, held=None, used=None, tps=100.0, returned=None):
    out = []
    for k, r in enumerate(rss, 1):
        out.append(
            {
                "cell": cell, "server": SERVER, "allocator": alloc, "thp": "system",
                "repeat": rnd, "workload": workload, "threads": 4, "status": "ok",
                "scenario_cycle": k, "rss_end_kb": r, "rss_start_kb": r, "rss_peak_kb": r,
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
                "rss": [200_000, 210_000, 215_000, 216_000] + [216_000 + 10 * r] * 4,
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
    lives = {(x.allocator, x.workload, x.repeat): x for x in g.life_growth(run)}
    dump = lives[("glibc", "dump", 1)]
    assert dump.cycles == 8 and dump.half == 4
    assert dump.growth.kb == pytest.approx(2048, abs=150) and dump.state == g.GROWING
    assert dump.server_growth.kb == 0 and dump.held.kb == pytest.approx(2000)
    assert lives[("tcmalloc", "dump", 2)].state == g.LEVELLED
    # too few cycles for growth: a spike's release instead
    spike = lives[("jemalloc", "spike", 3)]
    assert spike.growth is None and spike.returned == pytest.approx(0.93)


def test_verdicts_paired_by_round(run):
    judged = {(v.metric, v.workload, v.allocator): v for v in verdicts.run_verdicts(run, "glibc")}
    tc = judged[(g.RSS_GROWTH_PER_CYCLE, "dump", "tcmalloc")]
    assert tc.verdict == "better" and tc.word == "grows less per cycle" and tc.ratio < 1
    # the ratio: 1 + (difference per cycle) x HORIZON / glibc's RSS at the end
    glibc_end = sum(LIVES[("glibc", r)]["dump"]["rss"][-1] for r in (1, 2, 3)) / 3
    diffs = [
        g.slope(LIVES[("tcmalloc", r)]["dump"]["rss"][4:]).kb
        - g.slope(LIVES[("glibc", r)]["dump"]["rss"][4:]).kb
        for r in (1, 2, 3)
    ]
    assert tc.ratio == pytest.approx(1 + sum(diffs) / 3 * g.HORIZON / glibc_end)
    assert judged[(g.RSS_GROWTH_PER_CYCLE, "dump", "jemalloc")].verdict == "none"
    assert judged[(g.HELD_PER_CYCLE, "dump", "tcmalloc")].verdict == "better"
    back = judged[(g.BURST_RETURNED, "spike", "jemalloc")]
    assert back.verdict == "better" and back.word == "returns more"
    assert back.ratio == pytest.approx(1.8)  # 80 points more of the burst
    assert (g.RSS_GROWTH_PER_CYCLE, "spike", "jemalloc") not in judged
    csv_text = verdicts.verdicts_csv(list(judged.values()))
    for metric in g.METRICS:
        assert f",{metric}," in csv_text


def test_report_tables_and_the_mdev_30889_claim(run):
    judged = verdicts.run_verdicts(run, "glibc")
    growth = growth_table(run, judged, "glibc")
    col = growth.columns.index("growth vs baseline")
    tc = next(r for r in growth.rows if r[0].text == "dump" and r[1].text == "tcmalloc")
    assert "grows less per cycle" in tc[col].text
    assert "still growing 3/3" in next(r for r in growth.rows if r[1].text == "glibc")[6].text
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


def test_level_threshold_is_a_share_of_rss():
    life = g.life_growth(
        make_run({("glibc", 1): {"dump": {"rss": [100_000] * 4 + steady(100_000, 200, 4)}}})
    )[0]
    # 200 kB per cycle over 4 cycles = 0.8% of 100 MB: under 1%, with a tight interval
    assert life.state == g.LEVELLED and math.isclose(life.growth.kb, 200)


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
        ("dump", g.RSS_GROWTH_PER_CYCLE),
        ("dump", g.HELD_PER_CYCLE),
        ("spike", g.BURST_RETURNED),
    } <= metrics
