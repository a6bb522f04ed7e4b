"""What Debian's archive has: which release carries a server version, and that release's allocators.

Each release (bookworm, trixie, sid) gets a private apt configuration and state directory under the
servers cache, so nothing of the host's apt state is read or written. apt downloads and verifies
the indexes (its keyring, its signatures); we read them back as Packages stanzas with
`apt-cache show`, which is the format parsed here (and recorded in the unit-test fixtures).

The archive's Release files for these suites are past their Valid-Until date on this machine's
mirror, so apt is told not to check it (`Acquire::Check-Valid-Until=false`).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import re
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from servers.errors import ServerError

# Searched in this order: the host's own release first (a basedir on the host's libraries is
# cheaper than a root), then stable before testing before unstable.
RELEASES = ("bookworm", "trixie", "sid")
# Suites per release: point releases move to -updates and -security; unstable has one suite.
_SUITES = {
    "bookworm": (
        ("debian", "bookworm"),
        ("debian", "bookworm-updates"),
        ("debian-security", "bookworm-security"),
    ),
    "trixie": (
        ("debian", "trixie"),
        ("debian", "trixie-updates"),
        ("debian-security", "trixie-security"),
    ),
    "sid": (("debian", "sid"),),
}
DEFAULT_MIRROR = "http://deb.debian.org"
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
# The package holding the server binary, per flavor (Debian has no Percona Server).
SERVER_PACKAGES = {"mariadb": "mariadb-server-core", "mysql": "mysql-server-core"}
BINARIES = {"mariadb": "/usr/sbin/mariadbd", "mysql": "/usr/sbin/mysqld"}
# Same-source packages the datadir tool needs beside the server: mariadb-install-db runs
# my_print_defaults, which lives in mariadb-client-core.
INIT_HELPERS = {"mariadb": ("mariadb-client-core",), "mysql": ()}
# The clients the shipped suites run inside a root beside its server: the dump scenario's
# mariadb-dump / mysqldump (suites/workloads/fragmentation/dumpclient.py looks there). A root is
# fetched with them, so a shipped suite needs no manual step on it.
CLIENTS = {"mariadb": ("mariadb-client",), "mysql": ("mysql-client-core",)}
# Allocator (registry name) -> package-name pattern. Names change across releases (the t64
# transition renamed libtcmalloc-minimal4 to libtcmalloc-minimal4t64; mimalloc went from
# libmimalloc2.0 to libmimalloc3), so the release's own index decides, never a fixed name.
ALLOCATOR_PACKAGES = {
    "jemalloc": re.compile(r"^libjemalloc(\d+)$"),
    "tcmalloc": re.compile(r"^libgoogle-perftools(\d+)(t64)?$"),
    "tcmalloc-minimal": re.compile(r"^libtcmalloc-minimal(\d+)(t64)?$"),
    "mimalloc": re.compile(r"^libmimalloc(\d+(?:\.\d+)?)$"),
    "tbbmalloc": re.compile(r"^libtbbmalloc(\d+)(t64)?$"),
}
SPEC_RE = re.compile(
    r"^(?P<flavor>[a-z]+)-(?P<version>\d+\.\d+\.\d+)$", re.ASCII
)  # ASCII: "１０" is no version
_UPSTREAM = re.compile(r"^(?:\d+:)?(\d+(?:\.\d+)*)")
# Indexes younger than this are not downloaded again (a fetch of an already-fetched spec does
# not touch the network at all).
INDEX_MAX_AGE_S = 6 * 3600


@dataclass(frozen=True)
class Spec:
    flavor: str
    version: str

    def __str__(self) -> str:
        return f"{self.flavor}-{self.version}"


def parse_spec(text: str) -> Spec:
    """FLAVOR-X.Y.Z as Debian's archive has it; ServerError (one line) otherwise."""
    m = SPEC_RE.match(text.strip())
    if not m:
        raise ServerError(
            f"server spec {text!r} is not FLAVOR-X.Y.Z (e.g. mysql-9.7.4, mariadb-11.8.9, "
            "mariadb-10.11.18)"
        )
    flavor = m.group("flavor")
    if flavor not in SERVER_PACKAGES:
        extra = (
            "; Percona Server is not in Debian's archive: use its tarball as [server] basedir"
            if flavor == "percona"
            else ""
        )
        raise ServerError(
            f"server spec {text!r}: flavor {flavor!r} is not one Debian packages "
            f"(known: {', '.join(SERVER_PACKAGES)}){extra}"
        )
    return Spec(flavor, m.group("version"))


