"""Server roots for the integration tests: one function, `rooted_server(flavor)`.

It returns the root directory of a real server of that flavor from Debian's archive, made by
`mallocsweep servers fetch` (servers.fetch) the first time and cached in the repo's gitignored
.cache/servers, which the fetch tests share, so a root is built once per machine. The version is
the newest the archive offers today (archives move on: no version is hard-coded): MySQL from
Debian unstable, MariaDB from Debian 13.

Measured here: a sid root with MySQL took 119 s to fetch on a quiet machine (504 MB), a trixie
root with MariaDB 11.8 215-308 s under heavy load (262 MB).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from servers import archive, fetch
from servers.errors import ServerError

REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / ".cache" / "servers"
# flavor -> (Debian release that carries the version we want, the server package there)
ROOTS = {
    "mysql": ("sid", "mysql-server-core"),
    "mariadb": ("trixie", "mariadb-server-core"),
}


def rooted_server(flavor: str) -> Path:
    """A root with the newest `flavor` server of its release in it (fetched once, then cached)."""
    release, package = ROOTS[flavor]
    if os.geteuid() != 0:
        pytest.skip("a server root needs chroot and mount namespaces: run the tests as root")
    if shutil.which("debootstrap") is None:
        pytest.skip("debootstrap is not installed (make setup installs it)")
    os.environ.setdefault("MALLOCSWEEP_SERVERS", str(CACHE))
    ix = archive.ReleaseIndex(release, fetch.servers_dir() / ".archive" / release)
    try:
        ix.update()
        newest = archive.newest_first(ix.show(package))
    except ServerError as e:
        if "resolve" in str(e) or "Failed to fetch" in str(e) or "download" in str(e):
            pytest.skip(f"Debian's archive is not reachable from here: {e}")
        raise
    assert newest, f"Debian {release} has no {package}"
    server = fetch.fetch(f"{flavor}-{newest[0].upstream}")
    assert server.kind == "root", f"{server.spec} was fetched as a {server.kind}, not a root"
    return Path(server.path)
