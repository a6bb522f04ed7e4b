"""The bad-input corpus: every way a demanding new user can hand mallocsweep something wrong, one
line each, run through the real CLI in a process of its own.

Each case is one line of CASES: an id, the command line, the exit code, a regex the message must
match (it names what is wrong: the file, field or value), then the damage done to the case's
sandbox first (copies of the recorded runs in tests/fixtures/runs, suite files, shards). For each
case the corpus checks: the exit code; exactly one line on stderr (`lines=` for the few cases
that go on and warn), matching the regex; no traceback and no "internal error"; and nothing
written or changed: every file of the sandbox has the same checksum after the command, and no
file appeared outside the case's expected outputs (`out=`). The sandbox also holds the state and
cache directories the command sees (MALLOCSWEEP_STATE, MALLOCSWEEP_CACHE), so a stray write
there is caught too.

A new case is one line. Placeholders in the command line: a recorded run's short name (F1, F3, ...
see RUNS) is a fresh copy of it in the sandbox; {s} is the sandbox; {SMOKE} the shipped smoke
suite, {FRAG} the shipped fragmentation suite. Damage helpers take paths relative to the
sandbox, starting with a run's short name.

Each case runs in a forked child of this test process: a real process of its own (its own exit
code, stdout and stderr file descriptors: /dev/full is /dev/full) that starts from the already
imported CLI. A subprocess per case (`python -m suites.cli.main`) costs the interpreter start and the
imports every time: about 1.2 s of CPU per case here against 0.1-0.3 s forked, which would make
the corpus several minutes long. test_forked_and_real_processes_agree checks that a few cases
give the same exit code and stderr both ways.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests/fixtures/runs"
SMOKE = REPO / "configs/suites/smoke.toml"
FRAG = REPO / "configs/suites/fragmentation.toml"
# Short names of the recorded runs a case can use (format 1 before and after measured windows,
# format 2, format 3 with cells/ and raw/).
RUNS = {
    "F1": "real-smoke-1",
    "F1B": "real-smoke-2",
    "R5": "real-regress-base-a",
    "R5B": "real-regress-base-b",
    "W1": "real-smoke-windows",
    "THP": "real-thp-small",
    "F2": "real-smoke-format2",
    "F3": "real-smoke-format3",
    "AA": "real-servers-aa-format5",  # two servers x two allocators x three rounds (format 5)
    "ALT": "real-alternate-aa",  # the alternate design: levels in blocks, raw/ kept (format 6)
}
F3_CELLS = sorted(p.stem for p in (FIXTURES / RUNS["F3"] / "cells").glob("*.json"))


# -- damage: each helper returns a function of the sandbox --------------------------------------
def rm(rel: str):
    def do(s: Path):
        p = s / rel
        shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()

    return do


def put(rel: str, data: str | bytes):
    def do(s: Path):
        p = s / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data if isinstance(data, bytes) else data.encode())

    return do


def link(rel: str, target: str):
    """A symbolic link at `rel` pointing at `target` (taken as is: relative or absolute)."""

    def do(s: Path):
        (s / rel).symlink_to(target.format(s=s))

    return do


def copy(src: str, dst: str):
    def do(s: Path):
        shutil.copytree(s / src, s / dst, symlinks=True)

    return do


def edit_json(rel: str, fn):
    """fn(obj) changes the JSON document in place (what it returns is ignored)."""

    def do(s: Path):
        p = s / rel
        obj = json.loads(p.read_text())
        fn(obj)
        p.write_text(json.dumps(obj))

    return do


def edit_csv(rel: str, fn):
    """fn(header, rows) -> (header, rows); rows are dicts of text."""

    def do(s: Path):
        p = s / rel
        with p.open(newline="") as f:
            r = csv.DictReader(f)
            header, rows = list(r.fieldnames), list(r)
        header, rows = fn(header, rows)
        with p.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=header, extrasaction="ignore", lineterminator="\n")
            w.writeheader()
            w.writerows(rows)

    return do


def drop_col(run: str, col: str):
    return edit_csv(f"{run}/results.csv", lambda h, rows: ([c for c in h if c != col], rows))


def set_val(run: str, col: str, value: str, row: int = 0):
    def fn(h, rows):
        rows[row][col] = value
        return h, rows

    return edit_csv(f"{run}/results.csv", fn)


def drop_cells_rows(run: str, n: int):
    """Delete every row of the first n cells from results.csv."""

    def fn(h, rows):
        cells = list(dict.fromkeys(r["cell"] for r in rows))[:n]
        return h, [r for r in rows if r["cell"] not in cells]

    return edit_csv(f"{run}/results.csv", fn)


def drop_rows(run: str, *indexes: int):
    return edit_csv(
        f"{run}/results.csv",
        lambda h, rows: (h, [r for i, r in enumerate(rows) if i not in indexes]),
    )


def dup_row(run: str, row: int = 0):
    return edit_csv(f"{run}/results.csv", lambda h, rows: (h, [*rows, dict(rows[row])]))


def manifest(run: str, fn):
    return edit_json(f"{run}/manifest.json", fn)


def cell0(fn):
    """fn applied to the first cell entry of a manifest."""

    def do(m):
        fn(m["cells"][0])

    return do


def record(run: str, i: int, fn):
    """fn applied to the i-th cell record of a format-3 run (cells/<id>.json)."""
    return edit_json(f"{run}/cells/{F3_CELLS[i]}.json", fn)


def suite(name: str, text: str):
    return put(name, text)


def smoke_with(name: str, old: str, new: str):
    """The shipped smoke suite with one piece of text replaced, as sandbox/name."""
    text = SMOKE.read_text()
    assert old in text, old
    return put(name, text.replace(old, new, 1))


def smoke_plus(name: str, extra: str):
    """The shipped smoke suite with `extra` TOML appended (sections it does not have)."""
    return put(name, SMOKE.read_text() + "\n" + extra)


def shards():
    """Two shards (1/2, 2/2) of one measurement, made from F3's two cells: each a real format-3
    run directory (cells/, raw/, samples/, results.csv written by the real writer)."""

    def do(s: Path):
        from rundir.write import RunDir

        src = FIXTURES / RUNS["F3"]
        m = json.loads((src / "manifest.json").read_text())
        for k, cid in enumerate(F3_CELLS, start=1):
            d = s / f"S{k}"
            for sub in ("cells", "raw", "samples", "logs"):
                (d / sub).mkdir(parents=True)
            for sub, ext in (("cells", "json"), ("raw", "json"), ("samples", "csv")):
                shutil.copy2(src / sub / f"{cid}.{ext}", d / sub / f"{cid}.{ext}")
            mk = dict(m, run_id=f"{m['run_id']}-shard{k}of2")
            mk["cells"] = [c for c in m["cells"] if c["id"] == cid]
            mk["shard"] = {
                "index": k,
                "count": 2,
                "split": "whole-rounds-snake",
                "rounds": [k],
                "planned_cells": 2,
            }
            (d / "manifest.json").write_text(json.dumps(mk, indent=1))
            (d / ".mallocsweep-owned").write_text("created by mallocsweep\n")
            RunDir(d).rebuild_results()

    return do


def merged():
    """The shards S1 and S2 (shards()) merged into m, by the real merge."""

    def do(s: Path):
        from suites.runner.merge import merge_shards

        merge_shards([s / "S1", s / "S2"], s / "m")

    return do


def full_disk(rel: str, free_kb: int = 24):
    """A tmpfs at `rel` with about free_kb kB left (root only; unmounted by the corpus)."""

    def do(s: Path):
        d = s / rel
        d.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(d)], check=True)
        st = os.statvfs(d)
        fill = st.f_bavail * st.f_frsize - free_kb * 1024
        if fill > 0:
            (d / "filler").write_bytes(b"\0" * fill)

    return do


def read_only(rel: str):
    """A directory nobody may write to: chmod for a user, chattr +i for root (whom modes do not
    stop); undone by the corpus."""

    def do(s: Path):
        d = s / rel
        d.mkdir(exist_ok=True)
        if os.geteuid() == 0:
            subprocess.run(["chattr", "+i", str(d)], check=True, capture_output=True)
        else:
            d.chmod(0o555)

    return do


def edit_text(rel: str, fn):
    def do(s: Path):
        p = s / rel
        p.write_text(fn(p.read_text()))

    return do


def copy_file(src: str, dst: str):
    def do(s: Path):
        shutil.copy2(s / src, s / dst)

    return do


def smoke_plus_run(name: str, lines: str):
    """Settings added to the [run] table of sandbox/name (made by smoke_with or put)."""

    def do(s: Path):
        p = s / name
        text = p.read_text()
        if "\n[run]\n" in text:
            text = text.replace("\n[run]\n", f"\n[run]\n{lines}\n", 1)
        else:
            text += f"\n[run]\n{lines}\n"
        p.write_text(text)

    return do


# Caches a command may fill while it refuses (facts about ELF binaries, keyed by their contents):
# not the user's data, so not "something written".
CACHES = ["cache", "cache/elf", "cache/elf/*"]
# What report writes into the run directory (a case that goes on may write these)
REPORT_FILES = ["*/report.html", "*/summary.md", "*/verdicts.csv"]
REPORT_FILES_F1 = REPORT_FILES


class C:
    """One case: id, command line, exit code, regex for the message, damage..., out= (globs of
    files it may write), stdout= ("pipe" or "full"), needs= ("root", "mariadbd"), lines= (how
    many stderr lines; the regex is then matched against the first), env= (extra variables),
    says= (a regex stdout must match: what a command that goes on tells; with lines=0 and
    pattern None, stderr must be empty)."""

    def __init__(self, id, argv, code, pattern, *damage, out=(), stdout="pipe", needs=None,
                 lines=1, env=None, says=None):  # fmt: skip
        self.id, self.argv, self.code, self.pattern = id, argv, code, pattern
        self.damage, self.out, self.stdout, self.needs = damage, out, stdout, needs
        self.lines, self.env, self.says = lines, env or {}, says


# Messages the corpus expects, named once
NOT_RUN = r"not a mallocsweep run"
SAME = r"(same run|same server life|identical results)"
F3C0, F3C1 = F3_CELLS[0], F3_CELLS[1]
SHARDS = "merge {s}/S1 {s}/S2"
# the later corpora's merges name their output, and damage figures with these
MERGE_OUT = "merge {s}/S1 {s}/S2 --out {s}/m"
NAN, INF = float("nan"), float("inf")

# fmt: off
CASES = [
    # -- report: not a run at all ---------------------------------------------------------------
    C("report-missing-dir", "report {s}/nope", 2, r"nope: does not exist"),
    C("report-a-file", "report {s}/f", 2, r"/f: is not a directory", put("f", "x")),
    C("report-symlink-loop", "report {s}/l1", 2, r"l1: a symbolic link loop", link("l1", "l2"), link("l2", "l1")),
    C("report-dangling-link", "report {s}/dl", 2, r"dl: a symbolic link to \S*gone, which does not exist", link("dl", "gone")),
    C("report-under-a-file", "report {s}/f/run", 2, r"f/run: not reachable: a part of the path before it is a file", put("f", "")),
    C("report-empty-dir", "report {s}/d", 2, r"/d: not a mallocsweep run directory \(no manifest", put("d/x", "")),
    C("report-empty-arg", ["report", ""], 2, r"argument '': an empty value"),
    C("report-newline-arg", ["report", "{s}/a\nb"], 2, r"'.*a\\nb': holds a control character \(newline\)"),
    C("report-manifest-list", "report {F1}", 2, NOT_RUN + r" manifest \(a JSON list", put("F1/manifest.json", "[]")),
    C("report-manifest-null", "report {F1}", 2, NOT_RUN + r" manifest \(a JSON null", put("F1/manifest.json", "null")),
    C("report-manifest-string", "report {F1}", 2, NOT_RUN + r" manifest \(a JSON string", put("F1/manifest.json", '"x"')),
    C("report-manifest-empty-object", "report {F1}", 2, r"format_version None is " + NOT_RUN, put("F1/manifest.json", "{}")),
    C("report-manifest-no-cells", "report {F1}", 2, NOT_RUN + r" manifest \(no cells", manifest("F1", lambda m: m.pop("cells"))),
    C("report-manifest-cells-object", "report {F1}", 2, r"cells is a JSON object", manifest("F1", lambda m: m.update(cells={}))),
    C("report-manifest-cells-empty", "report {F1}", 2, r"manifest\.json: lists no cells", manifest("F1", lambda m: m.update(cells=[]))),
    C("report-manifest-cell-not-object", "report {F1}", 2, r"cells\[0\] is not a cell entry", manifest("F1", lambda m: m.update(cells=[1]))),
    C("report-manifest-cell-no-id", "report {F1}", 2, r"cells\[0\] is not a cell entry \(no id\)", manifest("F1", cell0(lambda c: c.pop("id")))),
    C("report-manifest-cell-dup", "report {F1}", 2, r"cell \S+ is listed twice", manifest("F1", lambda m: m["cells"].append(m["cells"][0]))),
    C("report-manifest-cell-status", "report {F1}", 2, r"status 'exploded' is not one of", manifest("F1", cell0(lambda c: c.update(status="exploded")))),
    C("report-manifest-cell-index", "report {F1}", 2, r"index 'one' is not a number", manifest("F1", cell0(lambda c: c.update(index="one")))),
    C("report-manifest-not-json", "report {F1}", 2, r"manifest\.json: not valid JSON \(line 1\)", put("F1/manifest.json", "{not json")),
    C("report-manifest-binary", "report {F1}", 2, r"manifest\.json: not (UTF-8 text|valid JSON)", put("F1/manifest.json", b"\xff\xfe\x00\x81" * 40)),
    C("report-manifest-truncated", "report {F3}", 2, r"manifest\.json: not valid JSON", edit_text("F3/manifest.json", lambda t: t[: len(t) // 2])),
    C("report-manifest-newer", "report {F1}", 2, r"newer mallocsweep \(run format 99", manifest("F1", lambda m: m.update(format_version=99))),
    C("report-manifest-version-text", "report {F1}", 2, r"format_version '1' is " + NOT_RUN, manifest("F1", lambda m: m.update(format_version="1"))),
    C("report-manifest-version-zero", "report {F1}", 2, r"format_version 0 is " + NOT_RUN, manifest("F1", lambda m: m.update(format_version=0))),
    C("report-manifest-deep", "report {F1}", 2, r"manifest\.json: (nested too deeply|not valid JSON)", put("F1/manifest.json", "[" * 100000)),
    # -- report: format 3, the truth (cells/) missing or garbage ---------------------------------
    C("report-f3-cells-gone", "report {F3}", 2, r"incomplete run: cells/ is missing: no record of the 2 finished", rm("F3/cells")),
    C("report-f3-cells-empty", "report {F3}", 2, r"incomplete run: cells/ is empty", rm("F3/cells"), put("F3/cells/.keep", "")),
    C("report-f3-cells-a-file", "report {F3}", 2, r"incomplete run: cells/ is not a directory", rm("F3/cells"), put("F3/cells", "x")),
    C("report-f3-record-a-directory", "report {F3}", 2, rf"cells/{F3C0}\.json: cannot read: Is a directory", rm(f"F3/cells/{F3C0}.json"), put(f"F3/cells/{F3C0}.json/x", "")),
    C("report-f3-record-missing", "report {F3}", 2, rf"incomplete run: cells/{F3C1}\.json is missing \(manifest\.json has cell \S+ ok\)", rm(f"F3/cells/{F3C1}.json")),
    C("report-f3-record-garbage", "report {F3}", 2, rf"cells/{F3C0}\.json is not a valid cell record", put(f"F3/cells/{F3C0}.json", b"\x00garbage{")),
    C("report-f3-record-truncated", "report {F3}", 2, rf"cells/{F3C0}\.json is not a valid cell record", edit_text(f"F3/cells/{F3C0}.json", lambda t: t[:500])),
    C("report-f3-record-list", "report {F3}", 2, rf"cells/{F3C0}\.json is not a cell record", put(f"F3/cells/{F3C0}.json", "[]")),
    C("report-f3-record-no-rows", "report {F3}", 2, rf"cells/{F3C0}\.json is not a cell record", record("F3", 0, lambda r: r.pop("rows"))),
    C("report-f3-record-other-cell", "report {F3}", 2, rf"cells/{F3C0}\.json holds the record of cell '{F3C1}'", rm(f"F3/cells/{F3C0}.json"), copy_file(f"F3/cells/{F3C1}.json", f"F3/cells/{F3C0}.json")),
    C("report-f3-record-foreign-row", "report {F3}", 2, rf"cells/{F3C0}\.json holds a row of cell 'x'", record("F3", 0, lambda r: r["rows"][1].update(cell="x"))),
    C("report-f3-record-qps-text", "report {F3}", 2, rf"cells/{F3C0}\.json: level oltp_ro@4: qps 'fast' is not a number", record("F3", 0, lambda r: r["rows"][0].update(qps="fast"))),
    C("report-f3-record-threads-fraction", "report {F3}", 2, r"threads 4\.5 is not a whole number", record("F3", 1, lambda r: r["rows"][0].update(threads=4.5))),
    C("report-f3-record-row-deleted", "report {F3}", 2, rf"cells/{F3C1}\.json: cell \S+ is ok but its record has no row for level\(s\) point_select@16", record("F3", 1, lambda r: r["rows"].pop())),
    C("report-f3-record-row-twice", "report {F3}", 2, r"is ok but its record has rows it did not record \(oltp_ro@4\)", record("F3", 0, lambda r: r["rows"].append(r["rows"][0]))),
    C("report-f3-record-not-listed", "report {F3}", 2, r"cells/x\.json is the record of a cell manifest\.json does not list", put("F3/cells/x.json", json.dumps({"cell": {"id": "x"}, "rows": []}))),
    C("report-f3-rederive-cells-gone", "report {F3} --rederive", 2, r"incomplete run: cells/ is missing", rm("F3/cells")),
    C("report-bad-baseline", "report {F1} --baseline nosuch", 2, r"--baseline nosuch: not an allocator of .* \(glibc, jemalloc\)"),
    C("report-samples-garbage", "report {F1}", 2, r"samples/\S+\.csv: not (a timeline|a valid CSV|UTF-8)", put(f"F1/samples/{'mariadb-10.11.19__glibc__thp-system__r1'}.csv", b"\x00\xff\xfe\x81" * 64)),
    # -- report: formats 1 and 2 (no cells/): results.csv checked against the manifest ----------
    C("report-f1-results-missing", "report {F1}", 2, r"results\.csv is missing and this format-1 run has no cells/", rm("F1/results.csv")),
    C("report-f1-qps-dropped", "report {F1}", 2, r"incomplete run: results\.csv lacks column\(s\) qps that a format-1 run holds", drop_col("F1", "qps")),
    C("report-f1-window-era-dropped", "report {W1}", 2, r"results\.csv lacks column\(s\) lat_p95_ms", drop_col("W1", "lat_p95_ms")),
    C("report-f1-qps-fast", "report {F1}", 2, r"results\.csv line 2 \(cell \S+, oltp_ro@4\): qps 'fast' is not a number", set_val("F1", "qps", "fast")),
    C("report-f1-rss-text", "report {THP}", 2, r"results\.csv line 4 \(cell .*\): rss_end_kb 'lots' is not a number", set_val("THP", "rss_end_kb", "lots", row=2)),
    C("report-f1-repeat-fraction", "report {F1}", 2, r"repeat '1\.5' is not a (whole )?number", set_val("F1", "repeat", "1.5")),
    C("report-f1-rows-of-3-cells-deleted", "report {R5}", 2, r"cell \S+__r1 finished ok but results\.csv has no row for level\(s\) point_select@4 \(and 2 more", drop_cells_rows("R5", 3)),
    C("report-f1-one-row-deleted", "report {F1}", 2, r"finished ok but results\.csv has no row for level\(s\) oltp_ro@16", drop_rows("F1", 1)),
    C("report-f1-row-twice", "report {F1}", 2, r"results\.csv has rows it did not record \(oltp_ro@4\)", dup_row("F1")),
    C("report-f1-allocator-changed", "report {F1}", 2, r"line 2 \(cell \S+glibc\S+, oltp_ro@4\): allocator 'jemalloc', but manifest\.json's cell ran 'glibc'", set_val("F1", "allocator", "jemalloc")),
    C("report-f1-thp-changed", "report {THP}", 2, r"thp 'never', but manifest\.json's cell ran 'always'", set_val("THP", "thp", "never")),
    C("report-f1-foreign-cell", "report {F1}", 2, r"results\.csv line 2: cell ghost is not one of manifest\.json's cells", set_val("F1", "cell", "ghost")),
    C("report-f1-no-threads", "report {F1}", 2, r"results\.csv line 3: a row with no cell, workload or threads", set_val("F1", "threads", "", row=1)),
    C("report-f1-results-binary", "report {F1}", 2, r"results\.csv is damaged \(not UTF-8 text", put("F1/results.csv", b"\xff\xfe\x00garbage\x81" * 50)),
    C("report-f1-results-header-only", "report {F1}", 2, r"finished ok but results\.csv has no row for level", edit_text("F1/results.csv", lambda t: t.splitlines()[0] + "\n")),
    C("report-f1-results-wrong-header", "report {F1}", 2, r"results\.csv is damaged \(no column\(s\) server", put("F1/results.csv", "cell,qps\nx,1\n")),
    C("report-f1-results-extra-field", "report {F1}", 2, r"results\.csv is damaged \(line 2 has more fields than the header", edit_text("F1/results.csv", lambda t: t.replace(",ok,", ",ok,,", 1))),
    C("report-f1-results-short-row", "report {F1}", 2, r"line 2 has fewer fields than the header", edit_text("F1/results.csv", lambda t: t.replace(t.splitlines()[1], t.splitlines()[1].rsplit(",", 3)[0]))),
    C("report-f2-qps-dropped", "report {F2}", 2, r"results\.csv lacks column\(s\) qps that a format-2 run holds", drop_col("F2", "qps")),
    C("report-f2-window-dropped", "report {F2}", 2, r"results\.csv lacks column\(s\) window_s that a format-2 run holds", drop_col("F2", "window_s")),
    C("report-f2-rows-deleted", "report {F2}", 2, r"has no row for level\(s\) point_select@4, point_select@16", drop_rows("F2", 2, 3)),
    C("report-f2-qps-fast", "report {F2}", 2, r"qps 'fast' is not a number", set_val("F2", "qps", "fast", row=5)),
    # -- report: the truth is there, results.csv is not: rebuilt, said in one line ---------------
    C("report-f3-qps-dropped-rebuilt", "report {F3}", 0, r"WARNING: \S+results\.csv lacks column\(s\) qps: the results were rebuilt from cells/\*\.json", drop_col("F3", "qps"), out=REPORT_FILES),
    C("report-f3-rows-deleted-rebuilt", "report {F3}", 0, r"results\.csv differs from cells/\*\.json \(5 rows there, 8 in the cell records\): the results were rebuilt", drop_rows("F3", 0, 4, 7), out=REPORT_FILES),
    C("report-f3-qps-fast-rebuilt", "report {F3}", 0, r"results\.csv has qps 'fast' \(cell \S+, oltp_ro@4\), not a number: the results were rebuilt", set_val("F3", "qps", "fast"), out=REPORT_FILES),
    C("report-f3-results-missing-rebuilt", "report {F3}", 0, r"results\.csv is missing: the results were rebuilt from cells/\*\.json \(the source of truth, 8 rows\)", rm("F3/results.csv"), out=REPORT_FILES),
    C("report-f3-derived-garbage", "report {F3}", 0, rf"derived/{F3C0}\.json is unreadable: cell \S+'s rows as recorded", put(f"F3/derived/{F3C0}.json", "{"), out=REPORT_FILES),
    C("report-f3-raw-missing-noted", "report {F3}", 0, r"raw/ lacks the raw record of 1 cell\(s\)", rm(f"F3/raw/{F3C1}.json"), out=REPORT_FILES),
    # -- report --allow-incomplete: goes on, the gap first --------------------------------------
    C("report-allow-record-missing", "report {F3} --allow-incomplete", 0, rf"WARNING: INCOMPLETE RUN \S+: cells/{F3C1}\.json is missing", rm(f"F3/cells/{F3C1}.json"), out=REPORT_FILES, lines=2),
    C("report-allow-f1-qps-dropped", "report {F1} --allow-incomplete", 0, r"WARNING: INCOMPLETE RUN \S+: results\.csv lacks column\(s\) qps", drop_col("F1", "qps"), out=REPORT_FILES),
    # -- compare ---------------------------------------------------------------------------------
    C("compare-base-missing", "compare {s}/nope {F1}", 2, r"nope: does not exist; give the path of a mallocsweep run"),
    C("compare-new-missing", "compare {F1} {s}/nope", 2, r"nope: does not exist"),
    C("compare-new-a-file", "compare {F1} {s}/f", 2, r"/f: is not a directory", put("f", "")),
    C("compare-not-a-run", "compare {F1} {s}/d", 2, r"not a mallocsweep run directory \(no manifest\.json\)", put("d/x", "")),
    C("compare-manifest-damaged", "compare {F1} {F1B}", 2, r"F1B/manifest\.json: not valid JSON", put("F1B/manifest.json", "{")),
    C("compare-manifest-list", "compare {F1} {F1B}", 2, NOT_RUN + r" manifest \(a JSON list", put("F1B/manifest.json", "[]")),
    C("compare-manifest-null", "compare {F1} {F1B}", 2, NOT_RUN + r" manifest \(a JSON null", put("F1B/manifest.json", "null")),
    C("compare-manifest-no-cells", "compare {F1} {F1B}", 2, NOT_RUN + r" manifest \(no cells", manifest("F1B", lambda m: m.pop("cells"))),
    C("compare-manifest-cells-null", "compare {F1} {F1B}", 2, NOT_RUN + r" manifest \(no cells", manifest("F1B", lambda m: m.update(cells=None))),
    C("compare-same-dir", "compare {F1} {F1}", 2, r"BASE and NEW are the same run directory"),
    C("compare-same-dir-slash", "compare {F1} {F1}/.", 2, r"BASE and NEW are the same run directory"),
    C("compare-symlink", "compare {F1} {s}/ln", 2, r"BASE and NEW are the same run directory", link("ln", "{s}/F1")),
    C("compare-copy", "compare {R5} {s}/cp", 2, r"BASE and NEW are the same run \(regress-base-\S+, started", copy("R5", "cp")),
    C("compare-copy-renamed", "compare {F1} {s}/cp", 2, r"BASE and NEW hold the same server life \(cell", copy("F1", "cp"), manifest("cp", lambda m: m.update(run_id="other", started_at="2027-01-01"))),
    C("compare-copy-f3", "compare {F3} {s}/cp", 2, SAME, copy("F3", "cp")),
    C("compare-copy-lives-changed", "compare {F1} {s}/cp", 2, r"identical results, row for row \(8 rows\)", copy("F1", "cp"), manifest("cp", lambda m: [m.update(run_id="x", started_at="y"), *[c.update(started_at=None) for c in m["cells"]],])),
    C("compare-copy-figure-edited", "compare {F3} {s}/cp", 2, SAME, copy("F3", "cp"), edit_json(f"cp/cells/{F3C0}.json", lambda r: r["rows"][0].update(qps=1.0)), rm("cp/results.csv")),
    C("compare-merged-vs-its-shard", "compare {s}/m {s}/S1", 2, r"BASE and NEW hold the same server life \(cell \S+glibc", shards(), merged()),
    C("compare-f2-rows-deleted", "compare {F1} {F2}", 2, r"F2: incomplete run: results\.csv: cell \S+ finished ok but results\.csv has no row for level\(s\) oltp_ro@4", drop_rows("F2", 0)),
    C("compare-f3-record-garbage", "compare {F1} {F3}", 2, rf"F3: incomplete run: cells/{F3C1}\.json is not a valid cell record", put(f"F3/cells/{F3C1}.json", "]")),
    C("compare-rows-of-3-cells-deleted", "compare {R5} {R5B}", 2, r"R5B: incomplete run: results\.csv: cell \S+ finished ok but results\.csv has no row", drop_cells_rows("R5B", 3)),
    C("compare-f3-cells-gone", "compare {F3} {s}/cp", 2, r"cp: incomplete run: cells/ is missing", copy("F3", "cp"), rm("cp/cells")),
    C("compare-f1-qps-fast", "compare {F1} {F1B}", 2, r"F1B: incomplete run: results\.csv line \d+ .*qps 'fast'", set_val("F1B", "qps", "fast", row=3)),
    C("compare-threshold-negative", "compare {F1} {F1B} --threshold -1", 2, r"--threshold -1\.0: expected a percentage from 0 to 100"),
    C("compare-threshold-nan", "compare {F1} {F1B} --threshold nan", 2, r"--threshold nan: expected a percentage"),
    C("compare-threshold-text", "compare {F1} {F1B} --threshold five", 2, r"argument --threshold: expected a number in ASCII digits \(0-9\), got 'five'"),
    C("compare-out-dev-full", "compare {F1} {F1B} --out /dev/full", 2, r"/dev/full: (cannot create the output directory|not a directory)"),
    C("compare-out-under-a-file", "compare {F1} {F1B} --out {s}/f/sub", 2, r"f/sub: cannot create the output directory: Not a directory; nothing was written", put("f", "")),
    C("compare-out-read-only", "compare {F1} {F1B} --out {s}/ro", 2, r"ro: cannot write compare-\S+\.md and \.html: (Operation not permitted|Permission denied); nothing was written", read_only("ro")),
    C("compare-out-read-only-sub", "compare {F1} {F1B} --out {s}/ro/a/b", 2, r"ro/a/b: cannot create the output directory", read_only("ro")),
    C("compare-out-full-disk", "compare {F1} {F1B} --out {s}/full/out", 2, r"full/out: cannot write compare-\S+ and \.html: No space left on device; nothing was written", full_disk("full"), needs="root"),
    C("compare-out-newline", ["compare", "{F1}", "{F1B}", "--out", "{s}/a\nb"], 2, r"--out '.*a\\nb': holds a control character \(newline\)"),
    C("compare-empty-arg", ["compare", "{F1}", ""], 2, r"argument '': an empty value"),
    C("compare-stdout-full", "compare {F1} {F1B} --out {s}/o", 2, r"stdout: cannot write the output \(No space left on device\)", out=["o/compare-*"], stdout="full"),
    C("compare-json-stdout-full", "compare {R5} {R5B} --out {s}/o --json", 2, r"stdout: cannot write the output \(No space left on device\); it was lost \(exit code 0", out=["o/compare-*"], stdout="full", lines=None),
    # -- merge -----------------------------------------------------------------------------------
    C("merge-shard-cells-gone", SHARDS + " --out {s}/m", 2, r"S2: incomplete run: cells/ is missing: no record of the 1 finished", shards(), rm("S2/cells")),
    C("merge-shard-record-missing", SHARDS + " --out {s}/m", 2, r"S1: incomplete run: cells/ is empty: no record of the 1 finished cell", shards(), rm(f"S1/cells/{F3C0}.json")),
    C("merge-shard-record-garbage", SHARDS + " --out {s}/m", 2, rf"S2: incomplete run: cells/{F3C1}\.json is not a valid cell record", shards(), put(f"S2/cells/{F3C1}.json", "{")),
    C("merge-shard-record-qps-text", SHARDS + " --out {s}/m", 2, r"S1: incomplete run: .*qps 'fast' is not a number", shards(), edit_json(f"S1/cells/{F3C0}.json", lambda r: r["rows"][0].update(qps="fast"))),
    C("merge-out-inside-shard", SHARDS + " --out {s}/S1/merged", 2, r"--out \S+S1/merged: inside the shard \S+S1", shards()),
    C("merge-out-deep-inside-shard", SHARDS + " --out {s}/S2/cells/x/y", 2, r"inside the shard \S+S2", shards()),
    C("merge-out-inside-via-link", SHARDS + " --out {s}/ln/m", 2, r"--out \S+ln/m: inside the shard \S+S1", shards(), link("ln", "{s}/S1")),
    C("merge-out-is-a-shard", SHARDS + " --out {s}/S1", 2, r"--out \S+S1: already exists", shards()),
    C("merge-out-exists", SHARDS + " --out {s}/d", 2, r"--out \S+/d: already exists", shards(), put("d/x", "")),
    C("merge-shard-twice", "merge {s}/S1 {s}/S1 --out {s}/m", 2, r"given twice: a run cannot be merged with itself", shards()),
    C("merge-shard-and-link", "merge {s}/S1 {s}/ln --out {s}/m", 2, r"given twice", shards(), link("ln", "{s}/S1")),
    C("merge-one-shard", "merge {s}/S1 --out {s}/m", 2, r"merge needs the run directories of at least two shards", shards()),
    C("merge-shard-missing-dir", "merge {s}/S1 {s}/nope --out {s}/m", 2, r"nope: does not exist", shards()),
    C("merge-shard-manifest-list", SHARDS + " --out {s}/m", 2, r"S2/manifest\.json: " + NOT_RUN + r" manifest \(a JSON list", shards(), put("S2/manifest.json", "[]")),
    C("merge-shard-manifest-null", SHARDS + " --out {s}/m", 2, r"S1/manifest\.json: " + NOT_RUN + r" manifest \(a JSON null", shards(), put("S1/manifest.json", "null")),
    C("merge-shard-cells-null", SHARDS + " --out {s}/m", 2, r"S2/manifest\.json: " + NOT_RUN + r" manifest \(no cells", shards(), edit_json("S2/manifest.json", lambda m: m.update(cells=None))),
    C("merge-not-a-shard", "merge {s}/S1 {F3} --out {s}/m", 2, r"F3: not a shard \(run without --shard K/N\)", shards()),
    C("merge-format-1-run", "merge {s}/S1 {F1} --out {s}/m", 2, r"F1: a format-1 run without cells/: no cell records to merge", shards()),
    C("merge-out-empty", [*SHARDS.split(), "--out", ""], 2, r"--out '': an empty value", shards()),
    C("merge-shard-2-missing", "merge {s}/S1 {s}/S1b --out {s}/m", 2, r"(overlapping shards|given twice)", shards(), copy("S1", "S1b")),
    # -- run: names, baseline, shards, server, budget, paths -------------------------------------
    C("run-baseline-all", "run {SMOKE} --baseline all", 2, r"^(?!.*did you mean).*--baseline all: run\.baseline: 'all' is every allocator, not one"),
    C("run-baseline-not-an-arm", "run {SMOKE} --baseline tcmalloc", 2, r"--baseline tcmalloc: run\.baseline: 'tcmalloc' is not one of the allocators this suite runs \(glibc, jemalloc\)"),
    C("run-baseline-default-not-an-arm", "run {SMOKE} --baseline glibc --allocators jemalloc", 2, r"--baseline glibc: not one of this run's allocators \(jemalloc\)"),
    C("run-baseline-unknown", "run {SMOKE} --baseline glibcc", 2, r"unknown allocator 'glibcc' \(did you mean 'glibc'\?\)"),
    C("run-baseline-in-file-not-an-arm", "run {s}/s.toml", 2, r"s\.toml.*run\.baseline: 'mimalloc' is not one of the allocators this suite runs", smoke_plus("s.toml", '[run]\nbaseline = "mimalloc"\n')),
    C("run-baseline-all-in-file", "run {s}/s.toml", 2, r"^(?!.*did you mean).*s\.toml:\d+: run\.baseline: 'all' is every allocator", smoke_plus("s.toml", '[run]\nbaseline = "all"\n')),
    C("run-custom-named-like-aa-arm", "run {s}/s.toml", 2, r"s\.toml:\d+: allocators\.custom\[0\]\.name: custom allocator 'glibc-aa' has the name of the A/A arm that run\.aa = true adds", put("lib.so", ""), smoke_with("s.toml", 'use = ["glibc", "jemalloc"]', 'use = ["glibc", "jemalloc", "glibc-aa"]\ncustom = [{ name = "glibc-aa", library = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2" }]'), smoke_plus_run("s.toml", "aa = true")),
    C("run-custom-aa-name-other-baseline", "run {s}/s.toml", 2, r"'jemalloc-aa' has the name of the A/A arm", smoke_with("s.toml", 'use = ["glibc", "jemalloc"]', 'use = ["glibc", "jemalloc"]\ncustom = [{ name = "jemalloc-aa", library = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2" }]'), smoke_plus_run("s.toml", 'aa = true\nbaseline = "jemalloc"')),
    C("run-custom-named-like-builtin", "run {s}/s.toml", 2, r"custom allocator 'jemalloc': the name is already used by configs/allocators\.toml", smoke_with("s.toml", 'use = ["glibc", "jemalloc"]', 'use = ["glibc"]\ncustom = [{ name = "jemalloc", library = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2" }]')),
    C("run-custom-named-like-variant", "run {s}/s.toml", 2, r"custom allocator 'glibc-arena1': the name is already used", smoke_with("s.toml", 'use = ["glibc", "jemalloc"]', 'use = ["glibc"]\ncustom = [{ name = "glibc-arena1", library = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2" }]')),
    C("run-custom-twice", "run {s}/s.toml", 2, r"custom allocator 'mine' is defined twice", smoke_with("s.toml", 'use = ["glibc", "jemalloc"]', 'use = ["glibc"]\ncustom = [{ name = "mine", library = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2" }, { name = "mine", library = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2" }]')),
    C("run-custom-named-all", "run {s}/s.toml", 2, r"custom allocator 'all': name must be", smoke_with("s.toml", 'use = ["glibc", "jemalloc"]', 'use = ["glibc"]\ncustom = [{ name = "all", library = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2" }]')),
    C("run-shard-1-of-2-one-round", "run {SMOKE} --shard 1/2", 2, r"--shard 1/2: 2 shards need at least 2 rounds .* has 1 \(run\.repeat\)"),
    C("run-shard-2-of-2-one-round", "run {SMOKE} --shard 2/2", 2, r"--shard 2/2: 2 shards need at least 2 rounds"),
    C("run-shard-1-of-3-two-rounds", "run {SMOKE} --shard 1/3 --repeat 2", 2, r"--shard 1/3: 3 shards need at least 3 rounds .* has 2"),
    C("run-shard-zero", "run {SMOKE} --shard 0/2", 2, r"--shard 0/2: K must be between 1 and 2"),
    C("run-shard-k-above-n", "run {SMOKE} --shard 3/2 --repeat 3", 2, r"--shard 3/2: K must be between 1 and 2"),
    C("run-shard-text", "run {SMOKE} --shard a/b", 2, r"--shard a/b: expected K/N"),
    C("run-shard-with-resume", "run {SMOKE} --shard 1/2 --resume {F3}", 2, r"--shard 1/2 with --resume"),
    C("run-shard-with-budget", "run {SMOKE} --shard 1/2 --repeat 2 --budget 1h", 2, r"--shard 1/2 with a time budget"),
    C("run-scenarios-unknown", "run {FRAG} --scenarios dumps --soak 1h", 2, r"--scenarios dumps: fragmentation\.scenarios: unknown scenario 'dumps' \(did you mean 'dump'\?\)"),
    C("run-scenarios-on-sysbench", "run {SMOKE} --scenarios dump", 2, r"--scenarios does not apply to sysbench suites"),
    C("run-soak-apart-too-short", "run {FRAG} --soak 3m", 2, r"--soak / \[fragmentation\] soak: 180 s apart over 5 scenarios leaves each less than 60 s .*soak at least 5m, or soak_scenarios = \"together\""),
    C("run-server-empty", ["run", "{SMOKE}", "--server", ""], 2, r"--server '': an empty value"),
    C("run-server-blank", ["run", "{SMOKE}", "--server=  "], 2, r"--server '  ': an empty value"),
    C("run-server-fetched-empty", "run {SMOKE} --server fetched:", 2, r"--server 'fetched:': no SPEC after 'fetched:'"),
    C("run-server-fetched-blank", ["run", "{SMOKE}", "--server", "fetched: "], 2, r"--server 'fetched: ': no SPEC after 'fetched:'"),
    C("run-server-root-empty", ["run", "{SMOKE}", "--server-root", ""], 2, r"--server-root '': an empty value"),
    C("run-client-host-empty", ["run", "{SMOKE}", "--client-host", ""], 2, r"--client-host '': an empty value"),
    C("run-baseline-empty", ["run", "{SMOKE}", "--baseline", ""], 2, r"--baseline '': an empty value"),
    C("run-out-empty", ["run", "{SMOKE}", "--out", ""], 2, r"--out '': an empty value"),
    C("run-budget-tiny", "run {SMOKE} --budget 0.001s --out {s}/runs", 2, r"--budget / run\.budget_s 0\.001 s: shorter than one round of this suite \(every allocator and THP mode once: about \d+s by the estimate\).*give at least --budget \d+s", needs="mariadbd"),
    C("run-budget-zero", "run {SMOKE} --budget 0m", 2, r"--budget 0m: expected a positive, finite duration"),
    C("run-budget-negative", "run {SMOKE} --budget=-5m", 2, r"--budget -5m: expected a positive, finite duration"),
    C("run-budget-infinite", "run {SMOKE} --budget 1e999h", 2, r"--budget 1e999h: expected a positive, finite duration"),
    C("run-budget-text", "run {SMOKE} --budget soon", 2, r"--budget soon: expected a duration like 20m"),
    C("run-out-newline", ["run", "{SMOKE}", "--out", "{s}/a\nb"], 2, r"--out '.*a\\nb': holds a control character \(newline\)"),
    C("run-out-escape", ["run", "{SMOKE}", "--out={s}/a\x1bb"], 2, r"--out '.*a\\x1bb': holds a control character \(\\x1b\)"),
    C("run-suite-newline", ["run", "{s}/a\nb.toml"], 2, r"'.*a\\nb\.toml': holds a control character \(newline\)"),
    C("run-server-tab", ["run", "{SMOKE}", "--server", "/usr/sbin/mariadbd\t"], 2, r"--server '/usr/sbin/mariadbd\\t': holds a control character \(tab\)"),
    C("run-file-out-newline", "run {s}/s.toml", 2, r"s\.toml.*run\.out.*holds a control character \(newline\)", smoke_plus("s.toml", '[run]\nout = "runs\\nx"\n')),
    C("run-file-server-binary-newline", "run {s}/s.toml", 2, r"s\.toml.*server\.binary.*holds a control character \(newline\)", smoke_with("s.toml", "[server]", '[server]\nbinary = "/usr/sbin/maria\\ndbd"')),
    C("run-repeat-zero", "run {SMOKE} --repeat 0", 2, r"--repeat 0: expected a positive number of rounds"),
    C("run-repeat-negative", "run {SMOKE} --repeat -2", 2, r"--repeat -2: expected a positive number of rounds"),
    C("run-repeat-text", "run {SMOKE} --repeat two", 2, r"argument --repeat: expected a whole number in ASCII digits \(0-9\), got 'two'"),
    C("run-allocators-empty-item", "run {SMOKE} --allocators glibc,,jemalloc", 2, r"--allocators.*'glibc,,jemalloc' has an empty item"),
    C("run-allocators-only-commas", "run {SMOKE} --allocators ,", 2, r"--allocators.*expected a comma-separated list"),
    C("run-allocators-unknown", "run {SMOKE} --allocators glibc,jemaloc", 2, r"unknown allocator 'jemaloc' \(did you mean 'jemalloc'\?\)"),
    C("run-allocators-twice", "run {SMOKE} --allocators glibc,glibc", 2, r"duplicate allocator names"),
    C("run-threads-empty-item", "run {SMOKE} --threads 8,,64", 2, r"--threads.*'8,,64' has an empty item"),
    C("run-threads-text", "run {SMOKE} --threads 8,many", 2, r"--threads.*expected whole numbers in ASCII digits \(0-9\), got '8,many'"),
    C("run-threads-zero", "run {SMOKE} --threads 0", 2, r"--threads 0: sysbench\.threads"),
    C("run-thp-trailing-comma", "run {SMOKE} --thp never,", 2, r"--thp.*'never,' has an empty item"),
    C("run-thp-unknown", "run {SMOKE} --thp sometimes", 2, r"--thp sometimes: thp\.modes"),
    # hugepage settings this machine cannot make (issue 28): refused before anything changes
    C("run-thp-ptes-beyond-kernel", "run {s}/s.toml --out {s}/runs", 2, r"thp\.max_ptes_none 600: this kernel takes 0\.\.511 \(\S+/khugepaged/max_ptes_none", smoke_plus("s.toml", '[thp]\nmodes = ["always"]\nmax_ptes_none = [600]\n'), needs="mariadbd"),
    C("run-large-pages-too-few-free", "run {s}/s.toml --out {s}/runs", 2, r"thp\.large_pages: the buffer pool needs \d+ huge pages of 2048 kB \([\d,]+ MB\) free; HugePages_Free is \d+: reserve them", smoke_with("s.toml", "buffer_pool_mb = 64", "buffer_pool_mb = 65536\n[thp]\nlarge_pages = [true]\nlarge_pages_reserve = false"), needs="mariadbd"),
    C("run-large-pages-too-little-memory", "run {s}/s.toml --out {s}/runs", 2, r"thp\.large_pages: the buffer pool needs \d+ huge pages of 2048 kB \([\d,]+ MB\); MemAvailable is only [\d,]+ MB", smoke_with("s.toml", "buffer_pool_mb = 64", "buffer_pool_mb = 4000000\n[thp]\nlarge_pages = [false, true]"), needs="mariadbd"),
    C("run-large-pages-family-cannot", "run {s}/s.toml", 2, r"s\.toml:6: thp\.large_pages: mongodb: mongod has no setting that puts its WiredTiger cache on explicit huge pages", put("s.toml", '[suite]\nkind = "iibench"\n[server]\nflavor = "mongodb"\n[thp]\nlarge_pages = [false, true]\n')),
    C("run-engines-empty-item", "run {SMOKE} --engines innodb,,rocksdb", 2, r"--engines.*has an empty item"),
    C("run-warmup-negative", "run {SMOKE} --warmup -1", 2, r"^(?!.*(min_s|cap_s)).*--warmup -1"),
    C("run-duration-nan", "run {SMOKE} --duration nan", 2, r"--duration nan: sysbench\.duration_s"),
    C("run-duration-zero", "run {SMOKE} --duration 0", 2, r"--duration 0(\.0)?: sysbench\.duration_s"),
    C("run-min-effect-zero", "run {SMOKE} --min-effect 0", 2, r"--min-effect 0(\.0)?: run\.min_effect_pct"),
    C("run-min-effect-100", "run {SMOKE} --min-effect 100", 2, r"--min-effect 100(\.0)?: run\.min_effect_pct"),
    C("run-unknown-option", "run {SMOKE} --allocatorz glibc", 2, r"unrecognized arguments: --allocatorz glibc"),
    C("run-no-suite", "run", 2, r"the following arguments are required: SUITE\.toml"),
    # -- run: the suite file ---------------------------------------------------------------------
    C("run-suite-missing", "run {s}/nope.toml", 2, r"nope\.toml: no such suite file"),
    C("run-suite-symlink-loop", "run {s}/loop.toml", 2, r"loop\.toml: a symbolic link loop", link("loop.toml", "loop2.toml"), link("loop2.toml", "loop.toml")),
    C("run-suite-self-link", "run {s}/self.toml", 2, r"self\.toml: a symbolic link loop", link("self.toml", "self.toml")),
    C("run-suite-dangling-link", "run {s}/dang.toml", 2, r"dang\.toml: a symbolic link to \S*gone\.toml, which does not exist", link("dang.toml", "gone.toml")),
    C("run-suite-under-a-file", "run {s}/f/s.toml", 2, r"f/s\.toml: not reachable: a part of the path before it is a file", put("f", "")),
    C("run-suite-a-directory", "run {s}/d", 2, r"/d: not a file", put("d/x", "")),
    C("run-suite-binary", "run {s}/s.toml", 2, r"s\.toml: not UTF-8 text", put("s.toml", b"\xff\xfe\x00\x81")),
    C("run-suite-empty", "run {s}/s.toml", 2, r"s\.toml: empty suite file", put("s.toml", "")),
    C("run-suite-comment-only", "run {s}/s.toml", 2, r"s\.toml: empty suite file", put("s.toml", "# nothing\n\n")),
    C("run-suite-no-workload", "run {s}/s.toml", 2, r"s\.toml: no \[sysbench\] section", put("s.toml", '[suite]\nname = "x"\n')),
    C("run-suite-kind-without-section", "run {s}/s.toml", 2, r"s\.toml: no \[iibench\] section", put("s.toml", '[suite]\nname = "x"\nkind = "iibench"\n[sysbench]\nthreads = [8]\n')),
    # -- the fragmentation scenarios (issue 25) ------------------------------------------------
    C("frag-unknown-scenario", "run {s}/s.toml", 2, r"fragmentation\.scenarios.*unknown scenario 'dumps'.*did you mean 'dump'", put("s.toml", "[suite]\nname = \"x\"\nkind = \"fragmentation\"\n[fragmentation]\nscenarios = [\"dumps\"]\n")),
    C("frag-fulltext-on-myrocks", "run {s}/s.toml", 2, r"fragmentation\.scenarios.*fulltext scenario needs InnoDB's FULLTEXT index; rocksdb", put("s.toml", "[suite]\nname = \"x\"\nkind = \"fragmentation\"\n[server]\nengines = [\"innodb\", \"rocksdb\"]\n[fragmentation]\nscenarios = [\"fulltext\"]\n")),
    C("frag-on-mongodb", "run {s}/s.toml", 2, r"suite\.kind.*fragmentation scenarios run on MySQL-family servers", put("s.toml", "[suite]\nname = \"x\"\nkind = \"fragmentation\"\n[server]\nflavor = \"mongodb\"\n")),
    C("frag-tables-fit-the-caches", "run {s}/s.toml", 2, r"table_cache\.tables.*300 tables fit in the caches", put("s.toml", "[suite]\nname = \"x\"\nkind = \"fragmentation\"\n[table_cache]\ntables = 300\n")),
    C("frag-dump-output-option", "run {s}/s.toml", 2, r"dump\.options.*--result-file is set by mallocsweep", put("s.toml", "[suite]\nname = \"x\"\nkind = \"fragmentation\"\n[dump]\noptions = [\"--result-file=/tmp/x\"]\n")),
    C("frag-cycles-one", "run {s}/s.toml", 2, r"fragmentation\.cycles", put("s.toml", "[suite]\nname = \"x\"\nkind = \"fragmentation\"\n[fragmentation]\ncycles = 1\n")),
    C("frag-session-cache-twice", "run {s}/s.toml", 2, r"session_churn\.thread_cache_sizes.*different sizes", put("s.toml", "[suite]\nname = \"x\"\nkind = \"fragmentation\"\n[session_churn]\nthread_cache_sizes = [4, 4]\n")),
    C("run-suite-not-toml", "run {s}/s.toml", 2, r"s\.toml.*(line 1|TOML)", put("s.toml", "this is = = not toml\n")),
    C("run-suite-empty-allocator-name", "run {s}/s.toml", 2, r"s\.toml.*empty allocator name", smoke_with("s.toml", "use = [", 'use = ["", ')),
    C("run-suite-unknown-key", "run {s}/s.toml", 2, r"s\.toml.*thredas.*did you mean 'threads'", smoke_with("s.toml", "threads =", "thredas =")),
    # -- several servers in one run (an upgrade check) ---------------------------------------------
    C("run-servers-baseline-not-listed", "run {SMOKE} --servers a=host,b=host --baseline-server c", 2, r"--baseline-server c: server\.baseline_server: not one of the servers \(a, b\)"),
    C("run-servers-same-name", "run {SMOKE} --servers a=host,a=fetched:mariadb-10.11.18", 2, r"--servers a=host,a=fetched:mariadb-10\.11\.18: server\.servers: two servers are named 'a'"),
    C("run-servers-entry-unnamed", "run {SMOKE} --servers host,new=host", 2, r"server\.servers: entry 1 \(host\) has no name; with several servers each needs one"),
    C("run-servers-name-empty", "run {SMOKE} --servers =host,b=host", 2, r"--servers: '=host' has no name before '='"),
    C("run-servers-spec-empty", "run {SMOKE} --servers a=host,b=", 2, r"--servers: server 'b': an empty server spec"),
    C("run-servers-fetched-empty", "run {SMOKE} --servers a=host,b=fetched:", 2, r"--servers: server 'b': 'fetched:': nothing after 'fetched:'"),
    C("run-servers-trailing-comma", "run {SMOKE} --servers a=host,", 2, r"--servers 'a=host,' has an empty item"),
    C("run-servers-with-server", "run {SMOKE} --server mariadbd --servers a=host,b=host", 2, r"--server mariadbd with --servers: give one server \(--server\) or several"),
    C("run-servers-bad-name", "run {SMOKE} --servers 'a b=host,c=host'", 2, r"server name 'a b': expected 1-32 letters"),
    C("run-servers-binary-missing", "run {SMOKE} --servers a=host,b={s}/nope/mariadbd", 2, r"server\.servers\[1\]\.binary: no such file: \S+nope/mariadbd"),
    C("run-servers-file-baseline-not-listed", "run {s}/s.toml", 2, r"s\.toml:\d+: server\.baseline_server: not one of the servers \(old, new\) \(got \"newer\"\)", smoke_with("s.toml", "buffer_pool_mb = 64", 'buffer_pool_mb = 64\nservers = { old = "host", new = "host" }\nbaseline_server = "newer"')),
    C("run-servers-file-same-name", "run {s}/s.toml", 2, r"s\.toml:\d+: server\.servers: two servers are named 'a'", smoke_with("s.toml", "buffer_pool_mb = 64", 'buffer_pool_mb = 64\nservers = ["a=host", "a=/usr/sbin/mariadbd"]')),
    C("run-servers-file-unnamed", "run {s}/s.toml", 2, r"s\.toml:\d+: server\.servers: entry 2 \(/usr/sbin/mariadbd\) has no name", smoke_with("s.toml", "buffer_pool_mb = 64", 'buffer_pool_mb = 64\nservers = ["a=host", "/usr/sbin/mariadbd"]')),
    C("run-servers-file-other-family", "run {s}/s.toml", 2, r"s\.toml:\d+: server\.servers\.b: server 'b' is MongoDB .*: sysbench cannot drive MongoDB .*: set suite\.kind = \"iibench\"", smoke_with("s.toml", "buffer_pool_mb = 64", 'servers = { a = "host", b = { flavor = "mongodb", binary = "/bin/true" } }')),
    C("run-servers-file-and-binary", "run {s}/s.toml", 2, r"s\.toml:\d+: server\.binary: with server\.servers, each server says where it comes from", smoke_with("s.toml", "buffer_pool_mb = 64", 'buffer_pool_mb = 64\nbinary = "/usr/sbin/mariadbd"\nservers = { a = "host", b = "host" }')),
    C("run-servers-file-baseline-alone", "run {s}/s.toml", 2, r"s\.toml:\d+: server\.baseline_server: names a server of server\.servers, which lists none", smoke_with("s.toml", "buffer_pool_mb = 64", 'buffer_pool_mb = 64\nbaseline_server = "old"')),
    C("run-servers-file-not-a-spec", "run {s}/s.toml", 2, r"s\.toml:\d+: server\.servers: entry 1: expected \"NAME=SPEC\" or a table, got int", smoke_with("s.toml", "buffer_pool_mb = 64", 'buffer_pool_mb = 64\nservers = [1, 2]')),
    C("run-servers-file-unknown-key", "run {s}/s.toml", 2, r"s\.toml:\d+: unknown setting server\.servers\[0\]\.fetch \(did you mean 'fetched'\?\)", smoke_with("s.toml", "buffer_pool_mb = 64", 'buffer_pool_mb = 64\nservers = [{ name = "a", fetch = "mariadb-10.11.18" }, { name = "b" }]')),
    # -- run --resume: the suite and options first, then the run's shape --------------------------
    C("resume-finished-suite-missing", "run {s}/nope.toml --resume {F3}", 2, r"nope\.toml: no such suite file"),
    C("resume-finished-bad-option", "run {SMOKE} --resume {F3} --threads 0", 2, r"--threads 0: sysbench\.threads"),
    C("resume-finished-bad-baseline", "run {SMOKE} --resume {F3} --baseline all", 2, r"--baseline all: run\.baseline: 'all' is every allocator"),
    C("resume-finished-bad-suite", "run {s}/s.toml --resume {F3}", 2, r"s\.toml: empty suite file", put("s.toml", "")),
    C("resume-missing-dir", "run {SMOKE} --resume {s}/nope", 2, r"--resume \S+nope: does not exist"),
    C("resume-not-a-run", "run {SMOKE} --resume {s}/d", 2, r"--resume \S+/d: not a mallocsweep run directory", put("d/x", "")),
    C("resume-manifest-list", "run {SMOKE} --resume {F3}", 2, r"--resume \S+manifest\.json: " + NOT_RUN + r" manifest \(a JSON list", put("F3/manifest.json", "[]")),
    C("resume-manifest-null", "run {SMOKE} --resume {F3}", 2, NOT_RUN + r" manifest \(a JSON null", put("F3/manifest.json", "null")),
    C("resume-manifest-no-cells", "run {SMOKE} --resume {F3}", 2, NOT_RUN + r" manifest \(no cells", manifest("F3", lambda m: m.pop("cells"))),
    C("resume-manifest-cells-text", "run {SMOKE} --resume {F3}", 2, NOT_RUN + r" manifest \(cells is a JSON string", manifest("F3", lambda m: m.update(cells="all"))),
    C("resume-manifest-garbage", "run {SMOKE} --resume {F3}", 2, r"manifest\.json: not valid JSON", put("F3/manifest.json", "{{{")),
    C("resume-record-garbage", "run {SMOKE} --resume {F3}", 2, rf"--resume \S+: incomplete run: cells/{F3C0}\.json is not a valid cell record", put(f"F3/cells/{F3C0}.json", "x")),
    C("resume-cells-gone", "run {SMOKE} --resume {F3}", 2, r"--resume \S+: incomplete run: cells/ is missing", rm("F3/cells")),
    C("resume-record-missing", "run {SMOKE} --resume {F3}", 2, rf"--resume \S+: incomplete run: cells/{F3C1}\.json is missing", rm(f"F3/cells/{F3C1}.json")),
    C("resume-format-1-manifest-list", "run {SMOKE} --resume {F1}", 2, NOT_RUN + r" manifest \(a JSON list", put("F1/manifest.json", "[]")),
    # -- servers, the version, stdout that cannot be written ------------------------------------
    C("servers-list-state-is-a-file", "servers list", 2, r"state: not a directory; the fetched servers are kept in \S+state/servers \(MALLOCSWEEP_STATE\)", put("state", "")),
    C("servers-list-json-state-is-a-file", "servers list --json", 2, r"state: not a directory", put("state", "")),
    C("servers-list-servers-dir-is-a-file", "servers list", 2, r"srv: not a directory; .*\(MALLOCSWEEP_SERVERS\)", put("srv", ""), env={"MALLOCSWEEP_SERVERS": "{s}/srv"}),
    C("servers-list-state-under-a-file", "servers list", 2, r"f: not a directory", put("f", ""), env={"MALLOCSWEEP_STATE": "{s}/f/state"}),
    C("servers-list-servers-dangling", "servers list", 2, r"srv: a broken symbolic link", link("srv", "gone"), env={"MALLOCSWEEP_SERVERS": "{s}/srv"}),
    C("servers-fetch-empty", ["servers", "fetch", ""], 2, r"argument '': an empty value"),
    C("servers-fetch-bad-spec", "servers fetch nonsense", 2, r"nonsense"),
    C("allocators-stdout-full", "allocators", 2, r"stdout: cannot write the output \(No space left on device\)", stdout="full"),
    C("allocators-json-stdout-full", "allocators --json", 2, r"stdout: cannot write the output", stdout="full"),
    C("servers-list-stdout-full", "servers list --json", 2, r"stdout: cannot write the output", stdout="full"),
    C("version-stdout-full", "--version", 2, r"stdout: cannot write the output", stdout="full"),
    C("help-stdout-full", "--help", 2, r"stdout: cannot write the output", stdout="full"),
    C("report-stdout-full", "report {F1}", 2, r"stdout: cannot write the output", out=REPORT_FILES_F1, stdout="full"),
    C("no-command", "", 2, r"the following arguments are required: COMMAND"),
    C("unknown-command", "frobnicate", 2, r"invalid choice: 'frobnicate'"),
]
# fmt: on


# -- running a case ---------------------------------------------------------------------------
def _fill(text: str, s: Path) -> str:
    out = text.replace("{s}", str(s)).replace("{SMOKE}", str(SMOKE)).replace("{FRAG}", str(FRAG))
    for short in RUNS:
        out = out.replace("{" + short + "}", str(s / short))
    return out


def _argv(case: C, s: Path) -> list[str]:
    parts = shlex.split(case.argv) if isinstance(case.argv, str) else list(case.argv)
    return [_fill(p, s) for p in parts]


def _needed_runs(case: C) -> set[str]:
    """The recorded runs a case uses: named in its command line or its damage's paths."""
    text = case.argv if isinstance(case.argv, str) else " ".join(case.argv)
    names = {m for m in re.findall(r"\{(\w+)\}", text) if m in RUNS}
    for d in case.damage:
        for cell in d.__closure__ or ():
            v = cell.cell_contents
            if isinstance(v, str):
                head = v.split("/", 1)[0]
                if head in RUNS:
                    names.add(head)
    if any(getattr(d, "__qualname__", "").startswith("shards") for d in case.damage):
        names.add("F3")
    return names


