"""Which MySQL-family server a binary is: MariaDB, MySQL or Percona Server, and its version.

The flavor decides how a datadir is made (mariadb-install-db vs `mysqld --initialize-insecure`) and
which settings exist. It comes from the binary's own `--version` line, e.g.

    /usr/sbin/mariadbd  Ver 10.11.19-MariaDB-0+deb12u1 for debian-linux-gnu on x86_64 (Debian 12)
    /usr/sbin/mysqld  Ver 8.0.36 for Linux on x86_64 (MySQL Community Server - GPL)
    /usr/sbin/mysqld  Ver 8.0.35-27 for Linux on x86_64 (Percona Server (GPL), Release '27', ...)
    /usr/sbin/mysqld  Ver 9.7.4-2 for Linux on x86_64 ((Debian))
    /usr/sbin/mariadbd  Ver 11.8.9-MariaDB-0+deb13u1 from Debian for debian-linux-gnu on x86_64 ...
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

from servers.acquire.version_line import parse_version_output
from servers.allocators import sha256_of
from servers.errors import ServerError
from servers.root import ServerRoot, open_root
from servers.which import which_server

DEFAULT_BINARIES = ("/usr/sbin/mariadbd", "/usr/sbin/mysqld")
# Where a server binary lives inside an install directory (tarball, RPM, Debian).
_BASEDIR_CANDIDATES = (
    "bin/mariadbd",
    "sbin/mariadbd",
    "bin/mysqld",
    "sbin/mysqld",
    "libexec/mysqld",
)


@dataclass(frozen=True)
class ServerBinary:
    path: str
    flavor: str  # "mariadb" | "mysql" | "percona"
    version: str  # "10.11.19"
    version_string: str  # "10.11.19-MariaDB-0+deb12u1"
    install_tool: str | None  # mariadb-install-db, or the binary itself (--initialize-insecure)
    basedir: str  # the install prefix (share/, lib/plugin/ are under it)
    # A server in a root (servers.root): path, install_tool and basedir are as seen inside it.
    root: ServerRoot | None = None

    @property
    def host_path(self) -> str:
        """The binary as the host reaches it (to read its ELF, stat it, hash it)."""
        return self.root.host(self.path) if self.root else self.path

    @property
    def sha256(self) -> str | None:
        """The binary's own bytes (None when it cannot be read): what tells two builds of one
        version apart (a local patch, another packager's build), so that shards measured with
        different binaries are never merged as one measurement."""
        try:
            return sha256_of(self.host_path)
        except OSError:
            return None

    def version_tuple(self) -> tuple[int, ...]:
        return tuple(int(x) for x in self.version.split("."))

    def to_manifest(self) -> dict:
        d = asdict(self)
        d["root"] = self.root.to_manifest() if self.root else None
        d["sha256"] = self.sha256
        return d


def _install_tool(path: Path, flavor: str, basedir: Path) -> str | None:
    if flavor != "mariadb":
        return str(path)  # MySQL 5.7+/8 and Percona initialise with `mysqld --initialize-insecure`
    names = ("mariadb-install-db", "mysql_install_db")
    dirs = (path.parent, basedir / "bin", basedir / "scripts", Path("/usr/bin"))
    for d in dirs:
        for n in names:
            p = d / n
            if p.is_file() and os.access(p, os.X_OK):
                return str(p)
    return None


def _pick(binary: str | None, basedir: str | None) -> Path:
    if binary:
        return which_server(binary)
    if basedir:
        base = Path(basedir)
        if not base.is_dir():
            raise ServerError(f"server basedir {basedir} does not exist")
        for rel in _BASEDIR_CANDIDATES:
            if (base / rel).is_file():
                return base / rel
        raise ServerError(
            f"no mariadbd or mysqld under {basedir} (looked in {', '.join(_BASEDIR_CANDIDATES)})"
        )
    for p in DEFAULT_BINARIES:
        if Path(p).is_file():
            return Path(p)
    raise ServerError(
        f"no MySQL-family server found at {' or '.join(DEFAULT_BINARIES)}; "
        "install mariadb-server or give a binary path / basedir"
    )


def find_mysql(
    binary: str | None = None, basedir: str | None = None, root: str | None = None
) -> ServerBinary:
    """The server to run: `binary`, else the one inside `basedir`, else Debian's mariadbd; with
    `root`, the server binary inside that root (`binary` is then a path as seen inside it)."""
    if root:
        return _find_in_root(root, binary, basedir)
    path = _pick(binary, basedir)
    if not path.exists():
        raise ServerError(f"server binary {path} does not exist")
    if not path.is_file() or not os.access(path, os.X_OK):
        raise ServerError(f"server binary {path} is not an executable file")
    path = path.absolute()
    flavor, version, vs = _version_of([str(path), "--no-defaults", "--version"], str(path))
    base = Path(basedir).absolute() if basedir else path.parent.parent
    return ServerBinary(
        path=str(path),
        flavor=flavor,
        version=version,
        version_string=vs,
        install_tool=_install_tool(path, flavor, base),
        basedir=str(base),
    )


def _find_in_root(root_dir: str, binary: str | None, basedir: str | None) -> ServerBinary:
    root = open_root(root_dir)
    if basedir:
        raise ServerError(
            f"server root {root.path}: give the server's binary inside the root, not a basedir"
        )
    if binary:
        if not binary.startswith("/"):
            raise ServerError(
                f"server root {root.path}: binary {binary!r} must be an absolute path as seen "
                "inside the root (e.g. /usr/sbin/mysqld)"
            )
        candidates = [binary]
    else:
        candidates = list(DEFAULT_BINARIES)
    found = next((c for c in candidates if os.path.isfile(root.host(root.resolve(c)))), None)
    if found is None:
        raise ServerError(
            f"server root {root.path} has no {' or '.join(candidates)} (a path inside the root)"
        )
    if not os.access(root.host(root.resolve(found)), os.X_OK):
        raise ServerError(f"server binary {found} in root {root.path} is not an executable file")
    # --version needs no mounts: a plain chroot. The binary must run on the root's libraries.
    argv = ["chroot", root.path, found, "--no-defaults", "--version"]
    flavor, version, vs = _version_of(argv, f"{found} in root {root.path}")
    base = Path(found).parent.parent
    tool = None
    if flavor != "mariadb":
        tool = found
    else:
        for d in (Path(found).parent, base / "bin", base / "scripts", Path("/usr/bin")):
            for n in ("mariadb-install-db", "mysql_install_db"):
                if os.path.isfile(root.host(root.resolve(str(d / n)))):
                    tool = str(d / n)
                    break
            if tool:
                break
    return ServerBinary(
        path=found,
        flavor=flavor,
        version=version,
        version_string=vs,
        install_tool=tool,
        basedir=str(base),
        root=root,
    )


def _version_of(argv: list[str], what: str) -> tuple[str, str, str]:
    """(flavor, version, version_string) from running `argv` (a `--version` call)."""
    try:
        out = subprocess.run(
            argv,
            capture_output=True,
            stdin=subprocess.DEVNULL,
            text=True,
            timeout=30,
            env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C"},
        )
        text = out.stdout + out.stderr
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ServerError(f"{what} is not a MySQL-family server: `--version` failed: {e}") from None
    try:
        return parse_version_output(text)
    except ValueError:
        first = (text.strip().splitlines() or ["(nothing)"])[0][:120]
        raise ServerError(
            f"{what} is not a MySQL-family server: `--version` printed {first!r}"
        ) from None
