"""`mallocsweep kit build`: one archive that runs the suites on a host with nothing installed.

The archive unpacks to one directory:

    NAME/mallocsweep      the launcher (suites/kit/launcher.sh): chroots into root/ and runs the tool
    NAME/kit.json         the kit's manifest: every component's version and sha256 (manifest.py)
    NAME/SHA256SUMS       the same checksums for `sha256sum -c` (and `NAME/mallocsweep verify`)
    NAME/suites -> root/opt/mallocsweep/suites   the shipped suites
    NAME/root/            a minimal Debian root of this host's release (servers/acquire/minbase.py)
                          with python3, the tool in a venv (/opt/mallocsweep/venv, installed from
                          a wheel of this checkout, not editable), sysbench, every allocator
                          package of the release, the exec helper and the preload shims already
                          built, and the chosen servers: Debian's mariadb-server for `host`, a
                          fetched server (basedir or root) copied to /var/lib/mallocsweep/servers
                          for `fetched:SPEC`.

Why a root of the host's release: the wheel (numpy, scipy, mysqlclient built here), the helper and
the shims are built on this host against its glibc and Python, so they run in a root of the same
release unchanged; the root's own apt installs the Debian packages at the versions the release has.

Everything is assembled in a hidden directory under the cache (never in the user's --out
directory) and the archive is written next to --out under a temporary name, then linked to --out
exclusively: an existing file is never replaced, and a build killed at any point leaves no
archive under the name asked for.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rundir.format import OWNER_MARKER
from rundir.records import Tool
from servers import exec_helper, prebuilt
from servers.acquire import archive, fetch, minbase
from servers.acquire.fetch import _remove_partial, _run, clean_leftovers
from servers.allocators import detect_in_root, load_registry
from servers.cachedir import cache_base
from servers.errors import ServerError
from servers.root import open_root, package_of_in_root
from suites.errors import SuiteError
from suites.kit import manifest as km
from suites.kit.request import HOST, KitRequest

Progress = Callable[[str], None]
INSIDE = "/opt/mallocsweep"  # the tool's venv, its wheel, the suites and kit.json in the root
SERVERS_INSIDE = "/var/lib/mallocsweep/servers"  # MALLOCSWEEP_STATE=/var/lib/mallocsweep in a kit
SHIMS_INSIDE = "/var/cache/mallocsweep/shims"  # MALLOCSWEEP_CACHE=/var/cache/mallocsweep
# Debian packages of the root beyond the allocators (whose names the release's index decides):
# the interpreter and venv, the load client, the client library mysqlclient's wheel links, and
# util-linux's mount (not in minbase; the launcher runs the kit's own mount on the host).
BASE_PACKAGES = ("python3", "python3-venv", "sysbench", "libmariadb3", "mount")
HOST_SERVER_PACKAGES = ("mariadb-server",)
LAUNCHER = Path(__file__).with_name("launcher.sh")
MSEXEC_FLAGS = ("-O2", "-Wall", "-Wextra", "-Werror")  # as the Makefile builds it


@dataclass
class BuildResult:
    out: Path
    size_bytes: int
    seconds: float
    manifest: km.KitManifest


def source_tree() -> Path:
    """The checkout this mallocsweep runs from: the wheel is `pip wheel .` of it."""
    here = Path(__file__).resolve().parents[2]
    if not (here / "pyproject.toml").is_file() or not (here / "suites").is_dir():
        raise SuiteError(
            "kit build makes the tool's wheel from a source checkout (pip wheel .): run it from "
            f"a clone's environment (make setup); {here} holds none"
        )
    return here


def _staging_base() -> Path:
    return cache_base() / "kit-build"


def build(req: KitRequest, say: Progress = lambda _m: None) -> BuildResult:
    t0 = time.monotonic()
    fetch.check_root_tools()
    src = source_tree()
    release = archive.host_release()
    if release not in archive.RELEASES:
        raise SuiteError(
            f"kit build makes a root of this host's Debian release; {release!r} is not one "
            f"mallocsweep knows ({', '.join(archive.RELEASES)})"
        )
    fetched = [fetch.lookup(s) for s in req.fetched_specs]  # unfetched: one line, before work
    base = _staging_base()
    base.mkdir(parents=True, exist_ok=True)
    for d in clean_leftovers(base):
        say(f"removed an unfinished kit build: {d}")
    staging = base / f".{req.dirname}.partial-{os.getpid()}"
    if staging.exists():
        _remove_partial(staging)
    staging.mkdir()
    try:
        kit = staging / req.dirname
        kit.mkdir()
        log = staging / "build.log"
        root = minbase.copy_root(release, kit / "root", say)
        ix = archive.ReleaseIndex(release, fetch.servers_dir() / ".archive" / release)
        ix.update()
        allocs = _install_packages(root, ix, req, log, say)
        wheel = _install_tool(root, src, staging, log, say)
        _build_binaries(root, src, log, say)
        for s in fetched:
            _copy_server(root, s, say)
        _ship_suites(root, kit, src)
        launcher = kit / "mallocsweep"
        shutil.copyfile(LAUNCHER, launcher)
        launcher.chmod(0o755)
        _tidy(root)
        say("checking the tool runs inside the root")
        _check_tool(root, log)
        man = _manifest(kit, root, req, wheel, allocs, fetched, src, release)
        man.write(kit)
        os.link(kit / km.FILE, root / INSIDE.lstrip("/") / km.FILE)
        _write_sums(kit, man)
        say(f"writing {req.out} ({req.compression})")
        _archive(staging, req, log)
    except BaseException:
        _remove_partial(staging)
        raise
    _remove_partial(staging)
    return BuildResult(req.out, req.out.stat().st_size, time.monotonic() - t0, man)


def _chroot(root: Path, argv: list[str], log: Path, what: str, timeout: float = 1800) -> None:
    _run(["chroot", str(root), *argv], log, what, timeout)


def _install_packages(
    root: Path, ix: archive.ReleaseIndex, req: KitRequest, log: Path, say: Progress
) -> dict[str, archive.Package]:
    """The release's packages into the root by its own apt (as a fetched server's root is made)."""
    allocs, missing = ix.allocator_packages()
    if missing:
        raise ServerError(f"Debian {ix.release} has no package for allocator {', '.join(missing)}")
    (root / "etc/apt/sources.list").write_text(
        "\n".join(ln.replace(f"[signed-by={archive.KEYRING}] ", "") for ln in ix.sources_lines())
        + "\n"
    )
    (root / "etc/apt/apt.conf.d/99mallocsweep").write_text(
        'Acquire::Check-Valid-Until "false";\nAcquire::Languages "none";\n'
    )
    hosts = root / "etc/hosts"
    if not hosts.exists():  # debootstrap writes none; the servers resolve localhost
        hosts.write_text("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")
    policy = root / "usr/sbin/policy-rc.d"  # no maintainer script starts a service in the root
    policy.write_text("#!/bin/sh\nexit 101\n")
    policy.chmod(0o755)
    say(f"apt-get update inside the {ix.release} root")
    _chroot(root, ["apt-get", "-q", "update"], log, "apt-get update in the kit's root")
    pkgs = [*BASE_PACKAGES, *(p.name for p in allocs.values())]
    if HOST in req.servers:
        pkgs += HOST_SERVER_PACKAGES
    say(f"installing {', '.join(pkgs)} in the root")
    _chroot(
        root,
        ["apt-get", "-q", "-y", "--no-install-recommends", "install", *pkgs],
        log,
        "apt-get install in the kit's root",
    )
    _chroot(root, ["apt-get", "clean"], log, "apt-get clean in the kit's root")
    policy.unlink()
    return allocs


def _install_tool(root: Path, src: Path, staging: Path, log: Path, say: Progress) -> Path:
    """A wheel of the checkout and of every dependency (built here: PyPI is reachable at build
    time only), installed into a venv inside the root with no index. Returns the tool's wheel
    (kept in the root: the manifest's checksum names it)."""
    wheels = staging / "wheels"
    say("building the tool's wheel and its dependencies' (pip wheel .)")
    _run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--wheel-dir", str(wheels), str(src)],
        log,
        "pip wheel",
        timeout=3600,
    )
    own = sorted(wheels.glob("mallocsweep-*.whl"))
    if len(own) != 1:
        raise ServerError(f"pip wheel made {len(own)} mallocsweep wheels in {wheels}; see {log}")
    inside = root / "tmp" / "mallocsweep-wheels"
    shutil.copytree(wheels, inside)
    venv = f"{INSIDE}/venv"
    say(f"installing the tool into {venv} inside the root (no index)")
    _chroot(root, ["python3", "-m", "venv", venv], log, "python3 -m venv in the kit's root")
    _chroot(
        root,
        [
            f"{venv}/bin/pip",
            "install",
            "-q",
            "--no-index",
            "--no-cache-dir",
            "--find-links",
            "/tmp/mallocsweep-wheels",
            "mallocsweep",
        ],
        log,
        "pip install in the kit's root",
    )
    keep = root / INSIDE.lstrip("/") / "wheels"
    keep.mkdir(parents=True)
    wheel = keep / own[0].name
    shutil.copyfile(own[0], wheel)
    shutil.rmtree(inside)
    return wheel


