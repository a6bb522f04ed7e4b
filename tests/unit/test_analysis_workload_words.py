"""The reader's words for recorded workloads are declared once (analysis/workload_words.py):
tables, plots and the report ask for them instead of branching on workload names."""

from pathlib import Path

from analysis.point_tables import metric_label
from analysis.workload_words import GENERIC, WORDS, words
from tests.unit.branch_census import census

REPO = Path(__file__).resolve().parents[2]


def test_analysis_branches_on_no_workload_name():
    found = {
        f"{path}:{line}": kind
        for path, lines in census(REPO, roots=("analysis",)).items()
        for line, kind in lines.items()
        if kind == "workload"
    }
    assert found == {}


def test_an_insert_load_counts_rows_and_an_unknown_workload_gets_generic_words():
    assert metric_label("iibench", "qps") == "rows inserted/s"
    assert metric_label("rww_load", "tps") == "insert batches/s"
    assert metric_label("rww_run", "tps") == "writes/s"
    assert metric_label("point_select", "qps") == "queries/s"
    assert words("iibench").ops == "rows" and words("iibench").insert_table
    assert words("some_new_workload") is GENERIC
    assert metric_label("some_new_workload", "qps") == "queries/s"
    assert all(w.description for w in WORDS.values())  # the report describes every known one
