"""Paths and values in a rendered my.cnf are read back unchanged by the servers' own parser.

The parser is the real one: `my_print_defaults` of Debian's MariaDB (host) and, when the fetched
roots are cached, of MariaDB 11.8 and MySQL 9.7 (run under chroot, as root). A '#' cut a path short
before (the server ran in whatever directory the shortened path named).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from servers.errors import ServerError
from suites.families.mysql.flavor import ServerBinary
from suites.families.mysql.my_cnf import MySQLSettings, ServerPaths, render_my_cnf
from suites.families.mysql.option_file import option_value

NASTY = "/tmp/run #1; a\\b \"c\" 'd'/x"  # comment chars, a backslash, quotes, blanks

MYSQL = ServerBinary("/usr/sbin/mysqld", "mysql", "9.7.4", "9.7.4", "/usr/sbin/mysqld", "/usr")


def _paths(base: str) -> ServerPaths:
    b = Path(base)
    return ServerPaths(
        datadir=b / "datadir",
        socket=b / "s.sock",
        pid_file=b / "p.pid",
        error_log=b / "error.log",
        tmpdir=b / "tmp",
        secure_file_priv=b / "files",
    )


def _cnf_text(base: str) -> str:
    settings = MySQLSettings(extra={"init_connect": "SET @a='#x'", "loose-comment": " s\\p "})
    return render_my_cnf(MYSQL, settings, _paths(base), 3307, euid=1000)


def _parsers() -> list[tuple[str, list[str], Path | None]]:
    """(name, argv prefix, root or None) of every my_print_defaults reachable here."""
    found = []
    host = shutil.which("my_print_defaults")
    if host:
        found.append(("host MariaDB", [host], None))
    cache = Path(os.environ.get("MALLOCSWEEP_SERVERS", "/work/cache/servers"))
    for name in ("mariadb-11.8.9", "mysql-9.7.4"):
        root = cache / name / "root"
        if (root / "usr/bin/my_print_defaults").is_file() and os.geteuid() == 0:
            found.append((name, ["chroot", str(root), "/usr/bin/my_print_defaults"], root))
    return found


def _read_back(argv: list[str], root: Path | None, text: str, tmp_path: Path) -> dict[str, str]:
    where = (root / "tmp") if root else tmp_path
    f = where / f"quoting-{os.getpid()}.cnf"
    f.write_text(text)
    try:
        shown = f"/tmp/{f.name}" if root else str(f)
        out = subprocess.run(
            [*argv, f"--defaults-file={shown}", "mysqld"],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        ).stdout
    finally:
        f.unlink()
    got = {}
    for line in out.splitlines():
        key, _, value = line.removeprefix("--").partition("=")
        got[key.replace("_", "-")] = value
    return got


PARSERS = _parsers()


@pytest.mark.skipif(not PARSERS, reason="no my_print_defaults here (install mariadb-server)")
@pytest.mark.parametrize("parser", PARSERS, ids=[p[0] for p in PARSERS])
def test_every_path_and_value_reads_back_unchanged(parser, tmp_path):
    name, argv, root = parser
    got = _read_back(argv, root, _cnf_text(NASTY), tmp_path)
    p = _paths(NASTY)
    expected = {
        "datadir": str(p.datadir),
        "socket": str(p.socket),
        "pid-file": str(p.pid_file),
        "log-error": str(p.error_log),
        "tmpdir": str(p.tmpdir),
        "secure-file-priv": str(p.secure_file_priv),
        "init-connect": "SET @a='#x'",
        "loose-comment": " s\\p ",
    }
    for key, value in expected.items():
        assert got.get(key) == value, f"{name}: {key} read as {got.get(key)!r}"


def test_plain_values_stay_unquoted():
    assert option_value("/var/lib/mysql", "datadir") == "/var/lib/mysql"
    assert option_value(Path("/a b/c"), "datadir") == "/a b/c"  # inner blanks are kept as such
    assert option_value("/a#b", "datadir") == '"/a#b"'
    assert option_value('C:\\x"', "v") == '"C:\\\\x\\""'


@pytest.mark.parametrize("bad", ["/tmp/a\nb", "/tmp/a\rb", "/tmp/a\0b"])
def test_unrepresentable_values_are_refused_naming_them(bad):
    with pytest.raises(ServerError) as e:
        _cnf_text(bad)
    msg = str(e.value)
    assert "\n" not in msg and "my.cnf" in msg and repr(str(Path(bad) / "datadir")) in msg
