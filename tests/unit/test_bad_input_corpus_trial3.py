"""The bad-input corpus, continued for what issue 35's third trial found short: damage in an
alternate-design run's raw blocks that a `report --rederive` took in silence (a NaN, negative or
1e300 interval rate, an infinity refused only after results.csv was rewritten), a row relabelled
to another server, impossible percentiles, and shards whose servers ran with other settings.

Same machinery as tests/unit/test_bad_input_corpus.py (its module doc: each case one line, run in
a forked child through the real CLI, one line on stderr naming the file/field/value, nothing of
the sandbox changed beyond the outputs a case names: for a refused --rederive, nothing at all).
What a case cannot say in one line (a verdict's rounds after a rederive, a resume of the recorded
alternate run) is a test below the cases.
"""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import pytest

from tests.unit import test_bad_input_corpus as corpus
from tests.unit.test_bad_input_corpus import (
    F3_CELLS,
    REPORT_FILES,
    C,
    edit_json,
    record,
    set_val,
    shards,
)
from tests.unit.test_bad_input_corpus_issue35 import shard_manifest

F3C0, F3C1 = F3_CELLS
SHARDS = corpus.MERGE_OUT
NAN, INF = corpus.NAN, corpus.INF
# real-alternate-aa's cells: glibc and glibc-aa, rounds 1-3
AA_ARM = "mariadb-10.11.19__glibc-aa__thp-system__r{}"
GLIBC = "mariadb-10.11.19__glibc__thp-system__r{}"
# What `report --rederive --allow-incomplete` writes besides the report
REDERIVED = [*REPORT_FILES, "ALT/derived", "ALT/derived/*", "ALT/results.csv"]
SERVER_B = "b_mariadb-10.11.19__jemalloc__thp-system__r2"


# -- damage -----------------------------------------------------------------------------------
def alt_row(cell: str, **values):
    return edit_json(f"ALT/cells/{cell}.json", lambda r: r["rows"][0].update(values))


def rows_of(run: str, cell: str, **values):
    """Every row of a cell record relabelled (a row's identity edited by hand)."""
    return edit_json(f"{run}/cells/{cell}.json", lambda r: [x.update(values) for x in r["rows"]])


def raw_identity(i: int, **values):
    return edit_json(f"F3/raw/{F3_CELLS[i]}.json", lambda d: d["identity"].update(values))


def block(r: int, fn, arm: str = AA_ARM):
    """fn(level) on ALT's raw record of the glibc-aa cell of round r (its one level)."""
    return edit_json(f"ALT/raw/{arm.format(r)}.json", lambda d: fn(d["levels"][0]))


def interval_rate(r: int, b: int, i: int, value: float):
    """Interval i of block b of that level carries rate `value`."""
    return block(r, lambda lv: lv["blocks"][b]["intervals"][i].__setitem__(1, value))


def f3_raw_interval(i: int, value: float):
    """F3's (solo) raw record of cell 0: its first level's interval i carries rate `value`."""
    return edit_json(
        f"F3/raw/{F3C0}.json", lambda d: d["levels"][0]["intervals"][i].__setitem__(1, value)
    )


def cells_settings(k: int, **values):
    """What shard k's servers recorded running with (cells[].server.settings), changed."""
    return shard_manifest(k, lambda m: [c["server"]["settings"].update(values) for c in m["cells"]])


A = AA_ARM.format
RAW_NAN = rf"ALT/raw/{A(2)}\.json: level point_select@4, block 2, interval 3 \(t 3\.0 s\): rate nan is not a finite number: the raw record is damaged, so nothing was derived again and nothing was rewritten"