def upstream_version(debian_version: str) -> str:
    """'1:11.8.9+ds-4' -> '11.8.9': no epoch, no Debian revision or repack suffix."""
    m = _UPSTREAM.match(debian_version)
    return m.group(1) if m else debian_version


@dataclass(frozen=True)
class Package:
    """One stanza of a Packages index."""

    name: str
    version: str
    source: str  # the source package ("Source:" without its version; the name when absent)
    depends: tuple[str, ...] = ()  # dependency names (alternatives and versions dropped)
    installed_size_kb: int = 0
    fields: dict = field(default_factory=dict, compare=False, hash=False)

    @property
    def upstream(self) -> str:
        return upstream_version(self.version)


def _dep_names(text: str) -> tuple[str, ...]:
    out = []
    for clause in text.split(","):
        first = clause.split("|")[0].strip()
        name = re.split(r"[\s(:\[]", first, maxsplit=1)[0]
        if name:
            out.append(name)
    return tuple(out)


def parse_packages(text: str) -> list[Package]:
    """Stanzas of a Packages index (or `apt-cache show` output); continuation lines folded."""
    out: list[Package] = []
    for block in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        key = None
        for line in block.splitlines():
            if not line.strip():
                continue
            if line[0] in " \t" and key is not None:
                fields[key] += "\n" + line.strip()
                continue
            k, sep, v = line.partition(":")
            if not sep:
                continue
            key = k.strip()
            fields[key] = v.strip()
        if "Package" not in fields or "Version" not in fields:
            continue
        try:
            size = int(fields.get("Installed-Size", "0") or 0)
        except ValueError:
            size = 0
        deps = _dep_names(fields.get("Pre-Depends", "") + "," + fields.get("Depends", ""))
        out.append(
            Package(
                name=fields["Package"],
                version=fields["Version"],
                source=(fields.get("Source") or fields["Package"]).split()[0],
                depends=deps,
                installed_size_kb=size,
                fields=fields,
            )
        )
    return out


def compare_versions(a: str, b: str) -> int:
    """Debian version order (dpkg --compare-versions): -1, 0 or 1."""
    if a == b:
        return 0
    lt = subprocess.run(["dpkg", "--compare-versions", a, "lt", b], check=False).returncode == 0
    return -1 if lt else 1


def newest_first(pkgs: list[Package]) -> list[Package]:
    return sorted(
        pkgs, key=functools.cmp_to_key(lambda x, y: compare_versions(y.version, x.version))
    )


def pick_allocator_packages(
    names: list[str], candidates: dict[str, Package]
) -> tuple[dict[str, Package], list[str]]:
    """Per allocator, the release's package (among `names`, those apt has a candidate for in
    `candidates`); the highest soname wins when two coexist. Returns (found, missing allocators)."""
    found: dict[str, Package] = {}
    missing: list[str] = []
    for alloc, pattern in ALLOCATOR_PACKAGES.items():
        matches = [n for n in names if pattern.match(n) and n in candidates]
        if not matches:
            missing.append(alloc)
            continue

        def soname(n: str, p=pattern) -> tuple:
            m = p.match(n)
            return (tuple(int(x) for x in m.group(1).split(".")), n.endswith("t64"))

        found[alloc] = candidates[max(matches, key=soname)]
    return found, missing


