"""Which of the server's counters say "warm", per storage engine: the MySQL family declares them
by meaning (cache_misses, cache_fill), the warmup reads them through that (suites/workloads/warmup.py)."""

from __future__ import annotations

import pytest

from suites.errors import SuiteError
from suites.families.mysql.plugin import MYSQL
from suites.workloads.warmup import FILL, MISSES, is_warm, status_counters


def _names(engine: str) -> tuple[str, str]:
    counters = MYSQL.counters(engine)
    return counters[MISSES], counters[FILL]


def test_each_engine_reads_its_own_cache_counters():
    status = {
        "Innodb_buffer_pool_reads": 7,
        "Innodb_buffer_pool_pages_data": 900,
        "rocksdb_block_cache_miss": 3,  # MariaDB prints MyRocks' names in lower case
        "rocksdb_block_cache_add": 40,
    }
    assert status_counters(lambda: status, _names("innodb"))() == (7.0, 900.0)
    assert status_counters(lambda: status, _names("rocksdb"))() == (3.0, 40.0)


def test_a_server_without_the_engines_counters_is_one_line():
    with pytest.raises(SuiteError, match="Rocksdb_block_cache_miss"):
        status_counters(lambda: {"Innodb_buffer_pool_reads": 1}, _names("rocksdb"))()


def test_warm_means_no_misses_and_nothing_added():
    # MyRocks' second counter is cumulative (blocks added): steady = no block added in the check
    assert is_warm(0, 40, 40)
    assert not is_warm(0, 40, 45)
    assert not is_warm(2, 40, 40)