# fmt: off
CLASSES: dict[str, list[C]] = {
    # each figure in the range its schema declaration gives; a distribution's figures in order
    "ranges-and-order": [
        C("t3-report-p95-above-p99", "report {ALT}", 2, rf"cell {GLIBC.format(2)}, point_select@4: lat_p95_ms 50\.0 is above lat_p99_ms 0\.1 \(out of order: .*\) in cells/{GLIBC.format(2)}\.json, so this point is not used", alt_row(GLIBC.format(2), lat_p95_ms=50.0, lat_p99_ms=0.1)),
        C("t3-report-p99-above-max", "report {F3}", 2, rf"cell {F3C0}, oltp_ro@4: lat_p99_ms 500\.0 is above lat_max_ms 1\.0", record("F3", 0, lambda r: r["rows"][0].update(lat_p99_ms=500.0, lat_p999_ms=None, lat_max_ms=1.0))),
        C("t3-report-f1-p50-above-p95", "report {F1}", 2, r"oltp_ro@4: lat_p50_ms 90\.0 is above lat_p95_ms \S+ .* in results\.csv", set_val("F1", "lat_p50_ms", "90")),
        C("t3-report-qps-absurd", "report {F3}", 2, rf"cell {F3C0}, oltp_ro@4: qps 1e\+300 is not a throughput \(it must be at most 1e\+09\)", record("F3", 0, lambda r: r["rows"][0].update(qps=1e300))),
        C("t3-report-steady-absurd", "report {ALT}", 2, r"steady_qps 1\.58e\+152 is not a rate \(it must be at most 1e\+09\)", alt_row(A(3), steady_qps=1.58e152)),
        C("t3-report-client-busy-pct", "report {F3}", 2, r"client_cpu_busy_pct 150\.0 is not a percentage \(it must be at most 100\)", record("F3", 1, lambda r: r["rows"][0].update(client_cpu_busy_pct=150.0))),
        C("t3-report-settled-two", "report {F3}", 2, r"settled 2(\.0)? is not 0 or 1 \(it must be at most 1\)", record("F3", 0, lambda r: r["rows"][0].update(settled=2))),
        C("t3-report-allow-p95-above-p99", "report {ALT} --allow-incomplete", 0, r"INCOMPLETE RUN \S+: cell \S+, point_select@4: lat_p95_ms 50\.0 is above lat_p99_ms", alt_row(GLIBC.format(2), lat_p95_ms=50.0, lat_p99_ms=0.1), out=REPORT_FILES, lines=None),
    ],
    # a row is its cell's: server, allocator, THP mode, engine as the cell record says
    "row-identity": [
        C("t3-report-row-server-relabelled", "report {AA}", 2, rf"cells/{SERVER_B}\.json: level point_select@4: server 'a', but the cell record says the cell ran 'b:mariadb-10\.11\.19': a relabelled row would count under another arm", rows_of("AA", SERVER_B, server="a")),
        C("t3-report-row-allocator-relabelled", "report {F3}", 2, rf"cells/{F3C1}\.json: level oltp_ro@4: allocator 'glibc', but the cell record says the cell ran 'jemalloc'", rows_of("F3", F3C1, allocator="glibc")),
        C("t3-report-row-engine-relabelled", "report {F3}", 2, rf"cells/{F3C0}\.json: level oltp_ro@4: engine 'rocksdb', but the cell record says the cell ran 'innodb'", rows_of("F3", F3C0, engine="rocksdb")),
        C("t3-report-row-version-relabelled", "report {ALT}", 2, rf"cells/{GLIBC.format(1)}\.json: level point_select@4: server_version '11\.4\.2', but the cell record says the cell ran '10\.11\.19'", rows_of("ALT", GLIBC.format(1), server_version="11.4.2")),
        C("t3-report-f1-row-server-relabelled", "report {F1}", 2, r"results\.csv line 2 \(cell \S+, oltp_ro@4\): server 'other', but manifest\.json's cell ran 'mariadb-10\.11\.19'", set_val("F1", "server", "other")),
        C("t3-compare-row-server-relabelled", "compare {AA} {s}/AA2", 2, rf"AA: incomplete run: cells/{SERVER_B}\.json: level point_select@4: server 'a'", rows_of("AA", SERVER_B, server="a"), corpus.copy("AA", "AA2")),
        C("t3-rederive-raw-server-relabelled", "report {F3} --rederive", 0, rf"could not derive 1 cell\(s\) again \(raw record unusable\): {F3C1}", raw_identity(1, server="other"), out=[*REPORT_FILES, "F3/derived", "F3/derived/*", "F3/results.csv"], lines=None, says=r"its identity\.server is 'other', the cell ran 'mariadb-10\.11\.19'"),
    ],
    # a raw record's rates: refused naming raw/ (never cells/), before anything is rewritten
    "rederive-raw-rates": [
        C("t3-rederive-alt-interval-nan", "report {ALT} --rederive", 2, RAW_NAN, interval_rate(2, 1, 2, NAN)),
        C("t3-rederive-alt-interval-inf", "report {ALT} --rederive", 2, rf"ALT/raw/{A(1)}\.json: level point_select@4, block 1, interval 2 \(t 2\.0 s\): rate inf is not a finite number", interval_rate(1, 0, 1, INF)),
        C("t3-rederive-alt-interval-negative", "report {ALT} --rederive", 2, rf"ALT/raw/{A(1)}\.json: level point_select@4, block 2, interval 2 \(t 2\.0 s\): rate -90000(\.0)? is below 0", interval_rate(1, 1, 1, -90000)),
        C("t3-rederive-alt-interval-absurd", "report {ALT} --rederive", 2, rf"ALT/raw/{A(3)}\.json: level point_select@4, block 1, interval 3 \(t 3\.0 s\): rate 1e\+300 is not a rate \(it must be at most 1e\+09\)", interval_rate(3, 0, 2, 1e300)),
        C("t3-rederive-alt-block-qps-nan", "report {ALT} --rederive", 2, rf"ALT/raw/{A(2)}\.json: level point_select@4, block 2: qps nan is not a finite number", block(2, lambda lv: lv["blocks"][1].update(qps=NAN))),
        C("t3-rederive-alt-baseline-arm", "report {ALT} --rederive", 2, rf"ALT/raw/{GLIBC.format(3)}\.json: level point_select@4, block 2, interval 1 .*rate -1(\.0)? is below 0", block(3, lambda lv: lv["blocks"][1]["intervals"][0].__setitem__(1, -1.0), arm=GLIBC)),
        C("t3-rederive-solo-interval-nan", "report {F3} --rederive", 2, rf"F3/raw/{F3C0}\.json: level oltp_ro@4, interval 2 \(t \S+ s\): rate nan is not a finite number", f3_raw_interval(1, NAN)),
        C("t3-rederive-two-damaged", "report {ALT} --rederive", 2, r"rate nan is not a finite number \(and 1 more damaged raw record\(s\)\)", interval_rate(2, 1, 2, NAN), interval_rate(3, 0, 2, 1e300)),
        C("t3-rederive-allow-keeps-recorded", "report {ALT} --rederive --allow-incomplete", 0, rf"could not derive 1 cell\(s\) again \(raw record unusable\): {A(2)}", interval_rate(2, 1, 2, NAN), out=REDERIVED, lines=None, says=rf"{A(2)}: kept: raw record unusable \(raw/{A(2)}\.json: level point_select@4, block 2, interval 3 \(t 3\.0 s\): rate nan"),
    ],
    # merge: what each cell's server ran with is one configuration across the shards
    "merge-server-settings": [
        C("t3-merge-cell-buffer-pool", SHARDS, 2, r"S2 ran its servers with other settings than \S+S1: server\.settings\.buffer_pool_mb = 4096 \(cell \S+\) vs 64 \(cell \S+\); shards of one run measure one server configuration", shards(), cells_settings(2, buffer_pool_mb=4096)),
        C("t3-merge-cell-max-connections", SHARDS, 2, r"server\.settings\.max_connections = 500 \(cell \S+\) vs \d+", shards(), cells_settings(2, max_connections=500)),
        C("t3-merge-cell-extra-setting", SHARDS, 2, r"server\.settings\.extra\.innodb_adaptive_hash_index = None \(cell \S+\) vs 'ON'", shards(), cells_settings(1, extra={"innodb_adaptive_hash_index": "ON"})),
        C("t3-merge-cell-two-settings", SHARDS, 2, r"server\.settings\.buffer_pool_mb = 128 .* \(and 1 more setting\(s\)\)", shards(), cells_settings(2, buffer_pool_mb=128, flush_log_at_trx_commit=2)),
    ],
}
# fmt: on
CASES = [c for cases in CLASSES.values() for c in cases]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input(case, tmp_path):
    corpus.check_case(case, tmp_path / "s")