def mirror_urls(sources_dir: Path = Path("/etc/apt/sources.list.d")) -> str:
    """The Debian mirror the host's apt uses (scheme://host), from its deb822 sources."""
    for f in sorted(sources_dir.glob("*.sources")):
        try:
            text = f.read_text()
        except OSError:
            continue
        for m in re.finditer(r"^URIs:\s*(\S+)", text, re.M):
            url = m.group(1).rstrip("/")
            if url.endswith("/debian"):
                return url.removesuffix("/debian")
    return DEFAULT_MIRROR


class ReleaseIndex:
    """A private apt for one release: its sources, state and cache under `root`."""

    def __init__(self, release: str, root: Path, mirror: str | None = None):
        if release not in _SUITES:
            raise ServerError(f"unknown Debian release {release!r} (known: {', '.join(RELEASES)})")
        self.release = release
        self.root = Path(root)
        self.mirror = mirror or mirror_urls()

    def sources_lines(self) -> list[str]:
        return [
            f"deb [signed-by={KEYRING}] {self.mirror}/{archive} {suite} main"
            for archive, suite in _SUITES[self.release]
        ]

    def options(self) -> list[str]:
        r = self.root
        return [
            "-o", f"Dir::Etc={r / 'etc'}",
            "-o", f"Dir::Etc::sourcelist={r / 'etc' / 'sources.list'}",
            "-o", f"Dir::Etc::sourceparts={r / 'etc' / 'sources.list.d'}",
            "-o", f"Dir::Etc::preferences={r / 'etc' / 'preferences'}",
            "-o", f"Dir::Etc::preferencesparts={r / 'etc' / 'preferences.d'}",
            "-o", f"Dir::State={r / 'state'}",
            "-o", f"Dir::State::status={r / 'state' / 'status'}",
            "-o", f"Dir::Cache={r / 'cache'}",
            "-o", "Acquire::Check-Valid-Until=false",
            "-o", "Acquire::Languages=none",
            "-o", "Acquire::IndexTargets::deb::DEP-11::DefaultEnabled=false",
            "-o", "Acquire::IndexTargets::deb::DEP-11-icons::DefaultEnabled=false",
            "-o", "APT::Architecture=amd64",
            "-o", "APT::Architectures=amd64",
            "-o", "Debug::NoLocking=1",
            "-o", "APT::Sandbox::User=root",
        ]  # fmt: skip

    def _prepare(self) -> None:
        for d in (
            "etc/sources.list.d",
            "etc/preferences.d",
            "state/lists/partial",
            "cache/archives/partial",
        ):
            (self.root / d).mkdir(parents=True, exist_ok=True)
        (self.root / "etc" / "sources.list").write_text("\n".join(self.sources_lines()) + "\n")
        status = self.root / "state" / "status"
        if not status.exists():
            status.write_text("")

    def _stamp(self) -> Path:
        return self.root / "state" / "updated"

    def fresh(self) -> bool:
        s = self._stamp()
        return s.is_file() and time.time() - s.stat().st_mtime < INDEX_MAX_AGE_S

    @contextlib.contextmanager
    def _locked(self, exclusive: bool):
        """apt runs here with Debug::NoLocking (the index is ours, not the system's), so two of our
        processes (two `servers fetch`, two test workers) would write the same list files at once:
        an update holds this lock exclusively, a read shares it."""
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / ".lock", "w") as f:
            fcntl.flock(f, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            yield

    def update(self, force: bool = False) -> None:
        """Download this release's indexes (skipped when they are recent, also when another
        process of ours updated them while this one waited for the lock)."""
        if not force and self.fresh():
            return
        with self._locked(exclusive=True):
            if not force and self.fresh():
                return
            self._prepare()
            self._run(
                ["apt-get", "-q", *self.options(), "update"], timeout=600, what="apt-get update"
            )
            self._stamp().write_text(time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()) + "\n")

    def _run(
        self,
        argv: list[str],
        timeout: float,
        what: str,
        cwd: Path | None = None,
        check: bool = True,
    ) -> str:
        try:
            p = subprocess.run(
                argv,
                capture_output=True,
                text=True,
                stdin=subprocess.DEVNULL,
                timeout=timeout,
                cwd=cwd,
                env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C"},
            )
        except FileNotFoundError:
            raise ServerError(f"{argv[0]} not found: this needs Debian's apt") from None
        except subprocess.TimeoutExpired:
            raise ServerError(
                f"{what} for {self.release} did not finish in {timeout:.0f}s"
            ) from None
        if p.returncode != 0 and check:
            err = [ln for ln in (p.stderr or p.stdout).splitlines() if ln.strip()]
            raise ServerError(
                f"{what} for {self.release} failed (status {p.returncode}): "
                f"{err[-1] if err else 'no output'}"
            )
        return p.stdout

    def show(self, *names: str) -> list[Package]:
        """Every version the release has of `names` (unknown names are left out)."""
        # apt-cache exits 100 when one of the names is unknown, after showing the others.
        with self._locked(exclusive=False):
            out = self._run(
                ["apt-cache", *self.options(), "show", *names],
                timeout=120,
                what="apt-cache show",
                check=False,
            )
        return parse_packages(out)

    def pkgnames(self, prefix: str) -> list[str]:
        with self._locked(exclusive=False):
            out = self._run(
                ["apt-cache", *self.options(), "pkgnames", prefix],
                timeout=120,
                what="apt-cache pkgnames",
            )
        return sorted(set(out.split()))

    def allocator_packages(self) -> tuple[dict[str, Package], list[str]]:
        # One pkgnames call (each apt-cache run reads the whole index: ~1 s)
        names = [
            n for n in self.pkgnames("lib") if any(p.match(n) for p in ALLOCATOR_PACKAGES.values())
        ]
        newest: dict[str, Package] = {}
        for p in newest_first(self.show(*names) if names else []):
            newest.setdefault(p.name, p)
        return pick_allocator_packages(names, newest)

    def download(self, pins: list[str], dest: Path) -> None:
        """apt-get download NAME=VERSION ... into `dest`."""
        self._run(
            ["apt-get", "-q", *self.options(), "download", *pins],
            timeout=900,
            what="apt-get download",
            cwd=dest,
        )


