"""The server reads an unambiguous prefix of an option's name as the option: `bind = 0.0.0.0`
made a run's server listen on every address while its manifest said 127.0.0.1. A suite setting
that abbreviates one the tool sets (or takes from the suite) is refused, naming both."""

from __future__ import annotations

import pytest

from servers.errors import ServerError
from suites.families.mysql.my_cnf import abbreviates, extra_lines


@pytest.mark.parametrize(
    "key, full",
    [
        ("bind", "bind_address"),
        ("loose-bind-addr", "bind_address"),
        ("skip_net", "skip_networking"),
        ("innodb_flush_log_at_trx", "innodb_flush_log_at_trx_commit"),
        ("skip-performance", "performance_schema"),
    ],
)
def test_an_abbreviation_of_ours_is_refused_naming_both(key, full):
    assert abbreviates(key) == full
    with pytest.raises(ServerError, match=rf"{key} is an abbreviation the server reads as {full}"):
        extra_lines({key: "1"})


@pytest.mark.parametrize(
    "key",
    ["innodb_buffer_pool_dump_now", "max_connections", "skip_name_resolve", "thread_handling"],
)
def test_options_written_in_full_pass(key):
    assert abbreviates(key) is None
    assert extra_lines({key: "1"}) == [f"{key} = 1"]
