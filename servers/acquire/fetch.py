"""Make a fetched server: a basedir on the host's libraries, or a minimal root of another release.

A version of the host's own release is unpacked (`dpkg-deb -x`) into a basedir: the server package,
its same-source dependencies at the same version, and the helpers its datadir tool needs. Any other
release gets a root (`debootstrap --variant=minbase`) with the server package and that release's
allocator packages installed by the root's own apt; it runs under chroot.

Everything is built in a hidden sibling directory (`.SPEC.partial-PID`) and renamed into place only
when complete, with its metadata (`fetched.json`) written last inside it: a fetch killed at any
point leaves nothing that `list` or `lookup` takes for a server. The next fetch removes such a
leftover once its builder is gone (and never across a mount still inside it).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from collectors.procfs import ProcFS
from rundir.atomic import atomic_write
from servers.acquire import archive
from servers.acquire.archive import Located, Package, ReleaseIndex, Spec
from servers.acquire.version_line import parse_version_output
from servers.allocators import glibc_version
from servers.errors import ServerError
from servers.exec_helper import helper_argv

META = "fetched.json"
META_VERSION = 1
_PARTIAL = re.compile(r"^\.(?P<spec>.+)\.partial-(?P<pid>\d+)$")
_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C", "DEBIAN_FRONTEND": "noninteractive"}
# Disk estimates (MB) beyond the packages' own Installed-Size: a minbase root measured 223 MB here
# (sid); apt's downloaded .debs are removed after installing, but need room meanwhile.
ROOT_BASE_MB = 300
# Installed size of the server and its dependencies in a root, measured: mysql-server-core 9.7.4
# with the allocators took a sid minbase root from 223 MB to 702 MB; the server package's own
# Installed-Size is about a third of what it pulls in.
ROOT_DEPS_FACTOR = 3
MARGIN_MB = 200

Progress = Callable[[str], None]


def servers_dir() -> Path:
    """MALLOCSWEEP_SERVERS, else the state directory's servers/ (MALLOCSWEEP_STATE, else
    $XDG_STATE_HOME or ~/.local/state, /mallocsweep)."""
    own = os.environ.get("MALLOCSWEEP_SERVERS")
    if own:
        return Path(own).expanduser().absolute()
    base = os.environ.get("MALLOCSWEEP_STATE") or os.path.join(
        os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state"), "mallocsweep"
    )
    return Path(base).absolute() / "servers"


@dataclass
class FetchedServer:
    spec: str
    flavor: str
    version: str  # upstream, e.g. "9.7.4"
    debian_version: str  # e.g. "9.7.4-2"
    release: str
    kind: str  # "basedir" | "root"
    path: str  # the basedir (its usr/ prefix) or the root directory
    binary: str  # for a root: the path inside it; for a basedir: the host path
    glibc: str
    allocators: dict = field(default_factory=dict)  # name -> {"package", "version"}
    packages: dict = field(default_factory=dict)  # server packages: name -> version
    size_bytes: int = 0
    created: str = ""
    format_version: int = META_VERSION

    @property
    def host_binary(self) -> Path:
        """Where the binary is on this machine's file system."""
        if self.kind == "root":
            return Path(self.path) / self.binary.lstrip("/")
        return Path(self.binary)

    def to_json(self) -> dict:
        return asdict(self)


def _meta_path(d: Path) -> Path:
    return d / META