def test_case_ids_are_unique_across_the_corpora():
    from tests.unit import test_bad_input_corpus_issue35 as issue35
    from tests.unit import test_bad_input_corpus_trial2 as trial2

    ids = [c.id for c in (*corpus.CASES, *issue35.CASES, *trial2.CASES, *CASES)]
    assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})


def test_every_class_has_cases():
    assert all(len(cases) >= 3 for cases in CLASSES.values()), {
        k: len(v) for k, v in CLASSES.items()
    }


# -- a level the rederive can no longer measure ------------------------------------------------
def _alt_copy(tmp_path: Path) -> Path:
    run = tmp_path / "ALT"
    shutil.copytree(corpus.FIXTURES / corpus.RUNS["ALT"], run)
    return run


def _throughput(run_dir: Path) -> dict:
    from analysis.verdicts import run_verdicts
    from rundir.read import load_run

    verdicts = run_verdicts(load_run(run_dir))
    (tp,) = [v for v in verdicts if v.metric == "throughput"]
    return {"verdict": tp, "notices": verdicts.notices}


def test_a_failed_block_is_named_and_its_round_left_out(tmp_path):
    """A block flipped to failed in raw/ (the level's row still ok): the rederive names the
    level on stderr, and the verdict stands on the two rounds left, saying so in verdicts.csv,
    the summary's verdict table and its notices (it once fell back to the whole-level qps,
    three rounds, in silence)."""
    run = _alt_copy(tmp_path)
    cid = A(3)
    p = run / "raw" / f"{cid}.json"
    raw = json.loads(p.read_text())
    raw["levels"][0]["blocks"][1]["status"] = "failed"
    p.write_text(json.dumps(raw))
    code, out, err = corpus.run_forked(
        ["report", str(run), "--rederive"], tmp_path, corpus._env(tmp_path, C("x", "", 0, ""))
    )
    assert code == 0, err
    assert (
        f"WARNING: --rederive: cell {cid}, point_select@4: no steady rate any more (block 2 "
        f"failed in raw/{cid}.json; recorded: 65568.6/s)"
    ) in err, err
    found = _throughput(run)
    assert found["verdict"].rounds == 2
    assert any(f"cell {cid}, point_select@4: no steady rate" in n for n in found["notices"])
    (row,) = [
        r
        for r in csv.DictReader(io.StringIO((run / "verdicts.csv").read_text()))
        if r["metric"] == "throughput"
    ]
    assert row["rounds"] == "2"
    summary = (run / "summary.md").read_text()
    assert "(on 2 of 3 rounds)" in summary and f"cell {cid}, point_select@4" in summary


