"""Flavor detection from recorded `mysqld --version` lines, and my.cnf rendering per flavor."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from servers.errors import ServerError
from suites.families.mysql.flavor import ServerBinary, find_mysql, parse_version_output
from suites.families.mysql.my_cnf import MySQLSettings, ServerPaths, render_my_cnf

VERSIONS = [
    (
        "/usr/sbin/mariadbd  Ver 10.11.19-MariaDB-0+deb12u1 for debian-linux-gnu on x86_64 (Debian 12)",
        "mariadb",
        "10.11.19",
        "10.11.19-MariaDB-0+deb12u1",
    ),
    (
        "/opt/mariadb/bin/mariadbd  Ver 11.4.2-MariaDB for linux-systemd on x86_64 (MariaDB Server)",
        "mariadb",
        "11.4.2",
        "11.4.2-MariaDB",
    ),
    (
        "/usr/sbin/mysqld  Ver 10.3.39-MariaDB-0+deb10u1 for debian-linux-gnu on x86_64 (Debian 10)",
        "mariadb",
        "10.3.39",
        "10.3.39-MariaDB-0+deb10u1",
    ),
    (
        "/usr/sbin/mysqld  Ver 8.0.36 for Linux on x86_64 (MySQL Community Server - GPL)",
        "mysql",
        "8.0.36",
        "8.0.36",
    ),
    (
        "/usr/sbin/mysqld  Ver 8.4.0 for Linux on x86_64 (MySQL Community Server - GPL)",
        "mysql",
        "8.4.0",
        "8.4.0",
    ),
    (
        "/usr/sbin/mysqld  Ver 8.0.36-0ubuntu0.22.04.1 for Linux on x86_64 ((Ubuntu))",
        "mysql",
        "8.0.36",
        "8.0.36-0ubuntu0.22.04.1",
    ),
    (
        "/usr/sbin/mysqld  Ver 8.0.35-27 for Linux on x86_64 (Percona Server (GPL), Release '27', Revision '2f8eeab2'$)",
        "percona",
        "8.0.35",
        "8.0.35-27",
    ),
    (
        "mysqld  Ver 5.7.44-48 for Linux on x86_64 (Percona Server (GPL), Release 48, Revision 497f936a373)",
        "percona",
        "5.7.44",
        "5.7.44-48",
    ),
    (
        "mysqld  Ver 5.7.44 for Linux on x86_64 (MySQL Community Server (GPL))",
        "mysql",
        "5.7.44",
        "5.7.44",
    ),
    # Recorded from Debian's packages in server roots (sid and trixie).
    ("/usr/sbin/mysqld  Ver 9.7.4-2 for Linux on x86_64 ((Debian))", "mysql", "9.7.4", "9.7.4-2"),
    (
        "/usr/sbin/mariadbd  Ver 11.8.9-MariaDB-0+deb13u1 from Debian for debian-linux-gnu on "
        "x86_64 (-- Please help get to 10k stars at https://github.com/MariaDB/Server)",
        "mariadb",
        "11.8.9",
        "11.8.9-MariaDB-0+deb13u1",
    ),
]


@pytest.mark.parametrize("line, flavor, version, vs", VERSIONS)
def test_flavor_detection(line, flavor, version, vs):
    assert parse_version_output("2024-01-01 0 [Warning] noise\n" + line + "\n") == (
        flavor,
        version,
        vs,
    )


@pytest.mark.parametrize(
    "text", ["", "true (GNU coreutils) 9.1", "mysql  Ver 15.1 Distrib 10.11.19-MariaDB"]
)
def test_not_a_server_version(text):
    with pytest.raises(ValueError):
        parse_version_output(text)


def _fake_server(tmp_path: Path, line: str) -> Path:
    exe = tmp_path / "bin" / "mysqld"
    exe.parent.mkdir()
    exe.write_text(f'#!/bin/sh\necho "{line}"\n')
    exe.chmod(0o755)
    return exe


def test_find_mysql_percona_uses_initialize_insecure(tmp_path):
    exe = _fake_server(tmp_path, VERSIONS[6][0].replace("$", "\\$"))
    b = find_mysql(str(exe))
    assert (b.flavor, b.version, b.install_tool) == ("percona", "8.0.35", str(exe))
    assert b.basedir == str(tmp_path)


def test_find_mysql_by_basedir(tmp_path):
    _fake_server(tmp_path, VERSIONS[3][0])
    b = find_mysql(basedir=str(tmp_path))
    assert b.flavor == "mysql" and b.path == str(tmp_path / "bin" / "mysqld")


def test_find_mysql_missing_binary(tmp_path):
    with pytest.raises(ServerError, match=f"{tmp_path}/nope does not exist"):
        find_mysql(str(tmp_path / "nope"))


def test_find_mysql_not_a_mysqld():
    with pytest.raises(ServerError, match="/bin/true is not a MySQL-family server"):
        find_mysql("/bin/true")


def test_find_mysql_basedir_without_server(tmp_path):
    with pytest.raises(ServerError, match=f"no mariadbd or mysqld under {tmp_path}"):
        find_mysql(basedir=str(tmp_path))


# -- my.cnf ----------------------------------------------------------------------------------------

MARIADB = ServerBinary(
    "/usr/sbin/mariadbd",
    "mariadb",
    "10.11.19",
    "10.11.19-MariaDB-0+deb12u1",
    "/usr/bin/mariadb-install-db",
    "/usr",
)
MYSQL8 = ServerBinary(
    "/opt/mysql/bin/mysqld", "mysql", "8.0.36", "8.0.36", "/opt/mysql/bin/mysqld", "/opt/mysql"
)
MYSQL57 = ServerBinary(
    "/opt/m57/bin/mysqld", "mysql", "5.7.44", "5.7.44", "/opt/m57/bin/mysqld", "/opt/m57"
)
PATHS = ServerPaths(
    Path("/w/datadir"),
    Path("/w/mysqld.sock"),
    Path("/w/mysqld.pid"),
    Path("/w/error.log"),
    Path("/w/tmp"),
)


def _cnf(binary=MARIADB, euid=1000, **kw) -> dict[str, str]:
    text = render_my_cnf(binary, MySQLSettings(**kw), PATHS, 33061, euid=euid)
    assert "$" not in text, "unfilled placeholder"
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "[")):
            k, _, v = line.partition("=")
            out[k.strip()] = v.strip()
    return out


def test_isolation_and_cold_start_settings():
    c = _cnf()
    assert c["port"] == "33061" and c["bind-address"] == "127.0.0.1"
    assert c["socket"] == "/w/mysqld.sock" and c["datadir"] == "/w/datadir"
    assert "skip-name-resolve" in c and "skip-log-bin" in c
    assert c["innodb_buffer_pool_dump_at_shutdown"] == "OFF"
    assert c["innodb_buffer_pool_load_at_startup"] == "OFF"
    assert c["performance_schema"] == "OFF"
    assert c["innodb_buffer_pool_size"] == "256M"
    assert "user" not in c


def test_sized_for_the_largest_level():
    c = _cnf(max_threads=1536)
    assert int(c["max_connections"]) > 1536
    assert int(c["thread_cache_size"]) >= 1536
    assert int(c["back_log"]) >= 1536
    assert int(c["max_prepared_stmt_count"]) > 16382
    assert int(c["open_files_limit"]) > int(c["max_connections"]) + int(c["table_open_cache"])


def test_root_runs_as_root():
    assert _cnf(euid=0)["user"] == "root"


def test_mysql8_redo_capacity_and_no_x_plugin():
    c = _cnf(MYSQL8, innodb_log_file_mb=16)
    assert c["innodb_redo_log_capacity"] == "32M" and "innodb_log_file_size" not in c
    assert c["loose-mysqlx"] == "OFF"


def test_secure_file_priv_for_mysql_only():
    paths = dataclasses.replace(PATHS, secure_file_priv=Path("/w/secure-file-priv"))
    mysql = render_my_cnf(MYSQL8, MySQLSettings(), paths, 33061, euid=1000)
    assert "\nsecure-file-priv = /w/secure-file-priv\n" in mysql
    # MariaDB keeps its own default (the setting exists there too, but nothing requires it).
    assert "secure-file-priv" not in render_my_cnf(MARIADB, MySQLSettings(), paths, 1, euid=1000)


def test_mysql57_log_file_size():
    c = _cnf(MYSQL57, innodb_log_file_mb=16)
    assert c["innodb_log_file_size"] == "16M" and "innodb_redo_log_capacity" not in c


def test_extra_lines_come_last_and_booleans_read_on_off():
    text = render_my_cnf(
        MARIADB,
        MySQLSettings(
            extra={"innodb_adaptive_hash_index": "False", "thread_handling": "pool-of-threads"}
        ),
        PATHS,
        1,
        euid=1000,
    )
    lines = [ln for ln in text.splitlines() if ln.strip()]
    assert lines[-2:] == ["innodb_adaptive_hash_index = OFF", "thread_handling = pool-of-threads"]


@pytest.mark.parametrize(
    "extra, message",
    [
        ({"port": "3306"}, "port is set by mallocsweep"),
        ({"bind-address": "0.0.0.0"}, "bind-address is set by mallocsweep"),
        ({"loose-socket": "/tmp/x"}, "loose-socket is set by mallocsweep"),
        ({"x = 1\nport": "1"}, "not a my.cnf option name"),
        ({"init_connect": "a\nport=1"}, "init_connect contains a line break"),
    ],
)
def test_bad_extra_settings(extra, message):
    with pytest.raises(ServerError, match=re.escape(message)):
        render_my_cnf(MARIADB, MySQLSettings(extra=extra), PATHS, 1, euid=1000)


@pytest.mark.parametrize(
    "kw", [{"buffer_pool_mb": 0}, {"max_threads": -1}, {"flush_log_at_trx_commit": 3}]
)
def test_bad_settings_values(kw):
    with pytest.raises(ServerError, match=next(iter(kw))):
        MySQLSettings(**kw)
