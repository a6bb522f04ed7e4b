"""A server binary given as NAME or PATH, found as a shell would find it with the sbin directories
on PATH (every family's `[server] binary`, `--server NAME|PATH`)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from servers.errors import ServerError

# Server binaries live in sbin directories, which a user's PATH often lacks.
SBIN_DIRS = ("/usr/sbin", "/usr/local/sbin")


def which_server(name: str) -> Path:
    """A server given as NAME or PATH (`--server mariadbd` or `--server /opt/mysql/bin/mysqld`).

    A bare name (no '/') is looked up on PATH and in the sbin directories, as a shell would if
    they were on PATH; ServerError naming the places looked when it is not found.
    """
    if "/" in name:
        return Path(name).expanduser()
    search = os.pathsep.join([os.environ.get("PATH", ""), *SBIN_DIRS])
    found = shutil.which(name, path=search)
    if found is None:
        raise ServerError(f"server {name!r} not found on PATH or in {', '.join(SBIN_DIRS)}")
    return Path(found)
