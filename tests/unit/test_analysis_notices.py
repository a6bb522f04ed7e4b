"""Run-level problems, server warnings and MongoDB's THP advice: from the manifest to the top of
report.html and summary.md."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from fixtures.make_runs import make_run

from analysis import notices
from analysis.report import write_report
from rundir.read import load_run
from tests.unit.test_analysis_report import parse

RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "runs"
RESTORE_ERROR = (
    "THP NOT RESTORED in /sys/kernel/mm/transparent_hugepage: enabled reads back 'always', not"
    " 'madvise'. Original values {'enabled': 'madvise'} kept in /run/x.json; put them back with"
    " `mallocsweep doctor --restore-thp` (as root)"
)


def flat(html: str) -> str:
    return " ".join(" ".join(parse(html).text).split())


def test_a_clean_run_has_no_problems_section(tmp_path):
    path = make_run(tmp_path, "synthetic-clean", seed=1)
    assert notices.run_problems(load_run(path)) == []
    html, md = write_report(path)
    assert 'id="problems"' not in html.read_text()
    assert "Problems with this run" not in md.read_text()


def test_failed_run_with_thp_not_restored_is_said_first(tmp_path):
    path = make_run(
        tmp_path,
        "synthetic-broken",
        seed=2,
        failed_cells=("tcmalloc",),
        manifest_extra={
            "status": "failed",
            "error": "SuiteError: dataset preparation failed: disk full",
            "thp_restore_error": RESTORE_ERROR,
        },
    )
    problems = notices.run_problems(load_run(path))
    assert len(problems) == 2
    assert problems[0].startswith("THP was left changed after this run — THP NOT RESTORED") and (
        "doctor --restore-thp" in problems[0]
    )
    assert "FAILED and stopped early (2 of 3 cells finished)" in problems[1]
    assert "disk full" in problems[1]
    html, md = write_report(path)
    page = parse(html.read_text())
    assert page.tables["problems"] == []  # a list, not a table; the section exists
    text = html.read_text()
    # before everything else: the problems come ahead of "Read this first" and every table
    assert text.index('id="problems"') < text.index('id="warnings"') < text.index('id="glance"')
    assert "disk full" in flat(text) and "THP was left changed" in flat(text)
    # commands in backticks are shown as code, not as raw backticks
    assert "<code>mallocsweep doctor --restore-thp</code>" in text and "`" not in flat(text)
    assert "The run is failed" not in flat(text)  # said once, in the problems
    md_text = md.read_text()
    assert md_text.index("## Problems with this run") < md_text.index("- **run**")
    assert "**The run FAILED" in md_text


def test_interrupted_and_resumed_run(tmp_path):
    path = make_run(
        tmp_path,
        "synthetic-interrupted",
        seed=3,
        manifest_extra={
            "status": "interrupted",
            "interrupted_by": "SIGINT",
            "stale_work_removed": ["mariadb-10.11.19__glibc__thp-system__r1"],
        },
    )
    problems = notices.run_problems(load_run(path))
    assert problems[0].startswith("The run was INTERRUPTED by SIGINT (3 of 3 cells finished)")
    assert f"--resume {path}" in problems[0] and "configs/suites/synthetic.toml" in problems[0]
    assert "removed for 1 cell(s) (mariadb-10.11.19__glibc__thp-system__r1)" in problems[1]
    _, md = write_report(path)
    assert "INTERRUPTED by SIGINT" in md.read_text()


def test_server_warnings_are_deduplicated_with_their_cells(tmp_path):
    path = make_run(
        tmp_path,
        "synthetic-srvwarn",
        seed=4,
        allocators=("glibc", "jemalloc"),
        server_warnings=(
            "MongoDB 7.0.5 advises disabling transparent hugepages, but THP 'always'",
        ),
    )
    m = json.loads((path / "manifest.json").read_text())
    m["cells"][1]["server"]["warnings"].append("only in the second cell")
    (path / "manifest.json").write_text(json.dumps(m))
    run = load_run(path)
    got = notices.server_warnings(run)
    assert got == [
        "Server warning (all 2 cells): MongoDB 7.0.5 advises disabling transparent hugepages,"
        " but THP 'always'",
        f"Server warning (cell {m['cells'][1]['id']}): only in the second cell",
    ]
    html, md = write_report(path)
    for text in (flat(html.read_text()), md.read_text()):
        assert text.count("MongoDB 7.0.5 advises disabling") == 1
        assert "only in the second cell" in text


def test_mongodb_thp_advice_sits_in_the_thp_section(tmp_path):
    path = make_run(
        tmp_path,
        "synthetic-standin-advice",
        seed=5,
        allocators=("glibc",),
        workloads=("iibench",),
        threads=(10,),
        standin=True,
        server_version="7.0.5",
    )
    run = load_run(path)
    assert notices.thp_advice(run) == [
        "MongoDB 7.0.5: disable transparent hugepages (THP 'never')"
        " (cell mongodb-standin-7.0.5__glibc__thp-system__r1)"
    ]
    html, md = write_report(path)
    text = flat(html.read_text())
    section = text[text.index("Transparent hugepages (THP) Transparent hugepages back") :]
    assert "MongoDB's own THP advice for this server version" in section
    assert "disable transparent hugepages (THP 'never')" in section
    md_text = md.read_text()
    assert "## Transparent hugepages" in md_text
    assert "- MongoDB's own THP advice for this server version: MongoDB 7.0.5" in md_text


def test_recorded_runs_without_the_new_keys_still_report(tmp_path):
    for name in ("real-smoke-1", "real-regress-slow", "real-thp-small", "real-smoke-windows"):
        copy = shutil.copytree(RUNS / name, tmp_path / name)
        run = load_run(copy)
        assert notices.run_problems(run) == []
        assert notices.server_warnings(run) == [] and notices.thp_advice(run) == []
        html, md = write_report(copy)
        assert "Problems with this run" not in md.read_text()
        parse(html.read_text())


def test_report_command_repeats_run_problems_on_stderr(tmp_path, capsys):
    from suites.cli.main import main

    path = make_run(
        tmp_path, "synthetic-cli", seed=6, manifest_extra={"thp_restore_error": RESTORE_ERROR}
    )
    assert main(["report", str(path)]) == 0
    out, err = capsys.readouterr()
    assert "report.html" in out
    assert err.startswith("mallocsweep report: WARNING: THP was left changed after this run")
    clean = make_run(tmp_path, "synthetic-cli-clean", seed=7)
    assert main(["report", str(clean)]) == 0
    assert capsys.readouterr().err == ""
