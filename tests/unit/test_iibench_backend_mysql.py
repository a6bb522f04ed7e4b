"""The MySQL backend's limits without a server: the data column's charset, the batch size bound."""

from datetime import datetime

import pytest

from suites.families.mysql.iibench_backend import create_table_sql, insert_sql
from suites.workloads.iibench.rows import RowSource
from suites.workloads.iibench.spec import (
    DATA_LENGTH_MAX,
    ROW_SQL_BYTES,
    IIBenchSpec,
    insert_statement_bytes,
)


def test_data_column_is_ascii_whatever_the_server_default():
    # utf8mb4 (MySQL 8's and MariaDB 10.11's default) caps VARCHAR at 16383 characters.
    ddl = create_table_sql(IIBenchSpec(data_length=DATA_LENGTH_MAX), "InnoDB")
    assert f"data VARCHAR({DATA_LENGTH_MAX}) CHARACTER SET ascii NOT NULL" in ddl


@pytest.mark.parametrize("data_length,batch_rows", [(0, 1), (10, 1000), (300, 37), (5000, 4)])
def test_the_load_time_bound_holds_for_generated_batches(data_length, batch_rows):
    # The backend checks the server's max_allowed_packet with the same bound the suite file is
    # checked with at load: it must hold for the statements the clients really send.
    bound = insert_statement_bytes(batch_rows, data_length)
    when = datetime(2031, 12, 31, 23, 59, 59)
    longest = 0
    for client in range(20):
        rows = RowSource(1, client, data_length).batch(1, batch_rows, when)
        longest = max(longest, len(insert_sql(rows).encode()))
    assert longest <= bound
    # A bound, not a guess: at most ROW_SQL_BYTES per row (plus the prefix) above a real batch.
    assert bound - longest < 128 + ROW_SQL_BYTES * batch_rows