def test_the_recorded_alternate_run_judges_its_steady_rate_on_three_rounds():
    """The undamaged fixture: every round judged, on the blocks' steady rate, no notice."""
    found = _throughput(corpus.FIXTURES / corpus.RUNS["ALT"])
    assert found["verdict"].rounds == 3 and not found["notices"]


# -- merge: whole-round shards, arm by arm -------------------------------------------------------
def _shard(cells: list[dict], name: str):
    from types import SimpleNamespace

    return SimpleNamespace(path=Path(name), manifest={"cells": cells})


def _as_round(cells: list[dict], r: int) -> list[dict]:
    out = json.loads(json.dumps(cells))
    for c in out:
        c["id"] = c["id"].replace("__r1", f"__r{r}")
    return out


def test_a_hugepage_study_s_shards_merge_though_their_arms_differ_in_settings():
    """Shards of whole rounds hold every arm: a large-pages arm's server runs with
    large_pages=ON beside the small-pages arms in each of them, by design, and that is no
    difference between shards; a buffer pool changed in one shard's arm is."""
    from suites.errors import SuiteError
    from suites.runner.merge import _check_server_settings

    m = json.loads((corpus.FIXTURES / "real-hugepages-smoke" / "manifest.json").read_text())
    one, two = _as_round(m["cells"], 1), _as_round(m["cells"], 2)
    _check_server_settings(_shard(one, "S1"), _shard(two, "S2"))
    two[2]["server"]["settings"]["buffer_pool_mb"] = 4096
    with pytest.raises(SuiteError) as e:
        _check_server_settings(_shard(one, "S1"), _shard(two, "S2"))
    assert (
        "S2 ran its servers with other settings than S1: server.settings.buffer_pool_mb = 4096 "
        "(cell mysql-9.7.4__glibc-preloaded__thp-always+large-pages__r2) vs 128 (cell "
        "mysql-9.7.4__glibc-preloaded__thp-always+large-pages__r1)"
    ) in str(e.value)


