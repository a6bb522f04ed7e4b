"""The MySQL backend's limits without a server: the data column's charset, the batch size bound."""

from datetime import datetime

import pytest

from suites.iibench.backend_mysql import batch_sql_bytes, create_table_sql, insert_sql
from suites.iibench.rows import RowSource
from suites.iibench.spec import DATA_LENGTH_MAX, IIBenchSpec


def test_data_column_is_ascii_whatever_the_server_default():
    # utf8mb4 (MySQL 8's and MariaDB 10.11's default) caps VARCHAR at 16383 characters.
    ddl = create_table_sql(IIBenchSpec(data_length=DATA_LENGTH_MAX))
    assert f"data VARCHAR({DATA_LENGTH_MAX}) CHARACTER SET ascii NOT NULL" in ddl


@pytest.mark.parametrize("data_length,batch_rows", [(0, 1), (10, 1000), (300, 37), (5000, 4)])
def test_batch_bound_holds_for_generated_batches(data_length, batch_rows):
    spec = IIBenchSpec(data_length=data_length, batch_rows=batch_rows)
    bound = batch_sql_bytes(spec)
    when = datetime(2031, 12, 31, 23, 59, 59)
    longest = 0
    for client in range(20):
        rows = RowSource(spec.seed, client, data_length).batch(1, batch_rows, when)
        longest = max(longest, len(insert_sql(rows).encode()))
    assert longest <= bound
    # A bound, not a guess: within one row's worth of a real batch's length.
    per_row = batch_sql_bytes(IIBenchSpec(data_length=data_length, batch_rows=2)) - (
        batch_sql_bytes(IIBenchSpec(data_length=data_length, batch_rows=1))
    )
    assert bound - longest < max(per_row, 1) * batch_rows * 0.25 + per_row


def test_batch_bound_grows_with_rows_and_data():
    small = batch_sql_bytes(IIBenchSpec(batch_rows=100, data_length=10))
    assert batch_sql_bytes(IIBenchSpec(batch_rows=200, data_length=10)) > small
    assert batch_sql_bytes(IIBenchSpec(batch_rows=100, data_length=20)) == small + 100 * 10
