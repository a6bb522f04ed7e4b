"""The record schema (rundir/schema.py) is the one declaration of every recorded figure: the
format's column lists, the raw records' typed parts, LevelResult's figures and the reader's words
are derived from it. Finished runs are read against format 6's lists, so the derived lists must
equal them as they were written out by hand (tests/unit/format6_frozen.py)."""

from dataclasses import fields
from pathlib import Path

import pytest

import rundir.format as F
from analysis.point_tables import METRIC_LABELS, metric_label
from rundir import schema
from rundir.read import load_run
from rundir.records import ChurnLevel, ClientLoad, RawLevel, RawReport, RwwFigures
from suites.workloads.level_result import RECORDS, LevelResult
from tests.unit import format6_frozen as frozen

REPO = Path(__file__).resolve().parents[2]
LISTS = [n for n in dir(frozen) if n.isupper() and n != "RESULTS_COLUMNS_BY_VERSION"]


# Format 6 is not released yet: it may still gain a group of columns at its end (a new record with
# added_in=6, last in RESULT_RECORDS), never lose, rename or reorder one of these.
GROWS = {"RESULTS_COLUMNS", "FORMAT6_ADDED_COLUMNS", "TEXT_COLUMNS"}


@pytest.mark.parametrize("name", LISTS)
def test_every_derived_column_list_equals_format_6_as_written_by_hand(name):
    got, want = getattr(F, name), getattr(frozen, name)
    if isinstance(got, frozenset):
        got = sorted(got)
        assert set(want) <= set(got) if name in GROWS else got == list(want)
    elif name in GROWS:
        assert tuple(got)[: len(want)] == want  # names and order; later columns only after them
    else:
        assert tuple(got) == want  # names and order


def test_each_older_format_reads_the_same_columns_as_before():
    for version, cols in frozen.RESULTS_COLUMNS_BY_VERSION.items():
        got = tuple(F.results_columns(version))
        assert got[: len(cols)] == cols if version == 6 else got == cols


def test_every_results_and_timeline_column_is_declared_once_with_unit_type_and_words():
    figs = schema.result_figures()
    assert list(figs) == list(dict.fromkeys(F.RESULTS_COLUMNS)) or set(figs) == set(
        F.RESULTS_COLUMNS
    )
    assert len(F.RESULTS_COLUMNS) == len(set(F.RESULTS_COLUMNS))
    for f in (*figs.values(), *schema.TIMELINE.figures):
        assert f.type in (int, float, str) and f.words, f
        assert f.type is not str or f.unit == "", f  # text has no unit
    # a name two records share is the same figure (one column): same unit and type
    for rec in schema.RESULT_RECORDS:
        for f in rec.figures:
            assert (figs[f.name].unit, figs[f.name].type) == (f.unit, f.type), f


def test_raw_records_are_the_declared_records():
    for model, rec in ((RwwFigures, schema.RWW), (ClientLoad, schema.CLIENT_LOAD),
                       (ChurnLevel, schema.CHURN), (RawReport, schema.RAW_REPORT)):  # fmt: skip
        assert tuple(model.model_fields) == rec.columns()
        for f in rec.figures:
            assert model.model_fields[f.name].is_required() == f.required, f
    # a raw level's typed records add exactly their declared results columns
    level = RawLevel(
        phase="p", workload="rww_run", threads=3, status="ok",
        report={"workload": "rww_run", "threads": 3},
        rww={"figures": {"write_ops_s": 10.0, "table_rows": 5}},
        churn={"churn_cycle": 2},
    )  # fmt: skip
    got = level.result_columns()
    assert set(got) == {*schema.RWW.columns(), *schema.CHURN.columns()}
    assert got["write_ops_s"] == 10.0 and got["churn_cycle"] == 2 and got["reads_min"] is None
    with pytest.raises(ValueError):  # a figure of the wrong type is refused
        RwwFigures(table_rows="many")