@dataclass(frozen=True)
class Located:
    spec: Spec
    release: str
    package: Package  # the server package, at the version to fetch


def versions_by_release(found: dict[str, list[Package]]) -> str:
    """'10.11.19, 10.11.18 (bookworm); 11.8.9 (trixie)': upstream versions per release, newest
    first; releases without the package are left out."""
    parts = []
    for release, pkgs in found.items():
        ups = []
        for p in newest_first(pkgs):
            if p.upstream not in ups:
                ups.append(p.upstream)
        if ups:
            parts.append(f"{', '.join(ups)} ({release})")
    return "; ".join(parts) or "none"


def choose(spec: Spec, found: dict[str, list[Package]]) -> Located:
    """The first release (in the order of `found`) that has `spec`'s upstream version, at its
    newest Debian revision; ServerError naming what the archive has otherwise."""
    pkg_name = SERVER_PACKAGES[spec.flavor]
    found = {r: [p for p in pkgs if p.name == pkg_name] for r, pkgs in found.items()}
    for release, pkgs in found.items():
        hits = [p for p in pkgs if p.upstream == spec.version]
        if hits:
            return Located(spec, release, newest_first(hits)[0])
    raise ServerError(
        f"{spec} is not in Debian's archive ({', '.join(found)}): {pkg_name} has "
        f"{versions_by_release(found)}"
    )


def indexes(cache: Path, releases: tuple[str, ...] = RELEASES) -> dict[str, ReleaseIndex]:
    return {r: ReleaseIndex(r, cache / r) for r in releases}


def host_release(os_release: Path = Path("/etc/os-release")) -> str | None:
    try:
        text = os_release.read_text()
    except OSError:
        return None
    m = re.search(r"^VERSION_CODENAME=\"?([a-z]+)", text, re.M)
    return m.group(1) if m else None


def release_order(host: str | None) -> tuple[str, ...]:
    """The host's own release first, then the others from stable to unstable."""
    return tuple([host] if host in RELEASES else []) + tuple(r for r in RELEASES if r != host)
