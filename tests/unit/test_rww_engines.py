"""Read-while-writing settings and the storage-engine dimension, without a server: bad input is
one line naming the field, the engine reaches my.cnf, the plan, the cell ids and the labels, and
the latency buckets keep their stated precision."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from servers.errors import ServerError
from suites.errors import SuiteError
from suites.families.mysql.engines import check_engine, engine_lines
from suites.families.mysql.flavor import ServerBinary
from suites.families.mysql.my_cnf import MySQLSettings, ServerPaths, render_my_cnf
from suites.runner.plan import engine_label, plan_cells
from suites.suite.model import parse_suite
from suites.suite.overrides import apply_overrides
from suites.workloads.rww.latency import Buckets, bucket, bucket_range
from suites.workloads.rww.spec import MAX_VALUE_BYTES

RWW = '[suite]\nkind = "rww"\n'


def _error(text: str) -> str:
    with pytest.raises(SuiteError) as e:
        parse_suite(text, "s.toml")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("s.toml:")
    return msg


@pytest.mark.parametrize(
    "body, field, words",
    [
        ("[rww]\nreaders = 0", "rww.readers", "at least 1 reader"),
        ("[rww]\nrecords = 0", "rww.records", "at least 1 row"),
        ("[rww]\nvalue_bytes = 65526", "rww.value_bytes", "65,525"),
        (
            '[server]\nengines = ["rocksdb"]\n[rww]\nvalue_bytes = 70000',
            "rww.value_bytes",
            "rocksdb stores at most",
        ),
        ('[server]\nengines = ["myisam"]', "server.engines", "'innodb' or 'rocksdb'"),
        ('[server]\nengines = ["innodb", "innodb"]', "server.engines", "duplicate"),
        ("[server]\nengines = []", "server.engines", "at least one engine"),
        ("[rww]\nbatch_rows = 5000", "rww.batch_rows", "max_allowed_packet"),
        ("[rww]\nmax_seconds = 0", "rww.max_seconds", "more than 0"),
    ],
)
def test_bad_rww_and_engine_settings_are_one_line(body, field, words):
    msg = _error(RWW + body)
    assert field in msg and words in msg, msg


def test_engines_and_rww_on_mongodb_are_refused():
    assert "server.engines" in _error(
        '[suite]\nkind = "iibench"\n[server]\nflavor = "mongodb"\nengines = ["rocksdb"]'
    )
    assert "suite.kind" in _error(RWW + '[server]\nflavor = "mongodb"')


def test_engines_option_overrides_and_is_checked():
    suite = parse_suite(RWW)
    assert apply_overrides(suite, engines=["rocksdb", "innodb"]).server.engines == [
        "rocksdb",
        "innodb",
    ]
    with pytest.raises(SuiteError, match=r"^--engines aria: server\.engines"):
        apply_overrides(suite, engines=["aria"])
    with pytest.raises(SuiteError, match=r"\[rww\] readers"):
        apply_overrides(suite, threads=[8])


def test_readers_and_writer_are_the_clients():
    s = parse_suite(RWW + "[rww]\nreaders = 5")
    assert s.max_threads == 6 and s.rww.to_spec("rocksdb").engine == "rocksdb"


def test_plan_crosses_engines_and_names_them():
    cells = plan_cells(
        "mariadb-10.11.19", ["glibc", "jemalloc"], ["system"], 2, ("innodb", "rocksdb")
    )
    assert len(cells) == 8
    assert {(c.engine, c.allocator, c.round) for c in cells} == {
        (e, a, r) for e in ("innodb", "rocksdb") for a in ("glibc", "jemalloc") for r in (1, 2)
    }
    for c in cells:
        assert c.server_label == engine_label("mariadb-10.11.19", c.engine)
    ids = [c.id for c in cells]
    assert len(set(ids)) == 8
    # InnoDB keeps the label (and so the cell ids) of every run before engines existed
    assert "mariadb-10.11.19__glibc__thp-system__r1" in ids
    assert "mariadb-10.11.19+rocksdb__glibc__thp-system__r1" in ids


MARIADB = ServerBinary(
    "/usr/sbin/mariadbd", "mariadb", "10.11.19", "10.11.19-MariaDB", "/usr/bin/x", "/usr"
)
PATHS = ServerPaths(Path("/w/d"), Path("/w/s"), Path("/w/p"), Path("/w/e"), Path("/w/t"))


def test_rocksdb_cells_load_the_plugin_and_size_its_memory():
    cnf = render_my_cnf(
        MARIADB,
        MySQLSettings(engine="rocksdb", rocksdb_block_cache_mb=96, rocksdb_write_buffer_mb=8),
        PATHS,
        3306,
        euid=1000,
    )
    assert "plugin-load-add = ha_rocksdb.so" in cnf
    assert "plugin_dir = /usr/lib/mysql/plugin" in cnf
    assert "rocksdb_block_cache_size = 96M" in cnf
    assert "rocksdb_default_cf_options = write_buffer_size=8m" in cnf
    assert "rocksdb" not in render_my_cnf(MARIADB, MySQLSettings(), PATHS, 3306, euid=1000)
    assert engine_lines(MARIADB, "innodb", 1, 1) == []


def test_an_engine_the_server_lacks_is_refused_before_it_starts(tmp_path):
    check_engine(MARIADB, "innodb")
    mysql = dataclasses.replace(MARIADB, flavor="mysql", version="9.7.4", basedir=str(tmp_path))
    with pytest.raises(ServerError, match="has no MyRocks engine"):
        check_engine(mysql, "rocksdb")
    bare = dataclasses.replace(MARIADB, basedir=str(tmp_path))
    with pytest.raises(ServerError, match="mariadb-plugin-rocksdb") as e:
        check_engine(bare, "rocksdb")
    assert "\n" not in str(e.value) and str(tmp_path) in str(e.value)
    plugin_dir = tmp_path / "lib" / "mysql" / "plugin"
    plugin_dir.mkdir(parents=True)
    (plugin_dir / "ha_rocksdb.so").write_bytes(b"")
    check_engine(bare, "rocksdb")  # the server's own plugin directory has it


def test_latency_buckets_hold_every_value_within_a_64th():
    for us in [*range(0, 5000), 65_535, 1_000_000, 3_600_000_000]:
        low, high = bucket_range(bucket(us))
        assert low <= us < high
        assert high - low <= max(1, low // 64)
    b = Buckets()
    for us in (100, 100, 250, 40_000):
        b.add(us)
    from suites.workloads.iibench.latency import merge

    hist = merge([b.encoded_histogram()])
    assert hist.get_total_count() == 4
    assert 39_000 < hist.get_max_value() < 41_000
    assert Buckets().encoded_histogram() == b""


def test_engine_row_limits_are_the_measured_ones():
    assert MAX_VALUE_BYTES == {"innodb": 65_525, "rocksdb": 65_525}


def test_resume_plans_the_engines_it_ran():
    from suites.runner.matrix import _pending
    from suites.runner.resume import check_resumable, plan_from_manifest

    cells = plan_cells("mariadb-10.11.19", ["glibc"], ["system"], 2, ("rocksdb", "innodb"))
    from rundir.format import FORMAT_VERSION

    m = {"cells": [_pending(c) for c in cells], "host": {}, "suite": {"s": 1}}
    m["format_version"] = FORMAT_VERSION
    assert plan_from_manifest(m, "mariadb-10.11.19") == cells
    rocks_only = {**m, "cells": [c for c in m["cells"] if c["engine"] == "rocksdb"]}
    check_resumable(rocks_only, {"s": 1}, "mariadb-10.11.19", {})  # label + "+rocksdb" is ours
    with pytest.raises(SuiteError, match="the server is now mariadb-11.8.9"):
        check_resumable(rocks_only, {"s": 1}, "mariadb-11.8.9", {})
