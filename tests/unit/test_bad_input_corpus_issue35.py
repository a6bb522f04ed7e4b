"""The bad-input corpus, continued for the classes issue 35's trial found: damaged or duplicated
data that still got a confident answer, paths that bite, state that was misreported, merge's own
promises, settings that contradict each other, refusals that did not name what they refuse.

Same machinery as tests/unit/test_bad_input_corpus.py (its module doc: each case one line, run in
a forked child through the real CLI, one line on stderr naming the file/field/value, nothing of
the sandbox changed). Kept in a module of its own so the classes' cases are counted apart (see
CLASSES) and the first corpus's file stays as it was.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.unit import test_bad_input_corpus as corpus
from tests.unit.test_bad_input_corpus import (
    F3_CELLS,
    REPORT_FILES,
    SMOKE,
    C,
    edit_csv,
    edit_json,
    manifest,
    put,
    record,
    set_val,
    shards,
    smoke_with,
)

F3C0, F3C1 = F3_CELLS
SHARDS = "merge {s}/S1 {s}/S2 --out {s}/m"
NAN, INF = float("nan"), float("inf")


# -- damage of issue 35's kinds ------------------------------------------------------------------
def row0(run_i: int, **values):
    """The first row of F3's record `run_i` with `values` (NaN and infinity written as JSON's
    NaN/Infinity, which Python's json module reads back as floats)."""
    return record("F3", run_i, lambda r: r["rows"][0].update(values))


def design(run: str, **values):
    return manifest(run, lambda m: m.setdefault("design", {}).update(values))


def suite_run(run: str, **values):
    return manifest(run, lambda m: m["suite"].setdefault("run", {}).update(values))


LIFE_KEYS = ("started_at", "finished_at", "verification", "exit")


def same_life(run: str, src: int, dst: int):
    """F3's cell `dst` carries cell `src`'s life (start, end, pid, exit): in the manifest and in
    its record, as a copy relabelled by hand would."""

    def do(s: Path):
        m = json.loads((s / run / "manifest.json").read_text())
        life = {k: m["cells"][src][k] for k in LIFE_KEYS}
        m["cells"][dst].update(life)
        (s / run / "manifest.json").write_text(json.dumps(m))
        p = s / run / "cells" / f"{F3_CELLS[dst]}.json"
        rec = json.loads(p.read_text())
        rec["cell"].update(life)
        p.write_text(json.dumps(rec))

    return do


def copied_as_round(run: str, i: int, rnd: int):
    """F3's cell `i` copied as a cell of round `rnd` (id, repeat and round relabelled everywhere:
    manifest, record, raw record, timeline), the way a run is padded with a life it never had."""

    def do(s: Path):
        d = s / run
        old = F3_CELLS[i]
        new = old.rsplit("__r", 1)[0] + f"__r{rnd}"
        m = json.loads((d / "manifest.json").read_text())
        entry = json.loads(json.dumps(m["cells"][i]).replace(old, new))
        entry.update(index=len(m["cells"]), repeat=rnd, round=rnd)
        m["cells"].append(entry)
        (d / "manifest.json").write_text(json.dumps(m))
        rec = json.loads((d / "cells" / f"{old}.json").read_text().replace(old, new))
        rec["cell"].update(index=entry["index"], repeat=rnd, round=rnd)
        for r in rec["rows"]:
            r["repeat"] = rnd
        (d / "cells" / f"{new}.json").write_text(json.dumps(rec))
        for sub, ext in (("raw", "json"), ("samples", "csv")):
            if (d / sub / f"{old}.{ext}").exists():
                shutil.copy2(d / sub / f"{old}.{ext}", d / sub / f"{new}.{ext}")
        (d / "results.csv").unlink()

    return do


def shard_life_of_other():
    """Shard 2's cell carries shard 1's cell's life: a shard made of another's lives."""

    def do(s: Path):
        a = json.loads((s / "S1" / "manifest.json").read_text())["cells"][0]
        life = {k: a[k] for k in LIFE_KEYS}
        p = s / "S2" / "manifest.json"
        m = json.loads(p.read_text())
        m["cells"][0].update(life)
        p.write_text(json.dumps(m, indent=1))
        rp = s / "S2" / "cells" / f"{F3C1}.json"
        rec = json.loads(rp.read_text())
        rec["cell"].update(life)
        rp.write_text(json.dumps(rec))

    return do


