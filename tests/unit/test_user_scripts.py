"""A user's own sysbench Lua script as a workload ([sysbench] scripts): checked when the suite is
read (sysbench loads it once, no server needed), run through our wrapper with its own options,
its own tables in the dataset's key. Bad input is one line naming the file and field, exit 2,
nothing written. The run on a real server is tests/integration/test_user_script.py."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import suites.runner.matrix
from suites.suite.model import parse_suite
from suites.workloads.level_result import ClientTarget
from suites.workloads.sysbench.options import (
    Script,
    level_argv,
    prepare_argv,
    prepared_statements_needed,
)
from suites.workloads.sysbench.plugin import Sysbench, sysbench_scripts
from suites.workloads.sysbench.runner import WRAPPER
from suites.workloads.sysbench.scripts import digest
from tests.unit.test_config_cli import Validated, _assert_one_line_user_error, _cli

LUA = Path(__file__).resolve().parents[1] / "fixtures" / "lua"
pytestmark = pytest.mark.skipif(shutil.which("sysbench") is None, reason="sysbench not installed")


def _suite(tmp_path: Path, body: str) -> Path:
    """A suite file beside a copy of the test workload (its module too), and bad scripts."""
    shutil.copytree(LUA, tmp_path / "lua")
    p = tmp_path / "s.toml"
    p.write_text(body)
    return p


@pytest.fixture
def stop_at_matrix(monkeypatch):
    def run(self):
        raise Validated(self.suite)

    monkeypatch.setattr(suites.runner.matrix.Matrix, "run", run)


ORDERS = '[sysbench]\nworkloads = ["orders"]\nscripts = { orders = "lua/orders.lua" }\n'


def test_a_script_is_a_workload_with_its_own_options(tmp_path):
    p = _suite(
        tmp_path, ORDERS.replace('["orders"]', '["point_select", "orders"]')
        + "script_options = { orders = { items = 300, lines = 3 } }\n",
    )  # fmt: skip
    s = parse_suite(p.read_text(), str(p))
    stock, orders = sysbench_scripts(s)
    assert stock == Script("point_select", module="oltp_point_select")
    assert orders.name == "orders" and orders.path == str(tmp_path / "lua" / "orders.lua")
    assert orders.options == (("items", "300"), ("lines", "3"))
    assert orders.environment() == {"MALLOCSWEEP_SCRIPT": orders.path}
    # Its level runs through our wrapper with its own options, not the stock tables' sizes
    target = ClientTarget(kind="mysql", socket="/s.sock")
    from suites.workloads.sysbench.plugin import sysbench_options

    opts = sysbench_options(s)
    argv = level_argv(WRAPPER, target, opts, 8, 5, orders)
    assert "--items=300" in argv and "--lines=3" in argv and argv[-1] == "run"
    assert not any(a.startswith(("--tables=", "--table-size=")) for a in argv)
    assert "--tables=4" in level_argv(WRAPPER, target, opts, 8, 5, stock)
    prep = prepare_argv(target, opts, 2, orders, WRAPPER)
    assert prep[1] == str(WRAPPER) and prep[-1] == "prepare" and "--items=300" in prep
    assert prepare_argv(target, opts, 2, orders, WRAPPER, "cleanup")[-1] == "cleanup"
    # What it prepares is unknown: the server keeps its per-connection statement cache
    assert prepared_statements_needed(orders, 1536, 4) == 0
    # The dataset's key: the stock tables, and the script with its modules and options
    spec = Sysbench().dataset_spec(s)
    assert spec["tables"] == 4 and spec["scripts"]["orders"] == {
        "digest": digest(orders.path),
        "options": {"items": "300", "lines": "3"},
    }
    assert Sysbench().remote_files(s) == [orders.path]


def test_a_stock_suites_dataset_key_is_unchanged_by_scripts_existing():
    s = parse_suite('[sysbench]\nworkloads = ["oltp_ro"]\n', "x.toml")
    assert Sysbench().dataset_spec(s) == {"kind": "sysbench", "tables": 4, "table_size": 10000}


def test_a_suite_of_scripts_only_has_no_stock_tables(tmp_path):
    s = parse_suite(_suite(tmp_path, ORDERS).read_text(), str(tmp_path / "s.toml"))
    spec = Sysbench().dataset_spec(s)
    assert "tables" not in spec and list(spec["scripts"]) == ["orders"]
    assert Sysbench().dataset_kb(s) == 0  # its data is its own, unknown before it is made


def test_changing_a_scripts_module_changes_the_dataset_key(tmp_path):
    p = _suite(tmp_path, ORDERS)
    before = digest(tmp_path / "lua" / "orders.lua")
    common = tmp_path / "lua" / "orders_common.lua"
    common.write_text(common.read_text().replace("1000000", "999"))
    assert digest(tmp_path / "lua" / "orders.lua") != before
    parse_suite(p.read_text(), str(p))  # checked again: the cache knows the file version


@pytest.mark.parametrize(
    "body, expected",
    [
        (
            ORDERS.replace("lua/orders.lua", "lua/nope.lua"),
            ["s.toml:3", "sysbench.scripts.orders", "no such file", "nope.lua"],
        ),
        (
            '[sysbench]\nworkloads = ["x"]\nscripts = { x = "lua/bad/no_event.lua" }\n',
            ["s.toml:3", "sysbench.scripts.x", "no_event.lua defines no event() function"],
        ),
        (
            '[sysbench]\nworkloads = ["x"]\nscripts = { x = "lua/bad/no_prepare.lua" }\n',
            ["s.toml:3", "sysbench.scripts.x", "no_prepare.lua has no prepare command"],
        ),
        (
            '[sysbench]\nworkloads = ["x"]\nscripts = { x = "lua/bad/broken.lua" }\n',
            ["s.toml:3", "sysbench.scripts.x", "sysbench cannot load broken.lua"],
        ),
        (
            '[sysbench]\nscripts = { oltp_ro = "lua/orders.lua" }\n',
            ["s.toml:2", "sysbench.scripts.oltp_ro", "stock workload's name"],
        ),
        (
            ORDERS.replace('["orders"]', '["oltp_ro"]'),
            ["s.toml:3", "sysbench.scripts.orders", "not among sysbench.workloads"],
        ),
        (
            '[sysbench]\nworkloads = ["tpcc"]\n',
            ["s.toml:2", "sysbench.workloads", "unknown workload 'tpcc'"],
        ),
        (
            ORDERS + "script_options = { orders = { warehouses = 2 } }\n",
            [
                "s.toml:4",
                "sysbench.script_options.orders.warehouses",
                "declares no option",
                "items, lines",
            ],
        ),  # fmt: skip
        (
            ORDERS + "script_options = { other = { items = 2 } }\n",
            ["s.toml:4", "sysbench.script_options.other", "no script named 'other'"],
        ),
    ],
)
def test_bad_scripts_are_one_line_exit_2_and_nothing_written(
    capsys, tmp_path, stop_at_matrix, body, expected
):
    suite = _suite(tmp_path, body)
    code, err = _cli(capsys, tmp_path / "runs", suite)
    _assert_one_line_user_error(code, err, tmp_path / "runs", str(suite), *expected)