def _snapshot(root: Path) -> dict[str, str]:
    """Every path under root: files by checksum, links by target, directories as such."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            rel = str(p.relative_to(root))
            if p.is_symlink():
                out[rel] = "link:" + os.readlink(p)
            elif p.is_dir():
                out[rel] = "dir"
            elif not p.is_file():  # a FIFO or device a case put there: reading it would block
                out[rel] = "special"
            else:
                try:
                    out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
                except OSError as e:  # e.g. a full tmpfs's filler we cannot read: its size
                    out[rel] = f"unreadable:{e.errno}"
    return out


# What the commands import when they run: imported once here, so each forked child starts with
# them (as a long-lived process would), instead of paying for them case after case.
PRELOAD = (
    "analysis.compare",
    "analysis.compare_output",
    "analysis.report",
    "rundir.rederive",
    "servers.allocators",
    "servers.acquire.fetch",
    "suites.suite.model",
    "suites.suite.overrides",
    "suites.runner.merge",
    "suites.runner.resume",
    "suites.runner.matrix",
)


def run_forked(argv: list[str], cwd: Path, env: dict, stdout: str = "pipe", timeout=120):
    """(exit code, stdout, stderr) of `mallocsweep ARGV` in a forked child: a process of its own
    with its own fds 1 and 2 (stdout "pipe": a file we read; "full": /dev/full) and environment,
    starting from the CLI this process already imported."""
    import importlib

    from suites.cli import main as cli

    for name in PRELOAD:
        importlib.import_module(name)

    out_f, err_f = tempfile.TemporaryFile(), tempfile.TemporaryFile()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 99
        try:
            os.chdir(cwd)
            os.environ.clear()
            os.environ.update(env)
            target = os.open("/dev/full", os.O_WRONLY) if stdout == "full" else out_f.fileno()
            os.dup2(target, 1)
            os.dup2(err_f.fileno(), 2)
            sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115 - the child's own stdout
            sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
            signal.signal(signal.SIGINT, signal.default_int_handler)
            _stop_before_a_run_directory()
            try:
                code = cli.main(argv)
            except SystemExit as e:  # an older cli.main let argparse exit
                code = e.code if isinstance(e.code, int) else 2
            try:
                sys.stdout.flush()
            except OSError:
                pass
            sys.stderr.flush()
        except BaseException:  # noqa: BLE001 - a crash is a result too: its traceback on stderr
            import traceback

            try:
                os.write(2, traceback.format_exc().encode())
            except OSError:
                pass
        finally:
            os._exit(code if isinstance(code, int) else 99)
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise AssertionError(f"mallocsweep {argv} did not finish in {timeout} s")
        time.sleep(0.01)
    out_f.seek(0)
    err_f.seek(0)
    code = os.waitstatus_to_exitcode(status)
    return code, out_f.read().decode(errors="replace"), err_f.read().decode(errors="replace")


WENT_ON = 97  # the exit code of a case that went on to create or reopen a run directory


def _stop_before_a_run_directory() -> None:
    """In the child: a command that goes as far as creating (or reopening) a run directory has
    accepted its input; it is stopped there, before any server starts, with exit code WENT_ON
    (run on main's code, the corpus counts such a case as falling short in seconds, instead of
    running the matrix it should have refused)."""
    from rundir.write import RunDir
    from suites.runner import matrix as runner

    def went_on(*args, **kwargs):
        os.write(2, b"corpus: the command went on to create or reopen a run directory\n")
        raise SystemExit(WENT_ON)

    runner.Matrix._create_run_dir = went_on
    RunDir.open_existing = classmethod(went_on)


def _env(s: Path, case: C) -> dict:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("MALLOCSWEEP_") and k != "XDG_STATE_HOME"
    }
    env.update(
        MALLOCSWEEP_STATE=str(s / "state"),
        MALLOCSWEEP_CACHE=str(s / "cache"),
        XDG_STATE_HOME=str(s / "xdg-state"),
        COLUMNS="160",
    )
    env.update({k: _fill(v, s) for k, v in case.env.items()})
    return env


def _undo(s: Path) -> None:
    """What a case made that pytest cannot remove: a tmpfs, an immutable directory."""
    mounts = Path("/proc/self/mounts").read_text()
    for line in mounts.splitlines():
        where = line.split()[1]
        if where.startswith(str(s) + "/"):
            subprocess.run(["umount", "-l", where], check=False)
    if os.geteuid() == 0 and shutil.which("chattr"):
        for d in s.rglob("*"):
            if d.is_dir() and not d.is_symlink():
                subprocess.run(["chattr", "-i", str(d)], check=False, capture_output=True)
    else:
        for d in s.rglob("*"):
            if d.is_dir() and not d.is_symlink():
                d.chmod(0o755)


def _skip_unless(needs: str | None) -> None:
    if needs == "root" and os.geteuid() != 0:
        pytest.skip("needs root (mounts a tiny tmpfs)")
    if needs == "mariadbd" and not Path("/usr/sbin/mariadbd").exists():
        pytest.skip("reaches the runner, which resolves Debian's MariaDB (mariadb-server)")


def _prepare(case: C, s: Path) -> None:
    s.mkdir()
    for short in sorted(_needed_runs(case)):
        shutil.copytree(FIXTURES / RUNS[short], s / short, symlinks=True)
    for damage in case.damage:
        damage(s)


def check_case(case: C, s: Path) -> None:
    """Run one case in sandbox `s` and assert everything the module doc promises."""
    _skip_unless(case.needs)
    try:
        _prepare(case, s)
        before = _snapshot(s)
        code, out, err = run_forked(_argv(case, s), s, _env(s, case), case.stdout)
        after = _snapshot(s)
    finally:
        _undo(s)
    lines = err.strip().splitlines()
    shown = f"exit {code}, stderr:\n{err}"
    assert "Traceback" not in err and "internal error" not in err, shown
    assert code == case.code, shown
    if case.lines is not None:
        assert len(lines) == case.lines, shown
    first = lines[:1] if case.lines is not None else lines  # lines=None: any line may say it
    if case.pattern is not None:
        assert any(re.search(case.pattern, x) for x in first), f"{case.pattern!r} not in: {shown}"
    if case.says is not None:
        assert re.search(case.says, out), f"{case.says!r} not on stdout: {out}\n{shown}"
    changed = sorted(k for k in before if before[k] != after.get(k))
    allowed = [*(_fill(o, s) for o in case.out), *CACHES]
    new = sorted(k for k in after if k not in before and not any(Path(k).match(o) for o in allowed))
    # a directory an allowed output needed is allowed too
    new = [
        k for k in new if not (after[k] == "dir" and any(o.startswith(k + "/") for o in allowed))
    ]
    assert changed == [] and new == [], f"changed {changed}, new {new}; {shown}"


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input(case, tmp_path):
    check_case(case, tmp_path / "s")


def test_case_ids_are_unique():
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids)), [i for i in ids if ids.count(i) > 1]


@pytest.mark.parametrize(
    "case_id",
    ["report-f1-qps-dropped", "compare-same-dir", "run-baseline-all", "allocators-stdout-full"],
)
def test_forked_and_real_processes_agree(case_id, tmp_path):
    """The corpus's forked child gives what a real `python -m suites.cli.main` process gives."""
    case = next(c for c in CASES if c.id == case_id)
    s = tmp_path / "s"
    _prepare(case, s)
    argv, env = _argv(case, s), _env(s, case)
    forked = run_forked(argv, s, env, case.stdout)
    with open(os.devnull if case.stdout == "pipe" else "/dev/full", "w") as sink:
        done = subprocess.run(
            [sys.executable, "-m", "suites.cli.main", *argv],
            cwd=s,
            env={**env, "PYTHONPATH": str(REPO)},
            stdout=sink if case.stdout == "full" else subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            timeout=300,
        )
    assert (done.returncode, done.stderr.strip()) == (forked[0], forked[2].strip())


