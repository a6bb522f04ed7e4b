"""What `mallocsweep kit build` was asked for, checked before anything is built: the servers
(`host` or `fetched:SPEC`), the archive's name and compression, and that --out can be written
without replacing anything. Every refusal is one line naming the option and the value (exit 2).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from servers.acquire import archive
from servers.errors import ServerError
from suites.errors import SuiteError

HOST = "host"
FETCHED = "fetched:"
# Archive name -> compression; any other name gets zstd where it is installed, else gzip (tar xf
# recognises either by its content).
_SUFFIXES = ((".tar.zst", "zstd"), (".tzst", "zstd"), (".tar.gz", "gzip"), (".tgz", "gzip"))


@dataclass(frozen=True)
class KitRequest:
    out: Path  # the archive, absolute; does not exist yet
    servers: tuple[str, ...]  # "host" and/or "fetched:FLAVOR-X.Y.Z", in the order given
    compression: str  # "zstd" | "gzip"

    @property
    def dirname(self) -> str:
        """The one directory the archive unpacks to: its name without the archive suffix."""
        name = self.out.name
        for suffix, _ in _SUFFIXES:
            if name.endswith(suffix):
                name = name[: -len(suffix)]
                break
        else:
            name = name.removesuffix(".tar")
        return name or "mallocsweep-kit"

    @property
    def fetched_specs(self) -> list[str]:
        return [s.removeprefix(FETCHED) for s in self.servers if s.startswith(FETCHED)]


def parse_server(text: str) -> str:
    """`host`, or `fetched:SPEC` with SPEC a FLAVOR-X.Y.Z (its canonical spelling)."""
    t = text.strip()
    if t == HOST:
        return HOST
    if t.startswith(FETCHED):
        try:
            spec = archive.parse_spec(t.removeprefix(FETCHED))
        except ServerError as e:
            raise SuiteError(f"--server {text!r}: {e}") from None
        return f"{FETCHED}{spec}"
    raise SuiteError(
        f"--server {text!r}: expected 'host' (this host's Debian MariaDB) or 'fetched:SPEC' (a "
        "server fetched with `mallocsweep servers fetch SPEC`, e.g. fetched:mysql-9.7.4)"
    )


def compression_for(out: Path, which=shutil.which) -> str:
    for suffix, kind in _SUFFIXES:
        if out.name.endswith(suffix):
            if which(kind) is None:
                other = "name it .tar.gz" if kind == "zstd" else "name it .tar.zst"
                raise SuiteError(f"--out {out}: {kind} is not installed here ({other})")
            return kind
    if which("zstd") is not None:
        return "zstd"
    if which("gzip") is not None:
        return "gzip"
    raise SuiteError(f"--out {out}: neither zstd nor gzip is installed to compress the kit")


def check_out(out: Path) -> None:
    """--out must be a new file in a directory we can write: an existing file (or directory, or
    dangling link) is never replaced."""
    if out.exists() or out.is_symlink():
        raise SuiteError(
            f"--out {out}: exists; a kit is never written over a file: give a new name or move it"
        )
    if re.search(r"\s", out.name):
        raise SuiteError(f"--out {out}: white space in the name (the kit's launcher refuses it)")
    parent = out.parent
    if not parent.is_dir():
        raise SuiteError(f"--out {out}: {parent} is not a directory")
    try:  # a real write: access() says yes to root on a read-only or foreign file system
        fd, probe = tempfile.mkstemp(prefix=".mallocsweep-kit-probe-", dir=parent)
    except OSError as e:
        raise SuiteError(f"--out {out}: cannot write in {parent} ({e.strerror})") from None
    os.close(fd)
    os.unlink(probe)


def parse_request(out: str, servers: list[str] | None, which=shutil.which) -> KitRequest:
    path = Path(out).expanduser().absolute()
    chosen: list[str] = []
    for s in servers or [HOST]:
        canon = parse_server(s)
        if canon in chosen:
            raise SuiteError(f"--server {s!r}: given twice")
        chosen.append(canon)
    check_out(path)
    return KitRequest(out=path, servers=tuple(chosen), compression=compression_for(path, which))
