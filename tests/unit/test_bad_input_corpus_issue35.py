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
    C,
    edit_csv,
    edit_json,
    manifest,
    put,
    record,
    set_val,
    shards,
)

F3C0, F3C1 = F3_CELLS
SHARDS = corpus.MERGE_OUT
NAN, INF = corpus.NAN, corpus.INF


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


def fifo(rel: str):
    """A FIFO at `rel` (nobody writes to it: reading it would wait forever)."""

    def do(s: Path):
        p = s / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if p.exists():
            p.unlink()
        os.mkfifo(p)

    return do


def immutable(rel: str):
    """A file nobody may replace or link (chattr +i; root only: undone by the corpus for
    directories, here by the case's own cleanup through chattr -i on the sandbox's files)."""

    def do(s: Path):
        import subprocess

        subprocess.run(["chattr", "+i", str(s / rel)], check=True, capture_output=True)

    return do


def fetched_dir(spec: str, meta: str | None = None):
    """A fetched server's directory under the sandbox's state, with `meta` as its fetched.json
    (None: none at all)."""

    def do(s: Path):
        d = s / "state" / "servers" / spec
        d.mkdir(parents=True, exist_ok=True)
        (d / "usr").mkdir(exist_ok=True)
        if meta is not None:
            (d / "fetched.json").write_text(meta.replace("{d}", str(d)))

    return do