def _build_binaries(root: Path, src: Path, log: Path, say: Progress) -> None:
    """The exec helper where the venv's tool looks first (exec_helper.helper: sys.prefix's
    libexec), and the preload shims into the kit's cache under the names the tool asks for (the
    source's hash): the target needs no compiler. Built here, on the root's release."""
    say("building the exec helper and the preload shims")
    helper = root / INSIDE.lstrip("/") / "venv/libexec/mallocsweep/msexec"
    helper.parent.mkdir(parents=True, exist_ok=True)
    _run(
        ["gcc", *MSEXEC_FLAGS, "-o", str(helper), str(exec_helper.SOURCE)],
        log,
        "building the exec helper",
    )
    shims = root / SHIMS_INSIDE.lstrip("/")
    shims.mkdir(parents=True, exist_ok=True)
    (shims / OWNER_MARKER).write_text("mallocsweep cache: shims\n")
    prebuilt.build_all(shims)


def _copy_server(root: Path, s: fetch.FetchedServer, say: Progress) -> None:
    src = fetch.servers_dir() / s.spec
    dest = root / SERVERS_INSIDE.lstrip("/") / s.spec
    dest.parent.mkdir(parents=True, exist_ok=True)
    say(f"copying the fetched server {s.spec} ({s.kind}) into the root")
    p = subprocess.run(["cp", "-a", "--", str(src), str(dest)], capture_output=True, text=True)
    if p.returncode != 0:
        raise ServerError(f"copying {src} into the kit failed: {p.stderr.strip()[-200:]}")


