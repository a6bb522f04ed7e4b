"""The hugepage study's verdicts and report section (analysis/hugepage_verdicts.py,
hugepage_report.py) on synthetic runs: each setting against THP never per allocator, paired by
round; memory counted with the hugetlb pages RSS leaves out; the three questions answered in words
before the tables."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from analysis.hugepage_report import answers, hugepage_section
from analysis.hugepage_verdicts import (
    LAT_P95,
    MEMORY_GROWTH,
    MEMORY_STOP,
    THROUGHPUT,
    hugepage_verdicts,
    why_none,
)
from analysis.metrics import BETTER, WORSE
from analysis.report import render
from rundir.read import load_run
from tests.fixtures.make_runs import make_run

SETTINGS = ("always", "never", "never+large-pages")
RECORDED = Path(__file__).resolve().parents[1] / "fixtures" / "runs" / "real-hugepages-smoke"


def _edit_cells(run_dir, fn) -> None:
    """fn(cell record, rows) changes a cell's record in place (cells/ is the run's truth)."""
    for p in sorted((run_dir / "cells").glob("*.json")):
        rec = json.loads(p.read_text())
        fn(rec["cell"], rec["rows"])
        p.write_text(json.dumps(rec))
    m = json.loads((run_dir / "manifest.json").read_text())
    by_id = {json.loads(p.read_text())["cell"]["id"]: json.loads(p.read_text())["cell"]
             for p in (run_dir / "cells").glob("*.json")}  # fmt: skip
    m["cells"] = [by_id.get(c["id"], c) for c in m["cells"]]
    (run_dir / "manifest.json").write_text(json.dumps(m))
    (run_dir / "results.csv").unlink()  # rebuilt from the records by the reader


@pytest.fixture
def study(tmp_path):
    """Three rounds of glibc and jemalloc under THP always, never and never+large-pages, where
    `always` gives 30% more throughput and large pages move 200 MB of the pool out of RSS into
    hugetlb pages (the footprint stays the same)."""
    path = make_run(tmp_path, "synthetic-hugepages", allocators=("glibc", "jemalloc"),
                    thp_modes=SETTINGS, threads=(8, 64), repeats=3)  # fmt: skip

    def change(cell, rows):
        if cell["thp"]["requested"] == "always":
            for r in rows:
                r["qps"], r["tps"] = r["qps"] * 1.3, r["tps"] * 1.3
        if cell["thp"]["requested"] == "never+large-pages":
            for mark in cell["memory"].values():
                mark["rss_kb"] -= 200 * 1024
                mark["hugetlb_kb"] = 200 * 1024

    _edit_cells(path, change)
    return load_run(path)


def test_every_setting_is_judged_against_never_per_allocator(study):
    vs = hugepage_verdicts(study)
    assert {(v.allocator, v.setting) for v in vs} == {
        (a, s) for a in ("glibc", "jemalloc") for s in ("always", "never+large-pages")
    }
    assert {v.baseline for v in vs} == {"never"}
    per = [v for v in vs if v.allocator == "glibc" and v.setting == "always"]
    assert sorted({v.metric for v in per}) == sorted(
        {THROUGHPUT, LAT_P95, MEMORY_STOP, MEMORY_GROWTH}
    )
    thr = [v for v in per if v.metric == THROUGHPUT]
    assert len(thr) == 4  # two workloads x two thread levels
    for v in thr:
        assert v.rounds == 3 and math.isfinite(v.lo) and v.lo < v.ratio < v.hi
        assert v.ratio == pytest.approx(1.3, rel=0.05) and v.verdict == BETTER
    # Large pages moved the pool out of RSS, not out of memory: RSS + hugetlb is what is judged.
    mem = next(v for v in vs if v.setting == "never+large-pages" and v.metric == MEMORY_STOP)
    assert mem.ratio == pytest.approx(1.0, abs=0.02) and mem.verdict != WORSE


def test_the_three_questions_come_in_words_first(study):
    qs = answers(study, hugepage_verdicts(study))
    assert [q["question"][:20] for q in qs] == [
        "Should THP be on for",
        "Should the buffer po",
        "What does the kernel",
    ]
    thp = qs[0]["answers"]
    assert len(thp) == 2 and all(a.startswith("On mariadb-10.11.19 with ") for a in thp)
    glibc = next(a for a in thp if " with glibc," in a)
    assert "always against never: throughput at oltp_ro@64 1.3" in glibc and "faster" in glibc
    assert "memory at stop (RSS + hugetlb)" in glibc
    # the synthetic MariaDB turned THP off for itself: the answer says THP reached its pool only
    assert "buffer pool only" in glibc
    assert all("never+large-pages against never" in a for a in qs[1]["answers"])
    html, md = render(study)
    words = html.index("Should the buffer pool use explicit huge pages?")
    assert words < html.index('id="hugepage-verdicts"') < html.index('id="hugepage-cost"')
    assert md.index("**2. Should the buffer pool") < md.index("Hugepage settings against THP")


def test_one_round_gives_no_verdicts_and_says_why(tmp_path):
    run = load_run(make_run(tmp_path, "synthetic-hp-once", allocators=("glibc",),
                            thp_modes=("always", "never"), threads=(8,)))  # fmt: skip
    assert hugepage_verdicts(run) == [] and "one round only" in why_none(run)
    section = hugepage_section(run)
    assert section["answers"][0]["answers"][0].startswith("No verdicts: one round only")
    assert section["answers"][1]["answers"][0].startswith("Not studied")
    assert "No verdicts: one round only" in section["verdict_table"].notes[0]


def test_a_run_without_never_or_with_one_setting_has_no_study(tmp_path):
    run = load_run(make_run(tmp_path, "synthetic-hp-system", repeats=2))
    assert hugepage_section(run) is None  # one setting: nothing to compare
    run = load_run(make_run(tmp_path, "synthetic-hp-nonever", thp_modes=("always", "madvise"),
                            repeats=2))  # fmt: skip
    assert hugepage_verdicts(run) == [] and "'never'" in why_none(run)


def test_a_recorded_hugepage_run_says_where_the_huge_pages_were():
    """real-hugepages-smoke (format 5, MySQL 9.7.4): THP reached the heap under `always`, and the
    large-pages cells' buffer pool was on hugetlb pages, which RSS leaves out."""
    run = load_run(RECORDED)
    where = {row[2].text: row for row in hugepage_section(run)["where_table"].rows}
    cols = hugepage_section(run)["where_table"].columns
    at = {name: cols.index(name) for name in cols}
    assert {where[s][at["process THP"]].text for s in where} == {"1"}  # MySQL keeps THP
    assert where["always"][at["of it the heap's"]].value > 0
    assert where["never"][at["AnonHugePages"]].value == 0
    for s in ("always+large-pages", "never+large-pages"):
        row = where[s]
        assert row[at["hugetlb"]].value > 0
        total = row[at["RSS"]].value + row[at["hugetlb"]].value
        assert row[at["RSS + hugetlb"]].value == pytest.approx(total)
        proof = next(c for c in run.cells.values() if c["thp"]["requested"] == s)["thp"]
        assert (
            proof["large_pages"]["proven"] and proof["large_pages"]["proof"]["pool_page_kb"] == 2048
        )
    # one round: the three questions say there is no verdict yet, and why
    assert "one round only" in hugepage_section(run)["answers"][0]["answers"][0]