GOOD_META = json.dumps(
    {
        "spec": "mariadb-10.11.18", "flavor": "mariadb", "version": "10.11.18",
        "debian_version": "1:10.11.18-0+deb12u1", "release": "bookworm", "kind": "root",
        "path": "{d}", "binary": "/usr/sbin/mariadbd", "glibc": "2.36",
    }
)  # fmt: skip

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
        C("i35-report-allow-qps-negative", "report {F1} --allow-incomplete", 0, r"INCOMPLETE RUN \S+: " + NAMED + r": qps -1\.0 is not a throughput \(it must be above 0\) in results\.csv, so this point is not used", set_val("F1", "qps", "-1"), out=REPORT_FILES, lines=None),
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
    # 3. paths: ~, special files, outputs written all or nothing
    "paths": [
        C("i35-report-tilde-run-dir", "report ~/F3", 0, None, put("F3/.here", ""), out=REPORT_FILES, lines=0, env={"HOME": "{s}"}, says=r"report:  /\S+/s/F3/report\.html"),
        C("i35-compare-tilde-missing", "compare ~/nope {F1}", 2, r"error: /\S+/s/nope: does not exist", env={"HOME": "{s}"}),
        C("i35-resume-tilde-missing", "run {SMOKE} --resume ~/gone", 2, r"--resume /\S+/s/gone: does not exist", env={"HOME": "{s}"}),
        C("i35-run-out-tilde-nothing-made", "run {SMOKE} --out ~/runs --threads 0", 2, r"--threads 0: sysbench\.threads", env={"HOME": "{s}/home"}),
        C("i35-run-out-unknown-user", "run {SMOKE} --out ~nosuchuser35/runs", 2, r"--out ~nosuchuser35/runs: no user 'nosuchuser35' here .*a directory named '~' is never made"),
        C("i35-run-file-out-unknown-user", "run {s}/s.toml", 2, r"s\.toml:\d+: run\.out: cannot expand '~nosuchuser35/x': no such user", corpus.smoke_plus("s.toml", '[run]\nout = "~nosuchuser35/x"\n')),
        C("i35-report-unknown-user", "report ~nosuchuser35/run", 2, r"run_dir ~nosuchuser35/run: no user 'nosuchuser35'"),
        C("i35-merge-out-unknown-user", "merge {s}/S1 {s}/S2 --out ~nosuchuser35/m", 2, r"--out ~nosuchuser35/m: no user", shards()),
        C("i35-report-fifo-in-cells", "report {F3}", 2, r"incomplete run: cells/zz\.json: cannot read: a FIFO, not a regular file", fifo("F3/cells/zz.json")),
        C("i35-report-fifo-as-record", "report {F3}", 2, rf"cells/{F3C1}\.json: cannot read: a FIFO", fifo(f"F3/cells/{F3C1}.json")),
        C("i35-report-fifo-manifest", "report {F3}", 2, r"manifest\.json: a FIFO, not a regular file", fifo("F3/manifest.json")),
        C("i35-report-f1-results-fifo", "report {F1}", 2, r"results\.csv is a FIFO, not a regular file", fifo("F1/results.csv")),
        C("i35-report-f3-results-fifo-rebuilt", "report {F3}", 0, r"results\.csv is a FIFO, not a regular file: the results were rebuilt", fifo("F3/results.csv"), out=REPORT_FILES),
        C("i35-compare-fifo-record", "compare {F1} {F3}", 2, rf"F3: incomplete run: cells/{F3C0}\.json: cannot read: a FIFO", fifo(f"F3/cells/{F3C0}.json")),
        C("i35-merge-fifo-in-shard", SHARDS, 2, r"S2: incomplete run: cells/x\.json: cannot read: a FIFO", shards(), fifo("S2/cells/x.json")),
        C("i35-resume-fifo-record", "run {SMOKE} --resume {F3}", 2, r"--resume \S+: incomplete run: cells/y\.json: cannot read: a FIFO", fifo("F3/cells/y.json")),
        C("i35-report-derived-fifo", "report {F3}", 0, rf"derived/{F3C0}\.json is a FIFO, not a regular file: cell \S+'s rows as recorded are used", fifo(f"F3/derived/{F3C0}.json"), out=REPORT_FILES, lines=None),
        C("i35-report-samples-fifo", "report {F3}", 2, rf"samples/{F3C0}\.csv: a FIFO, not a regular file", fifo(f"F3/samples/{F3C0}.csv")),
        C("i35-report-record-dev-zero", "report {F3}", 2, r"cells/z\.json: cannot read: a device, not a regular file", put("F3/.here", ""), corpus.link("F3/cells/z.json", "/dev/zero")),
        C("i35-run-suite-fifo", "run {s}/s.toml", 2, r"s\.toml: not a file", fifo("s.toml")),
        C("i35-report-summary-a-directory", "report {F3}", 2, r"summary\.md: cannot write: is a directory; nothing was rewritten", put("F3/report.html", "old"), put("F3/verdicts.csv", "old"), put("F3/summary.md/x", "")),
        C("i35-report-verdicts-a-directory", "report {F3}", 2, r"verdicts\.csv: cannot write: is a directory; nothing was rewritten", put("F3/report.html", "old"), put("F3/verdicts.csv/x", "")),
        C("i35-report-html-a-directory", "report {F3}", 2, r"report\.html: cannot write: is a directory", put("F3/summary.md", "old"), put("F3/report.html/x", "")),
        C("i35-report-summary-a-fifo", "report {F3}", 2, r"summary\.md: cannot write: is a special file", put("F3/report.html", "old"), fifo("F3/summary.md")),
        C("i35-report-summary-immutable", "report {F3}", 2, r"summary\.md: cannot write: Operation not permitted; nothing was rewritten", put("F3/report.html", "old"), put("F3/summary.md", "old"), immutable("F3/summary.md"), needs="root"),
        C("i35-report-verdicts-immutable", "report {F3}", 2, r"verdicts\.csv: cannot write: Operation not permitted", put("F3/report.html", "old"), put("F3/verdicts.csv", "old"), immutable("F3/verdicts.csv"), needs="root"),
        C("i35-report-run-dir-read-only", "report {F3}", 2, r"F3/verdicts\.csv: cannot write: (Operation not permitted|Permission denied); nothing was rewritten", put("F3/report.html", "old"), corpus.read_only("F3")),
    ],
    # 4. state: a killed run, a rederive that could not, a damaged fetched server
    "state": [
        C("i35-report-killed-runner", "report {F3}", 0, r"WARNING: The run was INTERRUPTED by the loss of its runner \(pid 999999999 is gone.*Finish it with `mallocsweep run \S+ --resume \S+F3`", manifest("F3", lambda m: m.update(status="running", runner_pid=999999999)), out=REPORT_FILES, lines=None),
        C("i35-report-killed-runner-no-pid", "report {F3}", 0, r"INTERRUPTED by the loss of its runner \(none recorded", manifest("F3", lambda m: [m.update(status="running"), m.pop("runner_pid", None)]), out=REPORT_FILES, lines=None),
        C("i35-report-killed-runner-pid-reused", "report {F3}", 0, r"INTERRUPTED by the loss of its runner \(pid 1 is gone", manifest("F3", lambda m: m.update(status="running", runner_pid=1, runner_start_ticks=123456789)), out=REPORT_FILES, lines=None),
        C("i35-report-f1-killed-runner", "report {F1}", 0, r"INTERRUPTED by the loss of its runner .*--resume", manifest("F1", lambda m: m.update(status="running", runner_pid=999999998)), out=REPORT_FILES, lines=None),
        C("i35-servers-list-damaged-no-meta", "servers list", 0, None, fetched_dir("mariadb-10.11.18"), lines=0, says=r"mariadb-10\.11\.18 is DAMAGED \(no fetched\.json.*repair it: rm -rf \S+/state/servers/mariadb-10\.11\.18 && mallocsweep servers fetch mariadb-10\.11\.18"),
        C("i35-servers-list-damaged-meta-garbage", "servers list", 0, None, fetched_dir("mysql-9.7.4", "{"), lines=0, says=r"mysql-9\.7\.4 is DAMAGED \(fetched\.json is unreadable"),
        C("i35-servers-list-damaged-binary-gone", "servers list", 0, None, fetched_dir("mariadb-10.11.18", GOOD_META), lines=0, says=r"is DAMAGED \(its server binary \S+usr/sbin/mariadbd is missing\)"),
        C("i35-servers-list-json-damaged", "servers list --json", 0, None, fetched_dir("mariadb-10.11.18"), lines=0, says=r'(?s)"damaged": "no fetched\.json.*"repair": "rm -rf'),
        C("i35-run-fetched-damaged", "run {SMOKE} --server fetched:mariadb-10.11.18", 2, r"mariadb-10\.11\.18 is fetched but damaged in \S+: no fetched\.json .*repair it: rm -rf \S+ && mallocsweep servers fetch mariadb-10\.11\.18", fetched_dir("mariadb-10.11.18")),
        C("i35-run-fetched-binary-gone", "run {SMOKE} --server fetched:mariadb-10.11.18", 2, r"is fetched but damaged .*its server binary \S+ is missing", fetched_dir("mariadb-10.11.18", GOOD_META)),
    ],
    # 6. settings that contradict the suite's own fields
    "settings": [
        C("i35-run-settings-buffer-pool", "run {s}/s.toml", 2, r"s\.toml:\d+: server\.settings: innodb_buffer_pool_size = '8G' conflicts with server\.buffer_pool_mb = 64", corpus.smoke_with("s.toml", "buffer_pool_mb = 64", 'buffer_pool_mb = 64\nsettings = { innodb_buffer_pool_size = "8G" }')),
        C("i35-run-settings-buffer-pool-dashes", "run {s}/s.toml", 2, r"innodb-buffer-pool-size = '1G' conflicts with server\.buffer_pool_mb", corpus.smoke_with("s.toml", "buffer_pool_mb = 64", 'buffer_pool_mb = 64\nsettings = { innodb-buffer-pool-size = "1G" }')),
        C("i35-run-settings-buffer-pool-loose", "run {s}/s.toml", 2, r"loose-innodb_buffer_pool_size = 134217728 conflicts with server\.buffer_pool_mb", corpus.smoke_with("s.toml", "buffer_pool_mb = 64", 'buffer_pool_mb = 64\nsettings = { loose-innodb_buffer_pool_size = 134217728 }')),
        C("i35-run-settings-buffer-pool-default", "run {s}/s.toml", 2, r"innodb_buffer_pool_size = '64M' conflicts with server\.buffer_pool_mb = 256", put("s.toml", '[suite]\nname = "x"\n[server]\nsettings = { innodb_buffer_pool_size = "64M" }\n[sysbench]\nthreads = [8]\n')),
        C("i35-run-settings-rocksdb-cache", "run {s}/s.toml", 2, r"rocksdb_block_cache_size = '2G' conflicts with server\.rocksdb_block_cache_mb = 256", corpus.smoke_with("s.toml", "buffer_pool_mb = 64", 'buffer_pool_mb = 64\nsettings = { rocksdb_block_cache_size = "2G" }')),
        C("i35-run-option-settings-conflict", "run {s}/s.toml --threads 8", 2, r"server\.settings: innodb_buffer_pool_size = '8G' conflicts", corpus.smoke_with("s.toml", "buffer_pool_mb = 64", 'buffer_pool_mb = 64\nsettings = { innodb_buffer_pool_size = "8G" }')),
    ],
    # 7. every refusal names the field or value
    "named-refusals": [
        C("i35-fetch-fullwidth-digits", ["servers", "fetch", "mariadb-１０.11.18"], 2, r"server spec 'mariadb-１０\.11\.18' is not FLAVOR-X\.Y\.Z"),
        C("i35-fetch-arabic-indic-digits", ["servers", "fetch", "mysql-٩.7.4"], 2, r"server spec 'mysql-٩\.7\.4' is not FLAVOR-X\.Y\.Z"),
        C("i35-run-server-fetched-fullwidth", ["run", "{SMOKE}", "--server", "fetched:mariadb-10.１１.18"], 2, r"'mariadb-10\.１１\.18' is not FLAVOR-X\.Y\.Z"),
        C("i35-run-servers-fetched-fullwidth", ["run", "{SMOKE}", "--servers", "a=host,b=fetched:mysql-９.7.4"], 2, r"mysql-９\.7\.4' is not FLAVOR-X\.Y\.Z"),
        C("i35-run-file-fetched-fullwidth", "run {s}/s.toml", 2, r"s\.toml:\d+: server\.fetched: .*'mariadb-１０\.11\.18' is not FLAVOR", corpus.smoke_with("s.toml", "buffer_pool_mb = 64", 'buffer_pool_mb = 64\nfetched = "mariadb-１０.11.18"')),
        C("i35-report-run-id-newline", "report {F3}", 2, r"manifest\.json: run_id 'x\\ny' is not a run's name \(one line of printable characters, no '/'\)", manifest("F3", lambda m: m.update(run_id="x\ny"))),
        C("i35-report-run-id-slash", "report {F1}", 2, r"run_id '\.\./\.\./etc' is not a run's name", manifest("F1", lambda m: m.update(run_id="../../etc"))),
        C("i35-report-run-id-dotdot", "report {F3}", 2, r"run_id '\.\.' is not a run's name", manifest("F3", lambda m: m.update(run_id=".."))),
        C("i35-report-run-id-escape", "report {F3}", 2, r"run_id 'a\\x1b\[31mb' is not a run's name", manifest("F3", lambda m: m.update(run_id="a\x1b[31mb"))),
        C("i35-report-run-id-number", "report {F3}", 2, r"run_id 7 is not a run's name", manifest("F3", lambda m: m.update(run_id=7))),
        C("i35-compare-run-id-newline", "compare {F1} {F1B}", 2, r"F1B/manifest\.json: run_id 'a\\nb' is not a run's name", manifest("F1B", lambda m: m.update(run_id="a\nb"))),
        C("i35-merge-run-id-newline", SHARDS, 2, r"S1/manifest\.json: run_id 'r\\n1' is not a run's name", shards(), shard_manifest(1, lambda m: m.update(run_id="r\n1"))),
        C("i35-run-preflight-memory-names-fields", "run {s}/s.toml --out {s}/runs", 2, r"preflight: available memory for the server: need [\d,]+ kB, have [\d,]+ kB \(from server\.buffer_pool_mb 4000000, sysbench\.threads: up to \d+ clients\)", corpus.smoke_with("s.toml", "buffer_pool_mb = 64", "buffer_pool_mb = 4000000"), needs="mariadbd", out=["cache/datasets"]),
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
