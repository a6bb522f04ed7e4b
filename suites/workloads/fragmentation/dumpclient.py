"""The server's own dump client: mariadb-dump for MariaDB, mysqldump for MySQL and Percona.

Where it is looked for: a server in a root (servers.root) uses the root's own, run there under
chroot beside the server (LevelContext.run_client(in_root=True)); a server on the host uses the
one of its install (the bin/ beside the server's sbin/, or its basedir's bin/), else the first on
PATH (a fetched basedir of the host's release brings no client: the host's is the same release).
Missing: a one-line SuiteError naming the package that has it.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from suites.errors import SuiteError

# The dump client of each flavor, by its names (the first found wins), and its Debian package. The
# flavor "mysql" is Oracle's build (the family is MariaDB, MySQL and Percona alike).
NAMES = {
    "mariadb": ("mariadb-dump", "mysqldump"),
    "mysql": ("mysqldump",),
    "percona": ("mysqldump",),
}
PACKAGE = {
    "mariadb": "mariadb-client",
    "mysql": "mysql-client-core",
    "percona": "percona-server-client",
}


@dataclass(frozen=True)
class DumpClient:
    path: str  # as it is run: inside the root for a server in a root
    in_root: bool


def _executable(p: str) -> bool:
    return os.path.isfile(p) and os.access(p, os.X_OK)


def find_dump_client(binary) -> DumpClient:
    """The dump client of the resolved server `binary` (suites.families.mysql.flavor.ServerBinary)."""
    names = NAMES.get(binary.flavor, ("mysqldump",))
    package = PACKAGE.get(binary.flavor, "its client package")
    if binary.root is not None:
        for name in names:
            inside = f"/usr/bin/{name}"
            if _executable(binary.root.host(binary.root.resolve(inside))):
                return DumpClient(inside, True)
        # A root fetched before `servers fetch` installed the clients (servers/acquire/archive.py
        # CLIENTS) lacks it: the fix is one command, named here, not a silent apt run of ours.
        raise SuiteError(
            f"dump scenario: no {' or '.join(names)} in the server root {binary.root.path} "
            "(fetched before roots came with it, or its release lacks it); install package "
            f"{package} in it (chroot {binary.root.path} apt-get install {package}) or drop "
            "'dump' from fragmentation.scenarios"
        )
    here = Path(binary.path).parent
    places = [here.parent / "bin", here, Path(binary.basedir) / "bin"]
    for place in places:
        for name in names:
            if _executable(str(place / name)):
                return DumpClient(str(place / name), False)
    for name in names:
        found = shutil.which(name, path="/usr/local/bin:/usr/bin:/bin")
        if found:
            return DumpClient(found, False)
    raise SuiteError(
        f"dump scenario: no {' or '.join(names)} beside {binary.path} or on PATH; install "
        f"package {package} (apt-get install {package}) or drop 'dump' from "
        "fragmentation.scenarios"
    )