def shard_manifest(k: int, fn):
    return edit_json(f"S{k}/manifest.json", fn)


def alloc_field(name: str, key: str, value):
    def fn(m):
        for a in m["allocators"]:
            if a["name"] == name:
                a[key] = value

    return fn


def server_field(key: str, value):
    def fn(m):
        for c in m["cells"]:
            c["server"][key] = value

    return fn


def rows_repeat(run: str, cell: str, value: str):
    """Every results.csv row of `cell` relabelled to repeat `value` (a format-1/2 run)."""

    def fn(h, rows):
        for r in rows:
            if r["cell"] == cell:
                r["repeat"] = value
        return h, rows

    return edit_csv(f"{run}/results.csv", fn)


F1C0 = "mariadb-10.11.19__glibc__thp-system__r1"
NAMED = r"cell \S+__r1, oltp_ro@4"

# fmt: off
CLASSES: dict[str, list[C]] = {
    # 1. what analysis reads is checked against what the run promised
    "damaged-or-duplicated-data": [
        # figures: not finite, not in range (the cell and level named, never dropped in silence)
        C("i35-report-f3-qps-nan", "report {F3}", 2, rf"cells/{F3C0}\.json: level oltp_ro@4: qps nan is not a finite number", row0(0, qps=NAN)),
        C("i35-report-f3-tps-infinite", "report {F3}", 2, rf"cells/{F3C1}\.json: level oltp_ro@4: tps inf is not a finite number", row0(1, tps=INF)),
        C("i35-report-f3-lat-minus-inf", "report {F3}", 2, r"lat_p95_ms -inf is not a finite number", row0(0, lat_p95_ms=-INF)),
        C("i35-report-f3-rss-nan", "report {F3}", 2, r"level oltp_ro@4: \w+ nan is not a finite number", record("F3", 1, lambda r: r["rows"][0].update({k: NAN for k in ("rss_end_kb",)}))),
        C("i35-report-f3-qps-negative", "report {F3}", 2, NAMED + r": qps -5\.0 is not a throughput \(it must be above 0\)", row0(0, qps=-5)),
        C("i35-report-f3-qps-zero", "report {F3}", 2, NAMED + r": qps 0(\.0)? is not a throughput", row0(1, qps=0)),
        C("i35-report-f3-tps-zero", "report {F3}", 2, NAMED + r": tps 0(\.0)? is not a throughput", row0(0, tps=0.0)),
        C("i35-report-f3-latency-negative", "report {F3}", 2, NAMED + r": lat_p99_ms -1\.5 is below 0", row0(0, lat_p99_ms=-1.5)),
        C("i35-report-f3-window-negative", "report {F3}", 2, NAMED + r": window_s -3\.0 is below 0", row0(1, window_s=-3.0)),
        C("i35-report-f1-qps-nan-text", "report {F1}", 2, r"results\.csv line 2 \(cell \S+, oltp_ro@4\): qps 'nan' is not a finite number", set_val("F1", "qps", "nan")),
        C("i35-report-f1-qps-inf-text", "report {F1}", 2, r"qps 'inf' is not a finite number", set_val("F1", "qps", "inf", row=2)),
        C("i35-report-f1-qps-negative", "report {F1}", 2, r"oltp_ro@4: qps -100\.0 is not a throughput", set_val("F1", "qps", "-100")),
        C("i35-report-f2-qps-zero", "report {F2}", 2, r"qps 0(\.0)? is not a throughput", set_val("F2", "qps", "0", row=1)),
        C("i35-report-thp-tps-negative", "report {THP}", 2, r"tps -1\.0 is not a throughput", set_val("THP", "tps", "-1", row=3)),
        C("i35-report-allow-qps-nan", "report {F3} --allow-incomplete", 0, rf"WARNING: INCOMPLETE RUN \S+: cells/{F3C0}\.json: level oltp_ro@4: qps nan is not a finite number", row0(0, qps=NAN), out=REPORT_FILES, lines=None),
        C("i35-report-allow-qps-negative", "report {F1} --allow-incomplete", 0, r"INCOMPLETE RUN \S+: " + NAMED + r": qps -1\.0 is not a throughput \(it must be above 0\), so this point is not used", set_val("F1", "qps", "-1"), out=REPORT_FILES, lines=None),
        C("i35-compare-qps-nan", "compare {F3} {s}/cp", 2, r"cp: incomplete run: .*qps nan is not a finite number", corpus.copy("F3", "cp"), edit_json(f"cp/cells/{F3C0}.json", lambda r: r["rows"][2].update(qps=NAN))),
        C("i35-compare-qps-zero", "compare {F1} {F1B}", 2, r"F1B: incomplete run: .*qps 0(\.0)? is not a throughput", set_val("F1B", "qps", "0", row=4)),
        C("i35-resume-qps-nan", "run {SMOKE} --resume {F3}", 2, r"--resume \S+: incomplete run: .*qps nan is not a finite number", row0(1, qps=NAN)),
        # the design's fields in range
        C("i35-report-min-effect-negative", "report {F3}", 2, r"manifest\.json: design\.min_effect_pct -5(\.0)?: the minimum effect must be a percentage above 0 and below 100", design("F3", min_effect_pct=-5.0)),
        C("i35-report-min-effect-nan", "report {F3}", 2, r"design\.min_effect_pct nan: the minimum effect", design("F3", min_effect_pct=NAN)),
        C("i35-report-min-effect-100", "report {F3}", 2, r"design\.min_effect_pct 100(\.0)?: the minimum effect", design("F3", min_effect_pct=100.0)),
        C("i35-report-min-effect-text", "report {F3}", 2, r"design\.min_effect_pct '5%': the minimum effect", design("F3", min_effect_pct="5%")),
        C("i35-report-suite-min-effect-zero", "report {F3}", 2, r"suite\.run\.min_effect_pct 0(\.0)?: the minimum effect", suite_run("F3", min_effect_pct=0.0)),
        C("i35-report-f1-min-effect-infinite", "report {F1}", 2, r"design\.min_effect_pct inf: the minimum effect", design("F1", min_effect_pct=INF)),
        C("i35-report-alpha-zero", "report {F3}", 2, r"design\.alpha 0(\.0)?: the error rate must be above 0 and below 1", design("F3", alpha=0.0)),
        C("i35-report-alpha-above-one", "report {F3}", 2, r"design\.alpha 5(\.0)?: the error rate", design("F3", alpha=5.0)),
        C("i35-report-first-look-zero", "report {F3}", 2, r"design\.first_look 0: expected a whole number of rounds", design("F3", first_look=0)),
        C("i35-report-max-rounds-fraction", "report {F3}", 2, r"design\.max_rounds 2\.5: expected a whole number of rounds", design("F3", max_rounds=2.5)),
        C("i35-report-budget-negative", "report {F3}", 2, r"design\.budget_s -60(\.0)?: expected a finite number of seconds", design("F3", budget_s=-60.0)),
        C("i35-compare-min-effect-negative", "compare {F1} {F1B}", 2, r"F1B/manifest\.json: design\.min_effect_pct -5", design("F1B", min_effect_pct=-5)),
        C("i35-merge-min-effect-nan", SHARDS, 2, r"S2/manifest\.json: design\.min_effect_pct nan", shards(), shard_manifest(2, lambda m: m["design"].update(min_effect_pct=NAN))),
        # the same server life twice
        C("i35-report-same-life-two-names", "report {F3}", 2, rf"cells {F3C0}, {F3C1} are the same server life \(started \S+, pid \d+\): one is a copy", same_life("F3", 0, 1)),
        C("i35-report-life-copied-as-round-2", "report {F3}", 2, rf"cells {F3C0}, \S+__glibc__thp-system__r2 are the same server life", copied_as_round("F3", 0, 2)),
        C("i35-report-life-copied-as-round-5", "report {F3}", 2, r"jemalloc__thp-system__r1, \S+jemalloc__thp-system__r5 are the same server life", copied_as_round("F3", 1, 5)),
        C("i35-report-allow-same-life", "report {F3} --allow-incomplete", 0, r"INCOMPLETE RUN \S+: cells .* are the same server life", copied_as_round("F3", 0, 2), out=REPORT_FILES, lines=None),
        C("i35-compare-same-life-inside-new", "compare {F1} {F3}", 2, r"F3: incomplete run: cells .* are the same server life", copied_as_round("F3", 1, 3)),
        C("i35-merge-shard-of-other-lives", SHARDS, 2, rf"{F3C0} of \S+S1 and {F3C1} of \S+S2 are the same server life .*a shard holds a copy of another's cells; nothing was written", shards(), shard_life_of_other()),
        # a life relabelled to another round: pairing
        C("i35-report-record-rows-round-2", "report {F3}", 2, rf"cell {F3C0}, oltp_ro@4: repeat 2 but the cell ran in round 1: a relabelled life", record("F3", 0, lambda r: [x.update(repeat=2) for x in r["rows"]])),
        C("i35-report-manifest-repeat-3", "report {F3}", 2, rf"manifest\.json: cell {F3C1} has repeat 3 but its id names round 1", manifest("F3", lambda m: m["cells"][1].update(repeat=3))),
        C("i35-report-manifest-round-text", "report {F3}", 2, rf"cell {F3C0} has round 'two' but its id names round 1", manifest("F3", lambda m: m["cells"][0].update(round="two"))),
        C("i35-report-f1-rows-relabelled", "report {F1}", 2, rf"cell {F1C0}, oltp_ro@4: repeat 2 but the cell ran in round 1", rows_repeat("F1", F1C0, "2")),
        C("i35-report-r5-one-row-relabelled", "report {R5}", 2, r"cell \S+__r2, point_select@4: repeat 3 but the cell ran in round 2", set_val("R5", "repeat", "3", row=1)),
        C("i35-report-allow-relabelled", "report {F1} --allow-incomplete", 0, r"INCOMPLETE RUN \S+: cell \S+, oltp_ro@4: repeat 2 but the cell ran in round 1", rows_repeat("F1", F1C0, "2"), out=REPORT_FILES, lines=None),
    ],
    # 5. merge refuses what its --help promises
    "merge-promises": [
        C("i35-merge-allocator-sha256", SHARDS, 2, r"allocator jemalloc differs between shards: sha256 '0+' on \S+S2 vs '9a2f\w+' on \S+S1", shards(), shard_manifest(2, alloc_field("jemalloc", "sha256", "0" * 64))),
        C("i35-merge-glibc-sha256", SHARDS, 2, r"allocator glibc differs between shards: sha256", shards(), shard_manifest(1, alloc_field("glibc", "sha256", "f" * 64))),
        C("i35-merge-allocator-sha256-missing", SHARDS, 2, r"allocator jemalloc differs between shards: sha256 None", shards(), shard_manifest(2, alloc_field("jemalloc", "sha256", None))),
        C("i35-merge-server-build", SHARDS, 2, r"server mariadb-10\.11\.19 differs between shards: version_string '10\.11\.19-MariaDB-0\+deb12u2' on \S+S2 vs '10\.11\.19-MariaDB-0\+deb12u1'", shards(), shard_manifest(2, server_field("version_string", "10.11.19-MariaDB-0+deb12u2"))),
        C("i35-merge-server-flavor", SHARDS, 2, r"server mariadb-10\.11\.19 differs between shards: flavor 'percona'", shards(), shard_manifest(2, server_field("flavor", "percona"))),
        C("i35-merge-server-version", SHARDS, 2, r"server mariadb-10\.11\.19 differs between shards: version '10\.11\.19' on \S+S2 vs '10\.11\.20' on \S+S1", shards(), shard_manifest(1, server_field("version", "10.11.20"))),
    ],
}
# fmt: on
CASES = [c for cases in CLASSES.values() for c in cases]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input(case, tmp_path):
    corpus.check_case(case, tmp_path / "s")


def test_case_ids_are_unique_across_both_corpora():
    ids = [c.id for c in (*corpus.CASES, *CASES)]
    assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})


def test_every_class_has_cases():
    """Issue 35: each class the trial found is in the corpus, with several cases."""
    assert all(len(cases) >= 3 for cases in CLASSES.values()), {
        k: len(v) for k, v in CLASSES.items()
    }


# Unused imports kept out of lint's way: helpers later classes use
_ = (SMOKE, put, smoke_with, os)