def _ship_suites(root: Path, kit: Path, src: Path) -> None:
    suites = root / INSIDE.lstrip("/") / "suites"
    suites.mkdir(parents=True, exist_ok=True)
    for f in sorted((src / "configs" / "suites").glob("*.toml")):
        shutil.copyfile(f, suites / f.name)
    (kit / "suites").symlink_to(f"root{INSIDE}/suites")


def _tidy(root: Path) -> None:
    """What the root does not need at run time: apt's indexes (the target has no network), the
    datadir mariadb-server's maintainer script made (114 MB; the tool makes its own datadirs),
    the build's scratch files."""
    shutil.rmtree(root / "var/lib/mysql", ignore_errors=True)
    lists = root / "var/lib/apt/lists"
    for f in lists.glob("*"):
        if f.is_file() and f.name != "lock":
            f.unlink()
    for f in (root / "tmp").iterdir():
        if f.is_dir() and not f.is_symlink():
            shutil.rmtree(f)
        else:
            f.unlink()


def _check_tool(root: Path, log: Path) -> None:
    _chroot(
        root,
        ["/usr/bin/env", "-i", "PATH=/usr/bin:/bin", f"{INSIDE}/venv/bin/mallocsweep", "--version"],
        log,
        "mallocsweep --version in the kit's root",
        timeout=600,
    )


