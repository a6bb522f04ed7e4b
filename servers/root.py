"""A server in a root: a directory holding another Linux release's files (a debootstrap'ed Debian,
an exported container image), whose server binary runs there under chroot.

Why a root: newer servers (MySQL 9.7 from Debian unstable, MariaDB 11.8 from Debian 13) need a
newer glibc than the host's, so they run on their own release's libraries.

How it runs: our exec helper (servers/exec/msexec.c, `--root`), keeping the server our direct
child with one pid through the one exec (collectors, wait4, the THP prctl and the launch gate rely
on it). After the gate, in C: unshare(CLONE_NEWNS), / made private (nothing propagates back to the
host), the directories the server must see bind-mounted INTO the root at the same path, /proc
mounted, chroot ROOT, chdir, then LD_PRELOAD (a path inside the root) is set and the server is
exec'ed. Nothing of the host (no shell, no unshare/chroot binaries) runs under the allocator.

So every path (work dir, datadir, socket, my.cnf) is the same inside and outside: the host's
sysbench reaches the unix socket by its usual path. The mounts live in a private mount namespace
that dies with the server (nothing in the host's /proc/mounts, even while it runs).

Seen from the host, /proc/PID/maps of the server names files by their host path (the root's
directory + the path inside), and /proc/PID/root is the root's directory, so /proc/PID/root/<path
inside> reaches a file for host and rooted servers alike.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from servers.errors import ServerError

# What open_root checks a root has: a shell's basic tools and a /proc to mount.
ENV_IN_ROOT = "/usr/bin/env"


@dataclass(frozen=True)
class ServerRoot:
    """A validated root directory and what it is (release, glibc)."""

    path: str  # absolute host path of the root directory
    release: str | None  # PRETTY_NAME of its /etc/os-release
    codename: str | None
    glibc: str | None  # upstream glibc version of its libc6 ("2.41")
    libc_package_version: str | None  # "2.41-12+deb13u5"

    def host(self, inside: str) -> str:
        """The host path of `inside` (an absolute path as seen in the root)."""
        return host_path(self.path, inside)

    def resolve(self, inside: str) -> str:
        """`inside` with every symlink resolved within the root (a path as seen in the root)."""
        return resolve_in_root(self.path, inside)

    def to_manifest(self) -> dict:
        return {
            "path": self.path,
            "release": self.release,
            "codename": self.codename,
            "glibc": self.glibc,
            "libc6": self.libc_package_version,
        }


def host_path(root: str, inside: str) -> str:
    if not inside.startswith("/"):
        raise ServerError(f"{inside!r}: a path inside a server root must be absolute")
    return os.path.join(root, inside.lstrip("/"))


def resolve_in_root(root: str, inside: str, _depth: int = 0) -> str:
    """Resolve symlinks of `inside` as the root would (an absolute link target is taken from the
    root, not the host; `..` never climbs out of it). Missing components are kept as they are."""
    parts = [p for p in inside.split("/") if p and p != "."]
    done: list[str] = []
    while parts:
        name = parts.pop(0)
        if name == "..":
            if done:
                done.pop()
            continue
        here = host_path(root, "/" + "/".join([*done, name]))
        if os.path.islink(here):
            if _depth > 40:
                raise ServerError(f"{inside}: too many levels of symbolic links in root {root}")
            target = os.readlink(here)
            base = "" if target.startswith("/") else "/" + "/".join(done)
            resolved = resolve_in_root(root, f"{base}/{target}", _depth + 1)
            done = [p for p in resolved.split("/") if p]
        else:
            done.append(name)
    return "/" + "/".join(done)


def _os_release(root: str) -> dict[str, str]:
    out = {}
    for name in ("/etc/os-release", "/usr/lib/os-release"):
        try:
            text = Path(host_path(root, resolve_in_root(root, name))).read_text()
        except OSError:
            continue
        for line in text.splitlines():
            key, sep, value = line.partition("=")
            if sep:
                out[key.strip()] = value.strip().strip('"')
        break
    return out


@lru_cache(maxsize=16)
def _dpkg_status(root: str, _mtime_ns: int) -> dict[str, str]:
    """Installed packages of the root: name (without :arch) -> version."""
    installed: dict[str, str] = {}
    text = Path(root, "var/lib/dpkg/status").read_text(errors="replace")
    for stanza in text.split("\n\n"):
        fields = dict(re.findall(r"^([A-Za-z-]+):[ \t]*(.*)$", stanza, re.M))
        if fields.get("Status", "").endswith(" installed") and "Package" in fields:
            installed[fields["Package"]] = fields.get("Version", "")
    return installed


def installed_packages(root: str) -> dict[str, str]:
    """Installed packages of the root from its dpkg database ({} when it has none)."""
    status = Path(root, "var/lib/dpkg/status")
    try:
        st = status.stat()
    except OSError:
        return {}
    return _dpkg_status(root, st.st_mtime_ns)


def package_of_in_root(root: str, inside: str) -> tuple[str, str] | None:
    """(package, version) of the root's dpkg package owning `inside`, found by file in its
    info/*.list (names differ between releases, e.g. the t64 transition), or None."""
    wanted = {inside, resolve_in_root(root, inside)}
    # usrmerge: dpkg may know /lib/... while the file is reached through /usr/lib/..., or back.
    wanted |= {p.removeprefix("/usr") for p in wanted if p.startswith("/usr/")}
    wanted |= {"/usr" + p for p in list(wanted) if not p.startswith("/usr/")}
    info = Path(root, "var/lib/dpkg/info")
    try:
        lists = sorted(info.glob("*.list"))
    except OSError:
        return None
    installed = installed_packages(root)
    for lst in lists:
        try:
            lines = lst.read_text(errors="replace").splitlines()
        except OSError:
            continue
        if wanted.intersection(lines):
            pkg = lst.name.removesuffix(".list").split(":")[0]
            if pkg in installed:
                return pkg, installed[pkg]
    return None


def open_root(path: str | os.PathLike) -> ServerRoot:
    """Check that `path` can hold a server (ServerError naming what is missing) and describe it."""
    root = os.path.abspath(os.fspath(path))
    if not os.path.isdir(root):
        raise ServerError(f"server root {root} is not a directory")
    if root == "/":
        raise ServerError("server root '/' is the host itself; give the server's binary instead")
    if os.geteuid() != 0:
        raise ServerError(
            f"server root {root}: running a server in a root needs chroot and mount "
            "namespaces: run as root"
        )
    for inside in (ENV_IN_ROOT, "/proc"):
        if not os.path.exists(host_path(root, resolve_in_root(root, inside))):
            raise ServerError(
                f"server root {root} has no {inside} (needed to start a server in it)"
            )
    rel = _os_release(root)
    glibc = None
    libc = None
    for pkg in ("libc6", "libc6.1", "libc6t64"):
        libc = installed_packages(root).get(pkg)
        if libc:
            m = re.match(r"(?:\d+:)?(\d+\.\d+)", libc)
            glibc = m.group(1) if m else None
            break
    return ServerRoot(
        path=root,
        release=rel.get("PRETTY_NAME"),
        codename=rel.get("VERSION_CODENAME"),
        glibc=glibc,
        libc_package_version=libc,
    )


def mount_points(root: str, dirs: list[str]) -> list[str]:
    """Create in the root the directories `dirs` will be bound onto; returns those created (deepest
    last) so that `remove_mount_points` can take exactly them away after the server is gone."""
    created = []
    for d in dirs:
        missing = []
        p = d
        while p not in ("/", "") and not os.path.isdir(host_path(root, p)):
            missing.append(p)
            p = os.path.dirname(p)
        for m in reversed(missing):
            try:
                os.mkdir(host_path(root, m))
            except FileExistsError:
                continue
            except OSError as e:
                raise ServerError(
                    f"server root {root}: cannot create the mount point {m}: {e.strerror}"
                ) from None
            created.append(m)
    return created


def remove_mount_points(root: str, created: list[str]) -> None:
    """Remove the empty mount points we created (deepest first); a non-empty one is left."""
    for m in reversed(created):
        try:
            os.rmdir(host_path(root, m))
        except OSError:
            pass


@dataclass(frozen=True)
class RootLaunch:
    """How a child runs in a root: the root's host path and the host directories bound into it at
    the same paths (servers.launch.spawn hands both to the exec helper)."""

    root: str
    binds: tuple[str, ...]


def rooted(root: str, binds: list[str]) -> RootLaunch:
    """`root` with `binds` (host directories) visible at the same paths inside it."""
    for b in binds:
        if not os.path.isabs(b) or b == "/" or "\n" in b:
            raise ServerError(
                f"cannot bind {b!r} into a server root: expected an absolute directory"
            )
    return RootLaunch(root, tuple(binds))