def _read(d: Path) -> FetchedServer | None:
    try:
        data = json.loads(_meta_path(d).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    # A cache may be moved or copied (another state directory, a copied .cache): paths under the
    # server's own directory are taken from where its metadata is now, not where it was written.
    for key in ("path", "binary"):
        inside = str(data.get(key) or "").split(f"/{d.name}/", 1)
        if len(inside) == 2 and not str(data[key]).startswith(f"{d}/"):
            if key == "path" or data.get("kind") == "basedir":
                data[key] = str(d / inside[1])
    try:
        return FetchedServer(**data)
    except TypeError:
        return None


def _server_dirs() -> list[Path]:
    """Every fetched server's directory (hidden ones are the cache's own: locks, the minbase)."""
    base = servers_dir()
    if not base.is_dir():
        return []
    return [d for d in sorted(base.iterdir()) if not d.name.startswith(".") and d.is_dir()]


def list_fetched() -> list[FetchedServer]:
    """Every fetched server that can run (damaged ones: list_damaged)."""
    return [_read(d) for d in _server_dirs() if damage(d) is None]


def damage(d: Path) -> str | None:
    """Why the fetched server directory `d` cannot run, or None: its metadata missing or
    unreadable, or the server binary it names gone (a root half-removed, a cache copied in part).
    Such a directory once vanished from `servers list` and `run` called it "not fetched"."""
    if not _meta_path(d).is_file():
        return f"no {META} (not made by a complete fetch, or damaged since)"
    s = _read(d)
    if s is None:
        return f"{META} is unreadable or not a fetched server's metadata"
    if not s.host_binary.is_file():
        return f"its server binary {s.host_binary} is missing"
    return None


def repair_command(d: Path) -> str:
    """What makes a damaged fetched server whole again: the directory is ours (made by fetch,
    never the user's files), removed and fetched again."""
    return f"rm -rf {shlex.quote(str(d))} && mallocsweep servers fetch {shlex.quote(d.name)}"


def list_damaged() -> list[tuple[str, Path, str]]:
    """(spec, directory, why) of every fetched server directory that cannot run."""
    return [(d.name, d, why) for d in _server_dirs() if (why := damage(d))]


def lookup(spec: str) -> FetchedServer:
    """The fetched server for SPEC; ServerError when it has not been fetched, or is damaged
    (with the command that repairs it)."""
    parsed = archive.parse_spec(spec)
    d = servers_dir() / str(parsed)
    if d.is_dir():
        why = damage(d)
        if why:
            raise ServerError(
                f"{parsed} is fetched but damaged in {d}: {why}; repair it: {repair_command(d)}"
            )
    s = _read(d)
    if s is None:
        raise ServerError(f"{parsed} is not fetched: run `mallocsweep servers fetch {parsed}`")
    return s


# -- preflight -------------------------------------------------------------------------------
def need_mb(kind: str, pkgs: list[Package]) -> int:
    """Disk the fetch needs, estimated from the packages' Installed-Size (KiB)."""
    installed = sum(p.installed_size_kb for p in pkgs) / 1024
    if kind == "root":
        return int(ROOT_BASE_MB + ROOT_DEPS_FACTOR * installed + MARGIN_MB)
    # a basedir: the .debs (about a third of installed) and the unpacked files
    return int(1.4 * installed + MARGIN_MB)


def check_disk(where: Path, needed_mb: int, free_mb: int | None = None) -> None:
    if free_mb is None:
        st = os.statvfs(where)
        free_mb = st.f_bavail * st.f_frsize // (1024 * 1024)
    if free_mb < needed_mb:
        raise ServerError(
            f"not enough disk for the fetch in {where}: about {needed_mb} MB needed, {free_mb} MB "
            "free (set MALLOCSWEEP_SERVERS to a larger file system)"
        )


def check_root_tools(euid: int | None = None) -> None:
    if (os.geteuid() if euid is None else euid) != 0:
        raise ServerError(
            "a server root needs debootstrap and chroot: run as root (sudo mallocsweep servers "
            "fetch ...)"
        )
    if shutil.which("debootstrap", path=_ENV["PATH"]) is None:
        raise ServerError("debootstrap is not installed: apt-get install debootstrap")


# -- leftovers ---------------------------------------------------------------------------------
def mounts_under(d: Path, mountinfo: Path = Path("/proc/self/mountinfo")) -> list[str]:
    prefix = str(d.resolve()).rstrip("/") + "/"
    out = []
    try:
        for line in mountinfo.read_text(encoding="utf-8").splitlines():
            mp = line.split()[4].replace("\\040", " ")
            if mp.startswith(prefix):
                out.append(mp)
    except OSError:
        pass
    return out


def _remove_partial(d: Path) -> None:
    """Remove a build directory; mounts a killed debootstrap left inside it are undone first
    (deepest first), so rmtree never walks into /proc or /sys."""
    for mp in sorted(mounts_under(d), key=len, reverse=True):
        subprocess.run(["umount", mp], check=False, capture_output=True)
    left = mounts_under(d)
    if left:
        raise ServerError(f"cannot remove {d}: {left[0]} is still mounted inside it")
    shutil.rmtree(d, ignore_errors=True)


def _builder_runs(pid: int, d: Path) -> bool:
    """The build's process still runs, and is the one that wrote `d` (not a later process given
    its pid: collectors.procfs.ProcFS.alive)."""
    try:
        written = d.stat().st_mtime
    except OSError:
        return False
    return ProcFS().alive(pid, running_at=written)


def clean_leftovers(base: Path) -> list[Path]:
    """Partial builds whose builder process is gone (a fetch killed by SIGKILL)."""
    removed = []
    if not base.is_dir():
        return removed
    for d in base.iterdir():
        m = _PARTIAL.match(d.name)
        if m and int(m.group("pid")) != os.getpid() and not _builder_runs(int(m.group("pid")), d):
            _remove_partial(d)
            removed.append(d)
    return removed


# -- running the tools -------------------------------------------------------------------------
def _run(
    argv: list[str],
    log: Path,
    what: str,
    timeout: float = 1800,
    cwd: Path | None = None,
    watch: Progress | None = None,
) -> None:
    """Run a build step in its own process group, output to `log`; `watch` gets the tool's latest
    output line as it changes (the progress display). On any exception (SIGINT, timeout) the whole
    group is killed and waited for: no dpkg/apt/debootstrap outlives us."""
    with open(log, "ab") as out:
        out.write(f"\n$ {' '.join(argv)}\n".encode())
        out.flush()
        start = out.tell()
        if shutil.which(argv[0], path=_ENV.get("PATH")) is None:
            raise ServerError(f"{argv[0]} not found (needed to {what})")
        # Through the exec helper: its own process group, and killed if we are (SIGKILL).
        p = subprocess.Popen(
            helper_argv(argv, parent=os.getpid(), death_signal=signal.SIGKILL, gate=False),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=_ENV,
            cwd=cwd,
            process_group=0,
        )
        try:
            rc = _wait(p, time.monotonic() + timeout, log, start, watch)
        finally:
            if p.returncode is None:  # interrupted, or past its time: the whole group goes
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait()
    if rc is None:
        raise ServerError(f"{what} did not finish in {timeout:.0f}s; see {log}")
    if rc != 0:
        lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
        raise ServerError(f"{what} failed (status {rc}): {lines[-1] if lines else ''}; see {log}")


def _wait(
    p: subprocess.Popen, deadline: float, log: Path, start: int, watch: Progress | None
) -> int | None:
    """The exit status, or None at the deadline (the caller kills the group)."""
    last = ""
    while True:
        try:
            return p.wait(timeout=0.5)
        except subprocess.TimeoutExpired:
            if time.monotonic() > deadline:
                return None
        if watch is not None:
            with open(log, "rb") as f:
                f.seek(max(start, f.seek(0, os.SEEK_END) - 4096))
                lines = [ln for ln in f.read().decode(errors="replace").splitlines() if ln.strip()]
            if lines and lines[-1] != last:
                last = lines[-1]
                watch(last.strip()[:120])


def _chroot(
    root: Path,
    argv: list[str],
    log: Path,
    what: str,
    timeout: float = 1800,
    watch: Progress | None = None,
) -> None:
    _run(["chroot", str(root), *argv], log, what, timeout, watch=watch)


def parse_dpkg_status(text: str) -> dict[str, str]:
    """Installed packages -> version, from a dpkg status file."""
    out = {}
    for p in archive.parse_packages(text):
        if "installed" in p.fields.get("Status", "").split():
            out[p.name] = p.version
    return out


def glibc_of(installed: dict[str, str]) -> str:
    v = installed.get("libc6")
    return archive.upstream_version(v) if v else ""


def dir_size(d: Path) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(d):
        for f in files:
            try:
                st = os.lstat(os.path.join(dirpath, f))
            except OSError:
                continue
            total += st.st_blocks * 512
    return total


def _version_line(argv: list[str]) -> str:
    try:
        p = subprocess.run(
            argv, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, env=_ENV
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"failed: {e}"
    return (
        (p.stdout + p.stderr).strip().splitlines()[0]
        if (p.stdout + p.stderr).strip()
        else f"status {p.returncode}"
    )


def check_runs(s: FetchedServer) -> tuple[bool, str]:
    """Can it start, as far as a look can tell: the binary is there and `--version` runs (under
    chroot for a root) and names the fetched version."""

    if not s.host_binary.is_file():
        return False, f"binary {s.host_binary} is missing"
    if s.kind == "root":
        if os.geteuid() != 0:
            return False, "chroot needs root: run as root"
        argv = ["chroot", s.path, s.binary, "--no-defaults", "--version"]
    else:
        argv = [s.binary, "--no-defaults", "--version"]
    line = _version_line(argv)
    try:
        flavor, version, vs = parse_version_output(line)
    except ValueError:
        return False, f"`{' '.join(argv)}` printed {line[:120]!r}"
    if (flavor, version) != (s.flavor, s.version):
        return False, f"binary says {flavor} {version}, metadata says {s.flavor} {s.version}"
    return True, vs


# -- the fetch ---------------------------------------------------------------------------------
def locate(spec: Spec, cache: Path, say: Progress) -> tuple[Located, dict[str, ReleaseIndex]]:
    order = archive.release_order(archive.host_release())
    idx = {r: ReleaseIndex(r, cache / r) for r in order}
    found: dict[str, list[Package]] = {}
    for r, ix in idx.items():
        say(f"reading {r}'s package index" + ("" if ix.fresh() else " (downloading)"))
        ix.update()
        found[r] = ix.show(archive.SERVER_PACKAGES[spec.flavor])
    return archive.choose(spec, found), idx


def fetch(
    spec_text: str,
    say: Progress = lambda _m: None,
    host_release: str | None = None,
    detail: Progress | None = None,
) -> FetchedServer:
    """Fetch SPEC if it is not fetched yet; returns its metadata. Idempotent. `say` gets each
    step, `detail` the build tools' latest output line (for a live status, not a log)."""
    spec = archive.parse_spec(spec_text)
    base = servers_dir()
    final = base / str(spec)
    done = _read(final)
    if done is not None:
        say(f"{spec} is already fetched in {final}")
        return done
    if final.exists():
        raise ServerError(
            f"{final} exists but holds no {META}: not made by a complete fetch; remove it first"
        )
    base.mkdir(parents=True, exist_ok=True)
    # One fetch at a time per cache: they share the private apt state, and a second fetch of the
    # same SPEC must find the first one's result rather than build it again.
    with open(base / ".lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say(f"waiting for another `mallocsweep servers fetch` in {base}")
            fcntl.flock(lock, fcntl.LOCK_EX)
        done = _read(final)
        if done is not None:
            say(f"{spec} was fetched meanwhile in {final}")
            return done
        return _fetch_locked(spec, base, final, say, host_release, detail)


def _fetch_locked(
    spec: Spec,
    base: Path,
    final: Path,
    say: Progress,
    host_release: str | None,
    detail: Progress | None,
) -> FetchedServer:
    for d in clean_leftovers(base):
        say(f"removed an unfinished fetch: {d}")
    host = host_release or archive.host_release()
    located, idx = locate(spec, base / ".archive", say)
    kind = "basedir" if located.release == host else "root"
    if kind == "root":
        check_root_tools()
    ix = idx[located.release]
    server_pkgs = _same_source_set(ix, located)
    check_disk(base, need_mb(kind, server_pkgs))
    tmp = base / f".{spec}.partial-{os.getpid()}"
    if tmp.exists():
        _remove_partial(tmp)
    tmp.mkdir()
    try:
        if kind == "basedir":
            meta = _make_basedir(located, ix, server_pkgs, tmp, final, say)
        else:
            meta = _make_root(located, ix, tmp, final, say, detail)
        say("measuring its size")
        meta.size_bytes = dir_size(tmp)
        meta.created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        body = json.dumps(meta.to_json(), indent=2) + "\n"
        atomic_write(tmp / META, body)
        os.rename(tmp, final)
    except ServerError as e:
        # The build directory goes; its log stays beside the servers for the user to read.
        kept = base / f"{spec}.failed.log"
        if (tmp / "fetch.log").is_file():
            shutil.copyfile(tmp / "fetch.log", kept)
        _remove_partial(tmp)
        raise ServerError(str(e).replace(str(tmp / "fetch.log"), str(kept))) from None
    except BaseException:
        _remove_partial(tmp)
        raise
    (base / f"{spec}.failed.log").unlink(missing_ok=True)
    return meta


def _same_source_set(ix: ReleaseIndex, located: Located) -> list[Package]:
    names = [*located.package.depends, *archive.INIT_HELPERS[located.spec.flavor]]
    return same_source_set(located.package, ix.show(*names) if names else [])


def client_pins(
    pkg: Package, flavor: str, candidates: list[Package]
) -> tuple[list[str], list[str]]:
    """(what to install, what the release lacks) of the flavor's clients (archive.CLIENTS) for
    server package `pkg`: a client built from the server's source is pinned to the server's
    version (a dump client of another version may refuse the server or dump it differently);
    one from another source is left to apt; a name the release does not have is named, not
    installed (apt would fail the whole root for it)."""
    pins, missing = [], []
    for name in archive.CLIENTS.get(flavor, ()):
        same = [p for p in candidates if p.name == name]
        if not same:
            missing.append(name)
        elif any(p.source == pkg.source and p.version == pkg.version for p in same):
            pins.append(f"{name}={pkg.version}")
        else:
            pins.append(name)
    return pins, missing


def same_source_set(pkg: Package, candidates: list[Package]) -> list[Package]:
    """The server package, and those of `candidates` built from the same source at the same
    version: its version-locked dependencies (which the host's own packages cannot stand in for)
    and the datadir tool's helpers. Host libraries (libc6, libssl3, ...) are left to the host."""
    out = [pkg]
    for p in candidates:
        if (
            p.source == pkg.source
            and p.version == pkg.version
            and p.name not in {o.name for o in out}
        ):
            out.append(p)
    return out


def _make_basedir(
    located: Located, ix: ReleaseIndex, pkgs: list[Package], tmp: Path, final: Path, say: Progress
) -> FetchedServer:

    debs = tmp / "debs"
    debs.mkdir()
    log = tmp / "fetch.log"
    pins = [f"{p.name}={p.version}" for p in pkgs]
    say(f"downloading {', '.join(pins)} from {located.release}")
    _run(["apt-get", "-q", *ix.options(), "download", *pins], log, "apt-get download", cwd=debs)
    unpacked = tmp / "basedir"
    for deb in sorted(debs.glob("*.deb")):
        say(f"unpacking {deb.name}")
        _run(["dpkg-deb", "-x", str(deb), str(unpacked)], log, f"dpkg-deb -x {deb.name}")
    shutil.rmtree(debs)
    rel_binary = archive.BINARIES[located.spec.flavor].lstrip("/")
    if not (unpacked / rel_binary).is_file():
        raise ServerError(f"{located.package.name} {located.package.version} has no /{rel_binary}")
    say("checking the server runs on the host's libraries")
    line = _version_line([str(unpacked / rel_binary), "--no-defaults", "--version"])
    if located.spec.version not in line:
        raise ServerError(f"the unpacked {rel_binary} does not run here: {line[:160]}")
    if located.spec.flavor == "mariadb":
        say("checking mariadb-install-db makes a datadir from the basedir")
        scratch = tmp / "init-check"
        _run(
            [
                str(unpacked / "usr/bin/mariadb-install-db"),
                "--no-defaults",
                f"--basedir={unpacked / 'usr'}",
                f"--datadir={scratch}",
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
                "--skip-name-resolve",
            ],
            log,
            "making a datadir with the basedir's mariadb-install-db",
            timeout=600,
        )
        shutil.rmtree(scratch)
    return FetchedServer(
        spec=str(located.spec),
        flavor=located.spec.flavor,
        version=located.spec.version,
        debian_version=located.package.version,
        release=located.release,
        kind="basedir",
        path=str(final / "basedir" / "usr"),
        binary=str(final / "basedir" / rel_binary),
        glibc=glibc_version() or "",
        allocators={},  # the host's allocators (mallocsweep allocators)
        packages={p.name: p.version for p in pkgs},
    )


def _check_initialises(root: Path, flavor: str, binary: str, log: Path) -> None:
    """Make a throw-away datadir inside the root with the flavor's own tool, then remove it."""
    scratch = root / "tmp" / f"mallocsweep-init-{os.getpid()}"
    inside = f"/tmp/{scratch.name}"
    if flavor == "mariadb":
        argv = [
            "/usr/bin/mariadb-install-db",
            "--no-defaults",
            "--user=root",
            f"--datadir={inside}",
            "--auth-root-authentication-method=normal",
            "--skip-test-db",
            "--skip-name-resolve",
        ]
    else:
        argv = [
            binary,
            "--no-defaults",
            "--initialize-insecure",
            "--user=root",
            f"--datadir={inside}",
        ]
    try:
        _chroot(
            root, argv, log, f"making a datadir in the root ({Path(argv[0]).name})", timeout=600
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _make_root(
    located: Located,
    ix: ReleaseIndex,
    tmp: Path,
    final: Path,
    say: Progress,
    detail: Progress | None = None,
) -> FetchedServer:
    allocs, missing = ix.allocator_packages()
    if missing:
        pats = ", ".join(f"{a} ({archive.ALLOCATOR_PACKAGES[a].pattern})" for a in missing)
        raise ServerError(f"Debian {located.release} has no package for allocator {pats}")
    root = tmp / "root"
    log = tmp / "fetch.log"
    say(f"creating a minimal {located.release} root (debootstrap --variant=minbase)")
    _run(
        [
            "debootstrap",
            "--variant=minbase",
            f"--keyring={archive.KEYRING}",
            located.release,
            str(root),
            f"{ix.mirror}/debian",
        ],
        log,
        "debootstrap",
        watch=detail,
    )
    # The root's apt sees the same suites as our index, and ignores the expired Valid-Until.
    (root / "etc/apt/sources.list").write_text(
        "\n".join(ln.replace(f"[signed-by={archive.KEYRING}] ", "") for ln in ix.sources_lines())
        + "\n"
    )
    (root / "etc/apt/apt.conf.d/99mallocsweep").write_text(
        'Acquire::Check-Valid-Until "false";\nAcquire::Languages "none";\n'
    )
    # debootstrap leaves no /etc/hosts; mariadb-install-db (11.8) resolves localhost even with
    # --skip-name-resolve and gives up without it.
    hosts = root / "etc/hosts"
    if not hosts.exists():
        hosts.write_text("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")
    # No package's maintainer script may start a service inside the root.
    policy = root / "usr/sbin/policy-rc.d"
    policy.write_text("#!/bin/sh\nexit 101\n")
    policy.chmod(0o755)
    say(f"apt-get update inside the {located.release} root")
    _chroot(root, ["apt-get", "-q", "update"], log, "apt-get update in the root")
    pins = [f"{located.package.name}={located.package.version}"]
    pins += [p.name for p in allocs.values()]
    pins += list(archive.INIT_HELPERS[located.spec.flavor])
    clients = archive.CLIENTS.get(located.spec.flavor, ())
    more, lacking = client_pins(
        located.package, located.spec.flavor, ix.show(*clients) if clients else []
    )
    pins += [p for p in more if p.split("=")[0] not in pins]
    if lacking:
        say(f"Debian {located.release} has no {', '.join(lacking)}: the root has no such client")
    say(f"installing {', '.join(pins)} in the root")
    _chroot(
        root,
        ["apt-get", "-q", "-y", "--no-install-recommends", "install", *pins],
        log,
        "apt-get install in the root",
        watch=detail,
    )
    _chroot(root, ["apt-get", "clean"], log, "apt-get clean in the root")
    policy.unlink()
    installed = parse_dpkg_status((root / "var/lib/dpkg/status").read_text(errors="replace"))
    binary = archive.BINARIES[located.spec.flavor]
    if not (root / binary.lstrip("/")).is_file():
        raise ServerError(f"{located.package.name} installed no {binary} in the root")
    say("checking the server runs inside the root")
    line = _version_line(["chroot", str(root), binary, "--no-defaults", "--version"])
    if located.spec.version not in line:
        raise ServerError(f"{binary} does not run inside the root: {line[:160]}")
    say("checking the root holds what the server needs to make a datadir")
    _check_initialises(root, located.spec.flavor, binary, log)
    server_pkgs = {
        n: v
        for n, v in installed.items()
        if n == located.package.name or n in archive.INIT_HELPERS[located.spec.flavor]
    }
    return FetchedServer(
        spec=str(located.spec),
        flavor=located.spec.flavor,
        version=located.spec.version,
        debian_version=installed.get(located.package.name, located.package.version),
        release=located.release,
        kind="root",
        path=str(final / "root"),
        binary=binary,
        glibc=glibc_of(installed),
        allocators={
            a: {"package": p.name, "version": installed.get(p.name, "")} for a, p in allocs.items()
        },
        packages=server_pkgs,
    )