def _git_commit(src: Path) -> str | None:
    try:
        p = subprocess.run(
            ["git", "-C", str(src), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return p.stdout.strip() or None


def _manifest(
    kit: Path,
    root: Path,
    req: KitRequest,
    wheel: Path,
    allocs: dict[str, archive.Package],
    fetched: list[fetch.FetchedServer],
    src: Path,
    release: str,
) -> km.KitManifest:
    def pkg(path_inside: str) -> tuple[str | None, str | None]:
        owner = package_of_in_root(str(root), path_inside)
        return (owner[0], owner[1]) if owner else (None, None)

    tool_version = Tool.installed().version or "unknown"
    comps = [
        km.component(kit, "tool", "mallocsweep", wheel, version=tool_version),
        km.component(kit, "launcher", "mallocsweep", kit / "mallocsweep", version=tool_version),
    ]
    py = root / "usr/bin" / Path(os.readlink(root / "usr/bin/python3")).name
    name, ver = pkg(f"/usr/bin/{py.name}")
    comps.append(km.component(kit, "python", py.name, py, version=ver, package=name))
    comps.append(
        km.component(
            kit,
            "helper",
            "msexec",
            root / INSIDE.lstrip("/") / "venv/libexec/mallocsweep/msexec",
            version=tool_version,
        )
    )
    for built in sorted((root / SHIMS_INSIDE.lstrip("/")).iterdir()):
        if built.is_file() and built.name != OWNER_MARKER:
            kind = "shim" if built.suffix == ".so" else "helper"  # the call-cost program
            name = built.stem.rsplit("-", 1)[0]
            comps.append(km.component(kit, kind, name, built, version=tool_version))
    sroot = open_root(root)
    for spec in load_registry().values():
        a = detect_in_root(spec, sroot)
        path = a.library if a.kind == "preload" else None
        if a.kind == "system":
            path = next(
                (sroot.resolve(p) for p in spec.identity if (root / p.lstrip("/")).is_file()),
                None,
            )
        if not a.usable or path is None:
            continue
        comps.append(
            km.component(
                kit,
                "allocator",
                a.name,
                root / path.lstrip("/"),
                version=a.version,
                package=a.package,
            )
        )
    name, ver = pkg("/usr/bin/sysbench")
    comps.append(km.component(kit, "sysbench", "sysbench", root / "usr/bin/sysbench", ver, name))
    if HOST in req.servers:
        binary = root / archive.BINARIES["mariadb"].lstrip("/")
        name, ver = pkg(archive.BINARIES["mariadb"])
        comps.append(km.component(kit, "server", HOST, binary, version=ver, package=name))
    for s in fetched:
        copied = root / SERVERS_INSIDE.lstrip("/") / s.spec
        binary = (
            copied / "root" / s.binary.lstrip("/")
            if s.kind == "root"
            else copied / Path(s.binary).relative_to(fetch.servers_dir() / s.spec)
        )
        comps.append(
            km.component(
                kit,
                "server",
                f"fetched:{s.spec}",
                binary,
                version=s.debian_version,
                package=archive.SERVER_PACKAGES[s.flavor],
            )
        )
    return km.KitManifest(
        name=req.dirname,
        tool_version=tool_version,
        release=release,
        built_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        servers=list(req.servers),
        components=comps,
        source_commit=_git_commit(src),
    )


def _write_sums(kit: Path, man: km.KitManifest) -> None:
    # one line per file (allocator variants share their base's library)
    lines = list(dict.fromkeys(f"{c.sha256}  {c.path}" for c in man.components))
    lines.append(f"{km.sha256_file(kit / km.FILE)}  {km.FILE}")
    (kit / "SHA256SUMS").write_text("\n".join(lines) + "\n")


def _archive(staging: Path, req: KitRequest, log: Path) -> None:
    """tar | compressor into a temporary name beside --out, then a hard link to --out (fails if
    it appeared meanwhile: never replaced), then the temporary name goes."""
    tmp = req.out.with_name(f".{req.out.name}.tmp-{os.getpid()}")
    compressor = "zstd -T0 -q" if req.compression == "zstd" else "gzip"
    try:
        _run(
            [
                "tar",
                "-C",
                str(staging),
                "--numeric-owner",
                "-I",
                compressor,
                "-cf",
                str(tmp),
                req.dirname,
            ],
            log,
            "writing the archive",
            timeout=3600,
        )
        try:
            os.link(tmp, req.out)
        except FileExistsError:
            raise SuiteError(
                f"--out {req.out}: appeared while the kit was built; it was left as it is "
                "(the kit was not written)"
            ) from None
    finally:
        tmp.unlink(missing_ok=True)
