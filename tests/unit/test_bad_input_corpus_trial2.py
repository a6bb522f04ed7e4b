"""The bad-input corpus, continued for what issue 35's second trial found short: figures out of
range that still counted, a design at odds with its own run, a round without one of its arms, a
run state the tool never writes, re-derivation from a raw record of another life or one that lost
its phases, merge's silence over another server binary or another design, a path of bytes that are
not UTF-8, a runner pid taken by another process, server settings the tool writes itself, and
numbers in digits other than ASCII's.

Same machinery as tests/unit/test_bad_input_corpus.py (its module doc: each case one line, run in
a forked child through the real CLI, one line on stderr naming the file/field/value, nothing of
the sandbox changed beyond the outputs a case names). Each class holds the trial's example and
others of the same class (other fields, other values, other commands).
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
    edit_json,
    manifest,
    set_val,
    shards,
)
from tests.unit.test_bad_input_corpus_issue35 import (
    alloc_field,
    design,
    fifo,
    row0,
    server_field,
    shard_manifest,
)

F3C0, F3C1 = F3_CELLS
SHARDS = corpus.MERGE_OUT
# What `report --rederive` writes besides the report: the derived rows and results.csv rebuilt
REDERIVED = [*REPORT_FILES, "F3/derived", "F3/derived/*", "F3/results.csv"]
AA_GONE = "b_mariadb-10.11.19__glibc__thp-system__r2"
# A directory name of bytes that are not UTF-8 (\xff\xfe), as Python's str holds it (PEP 383)
NOT_UTF8 = "run-\udcff\udcfe"


def raw(i: int, fn):
    """fn applied to F3's raw record of cell i (raw/<id>.json)."""
    return edit_json(f"F3/raw/{F3_CELLS[i]}.json", fn)


def raw_of_other(i: int, j: int, rename: bool = False):
    """F3's raw record of cell j copied over cell i's (rename: with its cell names changed to i's,
    as a careful hand would)."""

    def do(s: Path):
        src, dst = s / "F3/raw" / f"{F3_CELLS[j]}.json", s / "F3/raw" / f"{F3_CELLS[i]}.json"
        d = json.loads(src.read_text())
        if rename:
            d["cell"] = d["identity"]["cell"] = F3_CELLS[i]
        dst.write_text(json.dumps(d))

    return do


def raw_link(i: int, target: str):
    def do(s: Path):
        p = s / "F3/raw" / f"{F3_CELLS[i]}.json"
        p.unlink()
        p.symlink_to(target)

    return do


def drop_cell(run: str, cid: str):
    """A cell's entry and record gone from a finished run (its round then lacks that arm)."""

    def do(s: Path):
        p = s / run / "manifest.json"
        m = json.loads(p.read_text())
        m["cells"] = [c for c in m["cells"] if c["id"] != cid]
        p.write_text(json.dumps(m))
        (s / run / "cells" / f"{cid}.json").unlink()

    return do


def running_by_this_process(run: str):
    """The run says "running" by a runner pid that is alive but is no mallocsweep runner (this
    test process: pytest), with no start time recorded (a run from before runner_start_ticks)."""

    def do(s: Path):
        p = s / run / "manifest.json"
        m = json.loads(p.read_text())
        m.update(status="running", runner_pid=os.getpid())
        m.pop("runner_start_ticks", None)
        p.write_text(json.dumps(m))

    return do


def copy_as(src: str, name: str):
    def do(s: Path):
        shutil.copytree(corpus.FIXTURES / corpus.RUNS[src], s / name, symlinks=True)

    return do


def settings(line: str):
    return corpus.smoke_with("s.toml", "buffer_pool_mb = 64", f"buffer_pool_mb = 64\n{line}")


def both_shards(fn):
    return [shard_manifest(1, fn), shard_manifest(2, fn)]


NAMED0 = rf"cell {F3C0}, oltp_ro@4"
NAMED1 = rf"cell {F3C1}, oltp_ro@4"

