"""Row generation: keys in order, secondary values inside their ranges, reproducible streams."""

from datetime import datetime

from suites.families.mysql.iibench_backend import create_table_sql, insert_sql
from suites.workloads.iibench.rows import ALPHABET, COLUMNS, RowSource
from suites.workloads.iibench.spec import (
    CASHREGISTER_MAX,
    CUSTOMER_MAX,
    PRICE_MAX,
    PRODUCT_MAX,
    IIBenchSpec,
)

WHEN = datetime(2024, 5, 6, 7, 8, 9)


def test_primary_keys_follow_the_claimed_block_in_order():
    rows = RowSource(1, 0, 10).batch(1001, 500, WHEN)
    assert [r[0] for r in rows] == list(range(1001, 1501))


def test_values_stay_in_their_ranges():
    rows = RowSource(7, 3, 25).batch(1, 20_000, WHEN)
    assert len(rows[0]) == len(COLUMNS)
    assert all(0 <= r[2] <= CASHREGISTER_MAX for r in rows)
    assert all(0 <= r[3] <= CUSTOMER_MAX for r in rows)
    assert all(0 <= r[4] <= PRODUCT_MAX for r in rows)
    assert all(0.0 <= r[5] <= PRICE_MAX for r in rows)
    assert all(len(r[6]) == 25 and set(r[6]) <= set(ALPHABET) for r in rows)
    assert all(r[1] == WHEN for r in rows)
    # Random, not constant: the ranges are actually covered.
    assert min(r[2] for r in rows) < 50 and max(r[2] for r in rows) > CASHREGISTER_MAX - 50
    assert len({r[3] for r in rows}) > 10_000


def test_streams_are_reproducible_and_distinct_per_client():
    a = RowSource(5, 0, 8).batch(1, 100, WHEN)
    b = RowSource(5, 0, 8).batch(1, 100, WHEN)
    c = RowSource(5, 1, 8).batch(1, 100, WHEN)
    assert a == b
    assert [r[3] for r in a] != [r[3] for r in c]


def test_zero_length_data():
    rows = RowSource(1, 0, 0).batch(1, 10, WHEN)
    assert all(r[6] == "" for r in rows)


def test_mysql_insert_leaves_the_key_to_auto_increment():
    sql = insert_sql(RowSource(1, 0, 4).batch(1, 3, WHEN))
    assert sql.startswith("INSERT INTO purchases (dateandtime,")
    assert "transactionid" not in sql
    assert sql.count("('2024-05-06 07:08:09',") == 3


def test_mysql_table_has_auto_increment_key_and_the_chosen_indexes():
    ddl = create_table_sql(IIBenchSpec(secondary_indexes=2, data_length=33), "InnoDB")
    assert "transactionid BIGINT NOT NULL AUTO_INCREMENT" in ddl
    assert "PRIMARY KEY (transactionid)" in ddl
    assert "KEY ix_price_customer (price, customerid)" in ddl
    assert "KEY ix_register_price_customer (cashregisterid, price, customerid)" in ddl
    assert "ix_price_date_customer" not in ddl
    assert "VARCHAR(33)" in ddl


def test_the_load_s_insert_text_is_the_readable_definition_s():
    # The load formats a whole batch at once (batch_sql); it must say exactly what insert_sql says.
    from suites.families.mysql.iibench_backend import batch_sql

    for data_length in (0, 1, 10, 300):
        b = RowSource(3, 2, data_length).next_batch(77, 257, WHEN)
        assert batch_sql(b) == insert_sql(b.rows())
    assert all(0 <= r[5] <= PRICE_MAX and round(r[5], 2) == r[5] for r in b.rows())
