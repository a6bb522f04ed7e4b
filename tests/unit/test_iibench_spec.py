"""iibench settings: bad values stop with the field and the reason, never clamped."""

import pytest

from suites.errors import SuiteError
from suites.iibench import SECONDARY_INDEXES, IIBenchSpec


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


def test_max_rows_zero_without_time_limit_is_refused():
    with pytest.raises(SuiteError, match=r"iibench\.max_rows = 0: .*never stop"):
        IIBenchSpec(max_rows=0)


def test_max_rows_zero_with_time_limit_means_no_row_limit():
    assert IIBenchSpec(max_rows=0, max_seconds=5).max_rows == 0


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