# fmt: off
CLASSES: dict[str, list[C]] = {
    # every recorded figure in range; a point that fails is refused, its cell named
    "figures-in-range": [
        C("t2-report-duration-zero", "report {F3}", 2, NAMED0 + r": duration_s 0(\.0)? is not a level's length \(it must be above 0\)", row0(0, duration_s=0.0)),
        C("t2-report-rss-peak-negative", "report {F3}", 2, NAMED0 + r": rss_peak_kb -5(\.0)? is below 0", row0(0, rss_peak_kb=-5)),
        C("t2-report-vsz-end-negative", "report {F3}", 2, NAMED1 + r": vsz_end_kb -1(\.0)? is below 0", row0(1, vsz_end_kb=-1)),
        C("t2-report-cpu-per-op-negative", "report {F3}", 2, NAMED0 + r": cpu_us_per_op -2\.0 is below 0", row0(0, cpu_us_per_op=-2.0)),
        C("t2-report-f1-duration-negative", "report {F1}", 2, r"oltp_ro@4: duration_s -3\.0 is not a level's length", set_val("F1", "duration_s", "-3")),
        C("t2-compare-anon-huge-negative", "compare {F1} {F3}", 2, r"F3: incomplete run: .*anon_huge_kb -7(\.0)? is below 0", row0(1, anon_huge_kb=-7)),
        C("t2-report-allow-duration-zero", "report {F3} --allow-incomplete", 0, r"INCOMPLETE RUN \S+: " + NAMED0 + r": duration_s 0(\.0)? is not a level's length .*so this point is not used", row0(0, duration_s=0), out=REPORT_FILES, lines=None),
    ],
    # the design's fields consistent with each other and with the run
    "design-consistent": [
        C("t2-report-first-look-above-max", "report {F3}", 2, r"manifest\.json: design\.first_look 3 is above design\.max_rounds 1", design("F3", first_look=3)),
        C("t2-report-baseline-not-an-arm", "report {F3}", 2, r"manifest\.json: design\.baseline 'nosuchalloc' is not an arm of this run \(glibc, jemalloc\)", design("F3", baseline="nosuchalloc")),
        C("t2-report-aa-arm-not-an-arm", "report {F3}", 2, r"design\.aa_arm 'tcmalloc' is not an arm of this run", design("F3", aa_arm="tcmalloc")),
        C("t2-compare-aa-arm-not-an-arm", "compare {F1} {F3}", 2, r"F3/manifest\.json: design\.aa_arm 'glibc-aa' is not an arm", design("F3", aa_arm="glibc-aa")),
        C("t2-report-aa-first-look-above-max", "report {AA}", 2, r"design\.first_look 4 is above design\.max_rounds 3", design("AA", first_look=4)),
        C("t2-report-aa-baseline-server-unknown", "report {AA}", 2, r"design\.baseline_server 'c' is not a server of this run \(a, b\)", design("AA", baseline_server="c")),
        C("t2-merge-baseline-not-an-arm", SHARDS, 2, r"S1/manifest\.json: design\.baseline 'mimalloc' is not an arm", shards(), *both_shards(lambda m: m["design"].update(baseline="mimalloc"))),
    ],
    # every round runs every arm; a run's and a cell's state are ones the tool writes
    "pairing-and-state": [
        C("t2-report-round-missing-arm", "report {AA}", 2, rf"manifest\.json: round 2 has no cell of {AA_GONE[:-4]} \(the other rounds have one\)", drop_cell("AA", AA_GONE)),
        C("t2-compare-round-missing-arm", "compare {AA} {s}/AA2", 2, r"AA2: incomplete run: manifest\.json: round 3 has no cell of a_mariadb-10\.11\.19__jemalloc__thp-system", copy_as("AA", "AA2"), drop_cell("AA2", "a_mariadb-10.11.19__jemalloc__thp-system__r3")),
        C("t2-report-status-bogus", "report {F3}", 2, r"manifest\.json: status 'bogus' is not a run's state \(one of running, finished, failed, interrupted\)", manifest("F3", lambda m: m.update(status="bogus"))),
        C("t2-compare-status-number", "compare {F1} {F1B}", 2, r"F1B/manifest\.json: status 3 is not a run's state", manifest("F1B", lambda m: m.update(status=3))),
        C("t2-report-finished-cell-running", "report {F3}", 2, rf"manifest\.json: the run is finished but cell {F3C1} is running: the manifest is damaged", manifest("F3", lambda m: m["cells"][1].update(status="running"))),
        C("t2-report-finished-cell-pending", "report {F3}", 2, rf"the run is finished but cell {F3C0} is pending", manifest("F3", lambda m: m["cells"][0].update(status="pending"))),
        C("t2-report-running-pid-not-a-runner", "report {F3}", 0, r"INTERRUPTED by the loss of its runner \(pid \d+ is gone or is another process now.*--resume \S+F3`", running_by_this_process("F3"), out=REPORT_FILES, lines=None),
        C("t2-compare-killed-runner", "compare {F1} {F3}", 2, None, manifest("F3", lambda m: m.update(status="running", runner_pid=999999999)), out=["F3/compare-*"], lines=None, says=r"(?s)new run \S+ is interrupted by the loss of its runner \(pid 999999999 .*finish it with\s+`mallocsweep\s+run\s+\S+\s+--resume\s+\S+F3`"),
    ],
    # --rederive never derives one life's figures under another's name, nor invents them
    "rederive": [
        C("t2-rederive-raw-dev-zero", "report {F3} --rederive", 0, rf"could not derive 1 cell\(s\) again \(raw record unusable\): {F3C0}", raw_link(0, "/dev/zero"), out=REDERIVED, lines=None, says=rf"{F3C0}: kept: raw record unusable \(raw/{F3C0}\.json is a device, not a regular file: refused\)"),
        C("t2-rederive-raw-fifo", "report {F3} --rederive", 0, rf"raw/{F3C1}\.json is a FIFO, not a regular file: refused", fifo(f"F3/raw/{F3C1}.json"), out=REDERIVED, lines=None, says=rf"{F3C1}: kept: raw record unusable \(raw/\S+ is a FIFO"),
        C("t2-rederive-raw-no-phases", "report {F3} --rederive", 0, rf"could not derive 1 cell\(s\) again .*{F3C0}", raw(0, lambda d: d.update(phases={})), out=REDERIVED, lines=None, says=r"kept: raw record unusable \(raw/\S+: it lacks the level\(s\) or closed phase\(s\) oltp_ro@4"),
        C("t2-rederive-raw-one-phase-open", "report {F3} --rederive", 0, rf"could not derive 1 cell\(s\) again .*{F3C1}", raw(1, lambda d: d["phases"]["point_select@16"].update(end=None)), out=REDERIVED, lines=None, says=r"lacks the level\(s\) or closed phase\(s\) point_select@16 that the cell recorded as ok"),
        C("t2-rederive-raw-of-other-cell", "report {F3} --rederive", 0, rf"could not derive 1 cell\(s\) again .*{F3C0}", raw_of_other(0, 1), out=REDERIVED, lines=None, says=rf"it is the raw record of cell '{F3C1}' \(cell\), not of '{F3C0}'"),
        C("t2-rederive-raw-of-other-cell-renamed", "report {F3} --rederive", 0, rf"could not derive 1 cell\(s\) again .*{F3C1}", raw_of_other(1, 0, rename=True), out=REDERIVED, lines=None, says=r"its identity\.allocator is 'glibc', the cell ran 'jemalloc'"),
        C("t2-rederive-raw-other-life", "report {F3} --rederive", 0, rf"could not derive 1 cell\(s\) again .*{F3C0}", raw(0, lambda d: d["exit"]["rusage"].update(ru_utime=1.5)), out=REDERIVED, lines=None, says=r"exit's resource usage \(wait4\) differs from the cell record's: it observed another server life"),
        C("t2-rederive-raw-round-relabelled", "report {F3} --rederive", 0, rf"could not derive 1 cell\(s\) again .*{F3C1}", raw(1, lambda d: d["identity"].update(repeat=2)), out=REDERIVED, lines=None, says=r"its identity\.repeat is 2, the cell ran in round 1"),
    ],
    # paths whose bytes are not UTF-8 work (written as \xNN, the files valid UTF-8)
    "paths": [
        C("t2-report-run-dir-not-utf8", ["report", "{s}/" + NOT_UTF8], 0, None, copy_as("F3", NOT_UTF8), out=[f"{NOT_UTF8}/report.html", f"{NOT_UTF8}/summary.md", f"{NOT_UTF8}/verdicts.csv"], lines=None, says=r"summary: \S+/run-"),
        C("t2-compare-new-not-utf8", ["compare", "{F1}", "{s}/" + NOT_UTF8], 2, None, copy_as("F3", NOT_UTF8), out=[f"{NOT_UTF8}/compare-*"], lines=None, says=r"written: \S+\.html"),
        C("t2-rederive-run-dir-not-utf8", ["report", "{s}/" + NOT_UTF8, "--rederive"], 0, None, copy_as("F3", NOT_UTF8), out=[f"{NOT_UTF8}/{f}" for f in ("report.html", "summary.md", "verdicts.csv", "derived", "derived/*", "results.csv")], lines=None, says=r"derived: 4 row\(s\)"),
    ],
    # merge refuses what its --help promises: another server build, another design
    "merge-promises": [
        C("t2-merge-server-binary-path", SHARDS, 2, r"server mariadb-10\.11\.19 differs between shards: binary '/opt/mariadb/bin/mariadbd' on \S+S2 vs '/usr/sbin/mariadbd' on \S+S1, and no sha256", shards(), shard_manifest(2, server_field("binary", "/opt/mariadb/bin/mariadbd"))),
        C("t2-merge-server-sha256", SHARDS, 2, r"server mariadb-10\.11\.19 differs between shards: binary sha256 b+ \(\S+\) on \S+S2 vs a+ ", shards(), shard_manifest(1, server_field("sha256", "a" * 64)), shard_manifest(2, server_field("sha256", "b" * 64))),
        C("t2-merge-design-alpha", SHARDS, 2, r"S2 was planned with another design than \S+S1: design\.alpha = 0\.01 vs 0\.05", shards(), shard_manifest(2, lambda m: m["design"].update(alpha=0.01))),
        C("t2-merge-design-min-effect", SHARDS, 2, r"design\.min_effect_pct = 10(\.0)? vs 5\.0", shards(), shard_manifest(2, lambda m: m["design"].update(min_effect_pct=10.0))),
        C("t2-merge-design-aa-arm", SHARDS, 2, r"design\.aa_arm = 'glibc-aa' vs None", shards(), shard_manifest(2, lambda m: [m["design"].update(aa_arm="glibc-aa"), m["cells"][0]["allocator"].update(name="glibc-aa")])),
    ],
    # server settings the tool writes itself are refused, naming both
    "settings": [
        C("t2-run-settings-malloc-lib", "run {s}/s.toml", 2, r"s\.toml:\d+: server\.settings: malloc-lib = '/usr/lib/x86_64-linux-gnu/libtcmalloc\.so\.4' conflicts with what mallocsweep sets itself \(the allocator under test", settings('settings = { malloc-lib = "/usr/lib/x86_64-linux-gnu/libtcmalloc.so.4" }')),
        C("t2-run-settings-loose-malloc-lib", "run {s}/s.toml", 2, r"loose-malloc_lib = 'jemalloc' conflicts with what mallocsweep sets itself", settings('settings = { loose-malloc_lib = "jemalloc" }')),
        C("t2-run-settings-performance-schema", "run {s}/s.toml", 2, r"performance_schema = 'ON' conflicts with what mallocsweep sets itself \(performance_schema = OFF", settings('settings = { performance_schema = "ON" }')),
        C("t2-run-settings-enable-performance-schema", "run {s}/s.toml", 2, r"enable-performance-schema = 'True' conflicts .*performance_schema = OFF", settings("settings = { enable-performance-schema = true }")),
        C("t2-run-settings-bp-load", "run {s}/s.toml", 2, r"innodb_buffer_pool_load_at_startup = 'ON' conflicts .*= OFF\): with it every allocator after the first would start with a warm buffer pool", settings('settings = { innodb_buffer_pool_load_at_startup = "ON" }')),
        C("t2-run-settings-redo-size", "run {s}/s.toml", 2, r"innodb_log_file_size = '1G' conflicts .*the redo log size", settings('settings = { innodb_log_file_size = "1G" }')),
        C("t2-run-settings-flush-log-3", "run {s}/s.toml", 2, r"s\.toml:\d+: server\.settings: innodb_flush_log_at_trx_commit = 3: expected 0, 1 or 2", settings("settings = { innodb_flush_log_at_trx_commit = 3 }")),
    ],
    # numbers in ASCII digits only, the option named
    "ascii-numbers": [
        C("t2-run-threads-fullwidth", ["run", "{SMOKE}", "--threads", "８"], 2, r"argument --threads: expected whole numbers in ASCII digits \(0-9\), got '８'"),
        C("t2-run-repeat-fullwidth", ["run", "{SMOKE}", "--repeat", "３"], 2, r"argument --repeat: expected a whole number in ASCII digits \(0-9\), got '３'"),
        C("t2-run-duration-arabic-indic", ["run", "{SMOKE}", "--duration", "٥"], 2, r"argument --duration: expected a number in ASCII digits"),
        C("t2-run-threads-mixed", ["run", "{SMOKE}", "--threads", "8,６４"], 2, r"argument --threads: .*got '8,６４'"),
        C("t2-compare-threshold-fullwidth", ["compare", "{F1}", "{F1B}", "--threshold", "１０"], 2, r"argument --threshold: expected a number in ASCII digits"),
        C("t2-run-shard-fullwidth", ["run", "{SMOKE}", "--shard", "１/２"], 2, r"--shard １/２: expected K/N"),
        C("t2-run-budget-fullwidth", ["run", "{SMOKE}", "--budget", "２m"], 2, r"--budget ２m: expected a duration like 20m"),
        C("t2-run-settings-max-connections-fullwidth", "run {s}/s.toml", 2, r"max_connections = '２０００': expected a whole number", settings('settings = { max_connections = "２０００" }')),
    ],
}
# fmt: on
CASES = [c for cases in CLASSES.values() for c in cases]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input(case, tmp_path):
    corpus.check_case(case, tmp_path / "s")


