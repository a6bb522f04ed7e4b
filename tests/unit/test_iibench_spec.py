"""iibench settings: bad values stop with the field and the reason, never clamped."""

from datetime import datetime

import pytest

from suites.errors import SuiteError
from suites.workloads.iibench.spec import (
    CASHREGISTER_MAX,
    CUSTOMER_MAX,
    DATA_LENGTH_MAX,
    PRICE_MAX,
    PRODUCT_MAX,
    SECONDARY_INDEXES,
    IIBenchSettingError,
    IIBenchSpec,
    insert_statement_bytes,
)


def test_defaults_are_the_study_shape():
    spec = IIBenchSpec()
    assert spec.clients == 10
    assert spec.secondary_indexes == 3
    assert [name for name, _ in spec.indexes] == [name for name, _ in SECONDARY_INDEXES]


def test_index_column_sets_are_the_three_of_the_description():
    cols = [c for _, c in SECONDARY_INDEXES]
    assert cols == [
        ("price", "customerid"),
        ("cashregisterid", "price", "customerid"),
        ("price", "dateandtime", "customerid"),
    ]


@pytest.mark.parametrize("max_seconds", [0, 5])
def test_max_rows_zero_is_refused_with_or_without_a_time_limit(max_seconds):
    # Issue 6 lists "max rows 0" as bad input: 0 is not a hidden "no limit".
    with pytest.raises(SuiteError, match=r"iibench\.max_rows = 0: .*time-only run"):
        IIBenchSpec(max_rows=0, max_seconds=max_seconds)


def test_a_time_only_run_sets_a_large_max_rows():
    spec = IIBenchSpec(max_rows=10**12, max_seconds=5)
    assert (spec.max_rows, spec.max_seconds) == (10**12, 5)


def test_error_names_the_field_value_and_reason_apart():
    with pytest.raises(IIBenchSettingError) as e:
        IIBenchSpec(data_length=DATA_LENGTH_MAX + 1)
    assert (e.value.field, e.value.value) == ("data_length", DATA_LENGTH_MAX + 1)
    assert "at most" in e.value.reason


def test_data_length_cap_is_inclusive():
    assert IIBenchSpec(data_length=DATA_LENGTH_MAX).data_length == DATA_LENGTH_MAX


@pytest.mark.parametrize("value", [float("inf"), float("nan")])
def test_non_finite_seconds_are_refused(value):
    with pytest.raises(SuiteError, match=r"iibench\.max_seconds = .*finite"):
        IIBenchSpec(max_seconds=value)


@pytest.mark.parametrize("rows, data_length", [(1, 0), (10, 10), (1000, 10), (7, 16000)])
def test_insert_statement_bytes_bounds_the_real_statement(rows, data_length):
    from suites.families.mysql.iibench_backend import insert_sql

    # the widest row the generator can make: largest ids, a price with two decimals, full data
    row = (
        1,
        datetime(2024, 12, 31, 23, 59, 59),
        CASHREGISTER_MAX,
        CUSTOMER_MAX,
        PRODUCT_MAX,
        round(PRICE_MAX - 0.01, 2),
        "x" * data_length,
    )
    actual = len(insert_sql([row] * rows).encode())
    bound = insert_statement_bytes(rows, data_length)
    assert actual <= bound < actual + 128 + 64 * rows


@pytest.mark.parametrize("n", [-1, 4, 10])
def test_index_count_outside_0_to_3_is_refused(n):
    with pytest.raises(SuiteError, match=r"iibench\.secondary_indexes = .*expected 0\.\.3"):
        IIBenchSpec(secondary_indexes=n)


@pytest.mark.parametrize("n", [0, 1, 2, 3])
def test_index_count_keeps_the_first_n(n):
    assert len(IIBenchSpec(secondary_indexes=n).indexes) == n


@pytest.mark.parametrize(
    "field,value",
    [
        ("clients", 0),
        ("batch_rows", 0),
        ("max_rows", -5),
        ("data_length", -1),
        ("max_seconds", -1.0),
        ("report_interval_s", 0),
        ("clients", True),
        ("batch_rows", 2.5),
        ("data_length", 10**6),
    ],
)
def test_bad_values_name_the_field(field, value):
    with pytest.raises(SuiteError, match=rf"iibench\.{field} = "):
        IIBenchSpec(**{field: value})


def test_query_clients_need_an_index_to_query():
    with pytest.raises(SuiteError, match=r"iibench\.query_clients .*secondary_indexes >= 1"):
        IIBenchSpec(query_clients=1, secondary_indexes=0)


def test_error_is_one_line():
    with pytest.raises(SuiteError) as e:
        IIBenchSpec(secondary_indexes=4)
    assert "\n" not in str(e.value)
