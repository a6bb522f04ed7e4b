"""What a MySQL-family server's `--version` line says (flavor, version, version string). Read
here, below the MySQL family (suites/families/mysql/flavor.py), because checking a fetched server
(fetch.check_runs) needs it too, and servers/ imports no family."""

from __future__ import annotations

import re

# MariaDB 11.8 says "Ver 11.8.9-MariaDB-0+deb13u1 from Debian for debian-linux-gnu ...".
_VER = re.compile(
    r"\bVer\s+(?P<vs>(?P<v>\d+\.\d+\.\d+)\S*)\s+(?:from\s+\S+\s+)?for\s+(?P<rest>.*)$"
)


def parse_version_output(text: str) -> tuple[str, str, str]:
    """(flavor, version, version_string) from `mysqld --version` output; ValueError if not one."""
    for line in text.splitlines():
        m = _VER.search(line)
        if not m:
            continue
        vs, rest = m.group("vs"), m.group("rest")
        if "mariadb" in vs.lower() or "mariadb" in rest.lower():
            flavor = "mariadb"
        elif "percona" in rest.lower():
            flavor = "percona"
        else:
            flavor = "mysql"
        return flavor, m.group("v"), vs
    raise ValueError("no 'Ver X.Y.Z ... for ...' line")
