"""sysbench command lines and option checks (no sysbench needed)."""

import pytest

from suites.errors import SuiteError
from suites.workloads.level_result import ClientTarget
from suites.workloads.sysbench import (
    WORKLOADS,
    SysbenchOptions,
    prepared_statements_needed,
    run_level,
)
from suites.workloads.sysbench.options import level_argv, prepare_argv

SOCK = ClientTarget(kind="mysql", socket="/tmp/ms-x/mysqld.sock", database="sbtest")


def test_workload_names_map_to_stock_scripts():
    assert WORKLOADS == {"oltp_ro": "oltp_read_only", "point_select": "oltp_point_select"}


def test_level_argv_uses_the_socket_and_one_percentile():
    argv = level_argv("/w.lua", SOCK, SysbenchOptions(), 64, 5)
    assert argv[:2] == ["/usr/bin/sysbench", "/w.lua"] and argv[-1] == "run"
    assert "--mysql-socket=/tmp/ms-x/mysqld.sock" in argv
    assert not any(a.startswith("--mysql-host") for a in argv)
    for a in (
        "--threads=64",
        "--time=5",
        "--percentile=95",
        "--report-interval=1",
        "--db-ps-mode=auto",
        "--tables=4",
        "--table-size=10000",
    ):
        assert a in argv
    assert not any(a.startswith("--rate") or a.startswith("--histogram") for a in argv)


def test_level_argv_tcp_rate_and_extra_args():
    tcp = ClientTarget(kind="mysql", host="127.0.0.1", port=3307, database="sbtest")
    opts = SysbenchOptions(rate=500, ps_mode="disable", extra_args=("--rand-type=uniform",))
    argv = level_argv("/w.lua", tcp, opts, 8, 2)
    assert "--mysql-host=127.0.0.1" in argv and "--mysql-port=3307" in argv
    assert "--rate=500" in argv and "--db-ps-mode=disable" in argv
    assert argv[-2:] == ["--rand-type=uniform", "run"]


def test_prepare_argv():
    argv = prepare_argv(SOCK, SysbenchOptions(tables=2, table_size=50), 2)
    assert argv[1] == "oltp_read_only" and argv[-1] == "prepare"
    assert "--tables=2" in argv and "--table-size=50" in argv and "--threads=2" in argv


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"tables": 0}, "tables"),
        ({"table_size": -1}, "table_size"),
        ({"report_interval_s": 0.5}, "report_interval_s"),
        ({"rate": -3}, "rate"),
        ({"ps_mode": "server"}, "ps_mode"),
        ({"extra_args": ("histogram",)}, "extra_args"),
    ],
)
def test_bad_options_name_the_field(kwargs, field):
    with pytest.raises(SuiteError, match=field):
        SysbenchOptions(**kwargs)


@pytest.mark.parametrize(
    "workload, threads, duration, match",
    [
        ("oltp_rw", 8, 5, "unknown sysbench workload 'oltp_rw'"),
        ("oltp_ro", 0, 5, "threads must be a positive integer"),
        ("oltp_ro", 8, 0, "at least 1 second"),
        ("oltp_ro", 8, 2.5, "whole seconds"),
    ],
)
def test_bad_level_arguments_raise_before_running(tmp_path, workload, threads, duration, match):
    with pytest.raises(SuiteError, match=match):
        run_level(SOCK, workload, threads, duration, SysbenchOptions(), tmp_path / "l.log")
    assert not (tmp_path / "l.log").exists()


def test_mongodb_target_is_refused(tmp_path):
    # the target's driver (MongoDB's) says sysbench cannot drive it
    with pytest.raises(SuiteError, match="sysbench cannot drive mongodb servers"):
        run_level(
            ClientTarget(kind="mongodb", port=27017),
            "oltp_ro",
            8,
            1,
            SysbenchOptions(),
            tmp_path / "l.log",
        )


def test_prepared_statements_needed():
    # measured: 1536 OLTP_RO threads on 4 tables ran out at 16382 = 744 threads x 22 (+ 14)
    assert prepared_statements_needed("oltp_ro", 1536, 4) == 1536 * 22
    assert prepared_statements_needed("point_select", 1536, 4) == 1536 * 4
    assert prepared_statements_needed("oltp_ro", 1536, 4, ps_mode="disable") == 0


def test_missing_sysbench_binary_is_a_failed_level(tmp_path):
    res = run_level(
        SOCK,
        "point_select",
        1,
        1,
        SysbenchOptions(sysbench="/nonexistent/sysbench"),
        tmp_path / "l.log",
        timeout_s=10,
    )
    assert res.status == "failed" and res.error