def test_case_ids_are_unique_across_the_corpora():
    from tests.unit import test_bad_input_corpus_issue35 as issue35

    ids = [c.id for c in (*corpus.CASES, *issue35.CASES, *CASES)]
    assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})


def test_every_class_has_cases():
    assert all(len(cases) >= 3 for cases in CLASSES.values()), {
        k: len(v) for k, v in CLASSES.items()
    }


def test_shards_whose_sha256_differs_only_in_case_merge(tmp_path):
    """A digest printed upper case names the same bytes: the shards are one measurement."""
    s = tmp_path / "s"
    s.mkdir()
    shards()(s)
    up = "6B4A45352FD0C540A9C7C718F35CE8C8E46A4E482F9D3885A910C32D1A0E1421"
    shard_manifest(2, alloc_field("glibc", "sha256", up))(s)
    shard_manifest(1, server_field("sha256", "ab" * 32))(s)
    shard_manifest(2, server_field("sha256", "AB" * 32))(s)
    code, out, err = corpus.run_forked(
        ["merge", str(s / "S1"), str(s / "S2"), "--out", str(s / "m")],
        s,
        corpus._env(s, C("x", "", 0, "")),
    )
    assert code == 0, err
    assert "merged 2 shards" in out


def test_flush_log_at_trx_commit_is_recorded_not_overridden():
    """innodb_flush_log_at_trx_commit in server.settings is taken into the settings the run
    records (one my.cnf line, ours), never written after ours while the manifest says 1."""
    from suites.families.mysql.flavor import ServerBinary
    from suites.families.mysql.my_cnf import ServerPaths, render_my_cnf
    from suites.families.mysql.plugin import MySQLFamily
    from suites.suite.model import load_suite

    suite = load_suite(corpus.REPO / "configs/suites/symas-2015.toml").suite
    st = MySQLFamily().settings(suite.server, 16)
    assert st.flush_log_at_trx_commit == 2
    assert st.to_manifest()["flush_log_at_trx_commit"] == 2
    assert not any("innodb_flush_log_at_trx_commit" in k for k in st.extra)
    b = ServerBinary("/usr/sbin/mariadbd", "mariadb", "10.11.19", "10.11.19-MariaDB", None, "/usr")
    p = Path("/nonexistent")
    text = render_my_cnf(b, st, ServerPaths(p, p / "s", p / "p", p / "e", p), 3306, euid=1000)
    lines = [x for x in text.splitlines() if x.startswith("innodb_flush_log_at_trx_commit")]
    assert lines == ["innodb_flush_log_at_trx_commit = 2"]