def test_merge_of_the_corpus_shards_works(tmp_path):
    """The shards the merge cases damage are mergeable as made: the refusals are the damage's."""
    s = tmp_path / "s"
    s.mkdir()
    shards()(s)
    code, out, err = run_forked(["merge", str(s / "S1"), str(s / "S2"), "--out", str(s / "m")], s,
                                _env(s, C("x", "", 0, "")))  # fmt: skip
    assert code == 0, err
    assert "merged 2 shards" in out
    assert sorted(p.name for p in (s / "m" / "raw").iterdir()) == [f"{c}.json" for c in F3_CELLS]


def test_an_earlier_error_in_this_process_does_not_hide_lost_output(tmp_path, capsys):
    """main() keeps nothing between calls: an error said by an earlier call in the same process
    (tests call main() in-process; the corpus forks from such a process) must not silence a later
    call's "stdout: cannot write the output" line. It once did (a module-level flag): a compare
    that judged nothing (exit 2) to /dev/full said nothing at all after another test's refused
    compare."""
    from suites.cli import main as cli

    assert cli.main(["report", str(tmp_path / "nope")]) == 2
    assert "nope: does not exist" in capsys.readouterr().err
    (case,) = [c for c in CASES if c.id == "compare-stdout-full"]
    check_case(case, tmp_path / "s")