# -- resuming a run recorded before a setting existed -----------------------------------------
ALT_SUITE = corpus.REPO / "tests/fixtures/runs/record/alternate-aa.toml"


def _alt_manifest() -> dict:
    return json.loads((corpus.FIXTURES / corpus.RUNS["ALT"] / "manifest.json").read_text())


def test_the_recorded_alternate_run_resumes_with_todays_defaults():
    """real-alternate-aa recorded no fragmentation.soak, soak_block or soak_look_s (settings
    added later): resumed with its suite file, or with the suite it recorded, they read as their
    defaults and nothing differs (it said "the suite settings differ")."""
    from suites.runner.resume import check_resumable
    from suites.suite.model import load_suite, suite_from_dict

    m = _alt_manifest()
    assert "soak" not in m["suite"]["fragmentation"]
    labels = sorted({c["server"]["label"] for c in m["cells"]})
    check_resumable(m, load_suite(ALT_SUITE).suite.as_dict(), labels, m["host"])
    check_resumable(m, suite_from_dict(m["suite"], "recorded").as_dict(), labels, m["host"])


def test_resume_names_every_differing_setting_and_a_default_the_run_lacked():
    from suites.errors import SuiteError
    from suites.runner.resume import check_resumable
    from suites.suite.model import load_suite

    m = _alt_manifest()
    labels = sorted({c["server"]["label"] for c in m["cells"]})
    now = load_suite(ALT_SUITE).suite.as_dict()
    now["fragmentation"]["soak"] = 600.0
    now["sysbench"]["duration_s"] = 9.0
    with pytest.raises(SuiteError) as e:
        check_resumable(m, now, labels, m["host"])
    msg = str(e.value)
    assert (
        "fragmentation.soak is 600.0, the run recorded none (read as today's default 0.0); "
        "sysbench.duration_s is 9.0, the run has 3.0"
    ) in msg, msg


def test_a_recorded_value_is_never_replaced_by_a_default():
    """Only what the run lacks reads as today's default: a value it recorded stays its own."""
    from suites.runner.resume import with_defaults

    m = _alt_manifest()
    suite = json.loads(json.dumps(m["suite"]))
    suite["sysbench"]["duration_s"] = 7.0
    got = with_defaults(suite)
    assert got["sysbench.duration_s"] == 7.0 and got["fragmentation.soak"] == 0.0