def test_a_level_result_carries_the_declared_report_and_records():
    names = {f.name for f in fields(LevelResult)}
    assert set(schema.WORKLOAD_REPORT.columns()) <= names and set(RECORDS) <= names
    assert set(RECORDS) == {
        "sysbench",
        "iibench",
        "rww",
        "churn",
        "client_load",
        "agent",
        "scenario",
    }
    res = LevelResult(workload="oltp_ro", threads=8, duration_s=2.5, events=10, qps=4.0)
    row = res.row()
    assert tuple(row) == schema.RAW_REPORT.columns()
    assert (row["duration_s"], row["events"], row["tps"], row["lat_p99_ms"]) == (2.5, 10, 0.0, None)
    assert RawReport.model_validate(row).duration_s == 2.5
    assert LevelResult.from_json(res.to_json()) == res
    with pytest.raises(TypeError):  # keyword-only: a positional figure cannot land in the wrong one
        LevelResult("oltp_ro", 8)


def test_the_reader_s_words_come_from_the_schema():
    assert METRIC_LABELS["lat_p99_ms"] == "p99 latency (ms)" == schema.words("lat_p99_ms")
    assert METRIC_LABELS["qps"] == "queries/s"
    assert metric_label("oltp_ro", "rss_end_kb") == "RSS at end (kB)"
    assert schema.words("no_such_column") == "no_such_column"


def test_the_columns_glossary_is_current():
    """docs/columns.md is generated: `python -m rundir.schema > docs/columns.md`."""
    assert (REPO / "docs" / "columns.md").read_text(encoding="utf-8") == schema.glossary()


def test_a_finished_run_of_every_older_format_still_reads():
    """Recorded runs of formats 1 to 5 (kept byte for byte) read with the derived lists, every
    row with every current column."""
    runs = sorted((REPO / "tests" / "fixtures" / "runs").glob("real-*"))
    versions = set()
    for run_dir in runs:
        run = load_run(run_dir, allow_incomplete=True)
        versions.add(run.manifest.get("format_version_on_disk"))
        assert run.rows, run_dir
        assert all(set(F.RESULTS_COLUMNS) <= set(r) for r in run.rows), run_dir
    assert {1, 2, 3, 5} <= versions


# Numeric results columns that may take any value: a difference between two readings, a share
# that passes 1 or 0 when RSS grew on, a CPU time older runs recorded negative (a khugepaged
# restarted mid-phase).
UNBOUNDED = {"alloc_held_resident_kb", "burst_returned", "khugepaged_cpu_s"}


def test_every_numeric_results_column_declares_its_range():
    """Admissibility reads each column's range from its declaration (issue 32): a new figure
    gets one with its record, and only the listed ones are left unbounded. (A level's identity,
    its threads and round, is checked against its cell's levels and id instead.)"""
    identity = {*schema.CELL_IDENTITY.columns(), *schema.LEVEL_IDENTITY.columns()}
    loose = {
        name
        for name, fig in schema.result_figures().items()
        if fig.type is not str and name not in identity and schema.figure_range(name) == schema.ANY
    }
    assert loose == UNBOUNDED


def test_ranges_say_what_a_value_outside_is():
    assert schema.THROUGHPUT.problem(0.0) == "is not a throughput (it must be above 0)"
    assert schema.NON_NEGATIVE.problem(-1.0) == "is below 0"
    assert schema.PERCENT.problem(101.0) == "is not a percentage (it must be at most 100)"
    assert schema.RATE.problem(1e300) == "is not a rate (it must be at most 1e+09)"
    assert schema.RATE.problem(5e4) is None and schema.ANY.problem(-1e300) is None


def test_every_ordered_group_is_of_declared_columns_in_column_order():
    order = {name: i for i, name in enumerate(schema.result_figures())}
    for group in schema.ordered_columns():
        assert all(c in order for c in group), group
        assert [order[c] for c in group] == sorted(order[c] for c in group), group
