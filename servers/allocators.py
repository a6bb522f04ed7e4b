"""The allocator registry: what configs/allocators.toml declares, and what this machine has of it.

`load_registry` validates the data file (every error names the file and the field).
`detect_all` turns each entry into an `Allocator`: the exact library that would be preloaded, its
package version and sha256, and whether it is usable here (and why not).
`resolve` is what a suite asks for: names (or "all" = the usable core six) plus the user's own
custom libraries. `Allocator.launch_env` composes the server's environment from it.
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
import subprocess
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from collectors.errors import CollectorError
from collectors.host import glibc_version as host_glibc_version
from collectors.procfs import ProcFS
from servers.elfcheck import allocator_family, elf_info, interposes_malloc, malloc_definitions
from servers.errors import AllocatorError, ServerError
from servers.root import ServerRoot, host_path, package_of_in_root, resolve_in_root
from servers.shipped import shipped

DEFAULT_REGISTRY = shipped("configs", "allocators.toml")
KINDS = ("system", "preload", "builtin")
_NAME = re.compile(r"[a-z0-9][a-z0-9_.-]{0,47}")
_TUNABLE = re.compile(r"glibc\.[a-z_]+\.[a-z_]+=[^:=\s]+")
_FIELDS = {
    "kind",
    "core",
    "family",
    "library",
    "identity",
    "package",
    "description",
    "env",
    "tunables",
    "min_glibc",
    "base",
    "companions",
    "hugetlbfs",
    "source",
    # `mallocsweep tune`'s search space, read by suites/tune/space.py (no launch field)
    "tune",
}
# What the host's ELF objects look like; a library for another machine cannot be preloaded.
_HOST_MACHINE = {"x86_64": "EM_X86_64", "aarch64": "EM_AARCH64", "ppc64le": "EM_PPC64"}


@dataclass(frozen=True)
class AllocatorSpec:
    """One validated registry entry (variants already merged with their base)."""

    name: str
    kind: str
    family: str
    core: bool = False
    library: tuple[str, ...] = ()  # absolute path candidates, first existing wins
    identity: tuple[str, ...] = ()  # system kind: the libc file that identifies the version
    package: str | None = None
    description: str = ""
    env: dict[str, str] = field(default_factory=dict)
    tunables: tuple[str, ...] = ()
    min_glibc: str | None = None
    base: str | None = None
    companions: tuple[str, ...] = ()  # sonames the library loads itself, beside it
    hugetlbfs: str | None = None  # a hugetlbfs mount point it allocates from (else unusable)
    source: str = ""  # where a deployed setting comes from (a report, a vendor's advice)


@dataclass(frozen=True)
class Allocator:
    """An allocator as found on this machine, ready to compose a server's launch environment."""

    name: str
    kind: str  # "system" | "preload" | "builtin"
    family: str  # what verification looks for: glibc, jemalloc, tcmalloc, mimalloc, tbbmalloc, ...
    library: str | None  # absolute real path preloaded (None for system/builtin)
    env: dict[str, str] = field(default_factory=dict)
    tunables: tuple[str, ...] = ()
    description: str = ""
    package: str | None = None
    version: str | None = None  # Debian package version of the file, when a package owns it
    sha256: str | None = None  # of the preloaded library (system: of libc)
    usable: bool = True
    why_not: str | None = None
    core: bool = False
    base: str | None = None
    custom: bool = False
    # Allocator libraries that the preloaded one loads itself (TBB's proxy loads libtbbmalloc.so.2):
    # file names looked up in the library's own directory (registry entries), or absolute paths (a
    # suite's custom entry). Any other allocator library mapped beside it is a second heap.
    companions: tuple[str, ...] = ()
    # A server root's own allocator (detect_in_root below): `library` is a path inside it.
    root: str | None = None
    source: str = ""  # where a variant's setting comes from (configs/allocators.toml)

    def companion_paths(self) -> list[str]:
        """Real paths of the companion libraries (those that exist): a file name is taken from
        `library`'s directory, an absolute path as it is (inside the root, for a root's own)."""
        if not self.library:
            return []
        here = os.path.dirname(self.library)
        out = []
        for name in self.companions:
            p = name if os.path.isabs(name) else os.path.join(here, name)
            if self.root:
                real = resolve_in_root(self.root, p)
                if os.path.exists(host_path(self.root, real)):
                    out.append(real)
            elif os.path.exists(p):
                out.append(os.path.realpath(p))
        return out

    def launch_env(self, base: Mapping[str, str]) -> dict[str, str]:
        """`base` plus this allocator: LD_PRELOAD by absolute path, env merged, tunables appended.

        Any LD_PRELOAD in `base` is dropped: a second preloaded allocator would mix heaps, and for
        glibc nothing may be preloaded at all. GLIBC_TUNABLES items are appended with ':' to the
        value already there (a user's own tunables survive), never replacing it.
        """
        env = dict(base)
        env.pop("LD_PRELOAD", None)
        tunables = [t for t in env.pop("GLIBC_TUNABLES", "").split(":") if t]
        for key, value in self.env.items():
            if key == "GLIBC_TUNABLES":
                tunables += [t for t in value.split(":") if t]
            else:
                env[key] = value
        tunables += list(self.tunables)
        if tunables:
            env["GLIBC_TUNABLES"] = ":".join(tunables)
        if self.kind == "preload":
            if not self.library:
                raise AllocatorError(
                    f"allocator {self.name!r} has no library to preload: {self.why_not}"
                )
            env["LD_PRELOAD"] = self.library
        return env

    def to_manifest(self) -> dict:
        return {
            "name": self.name,
            "kind": self.kind,
            "family": self.family,
            "library": self.library,
            "package": self.package,
            "version": self.version,
            "sha256": self.sha256,
            "env": dict(self.env),
            "tunables": list(self.tunables),
            "description": self.description,
            "core": self.core,
            "base": self.base,
            "custom": self.custom,
            "companions": list(self.companions),
            "usable": self.usable,
            "why_not": self.why_not,
            "root": self.root,
            "source": self.source,
        }


# -- the registry file ---------------------------------------------------------------------------


def _fail(path: Path, where: str, what: str) -> AllocatorError:
    return AllocatorError(f"{path}: {where}: {what}")


def _str_list(path: Path, where: str, value, *, absolute: bool = False) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise _fail(path, where, f"expected a list of strings, got {value!r}")
    if absolute:
        for v in value:
            if not v.startswith("/"):
                raise _fail(path, where, f"expected absolute paths, got {v!r}")
    return tuple(value)


def _check_tunables(path: Path, where: str, items: tuple[str, ...]) -> tuple[str, ...]:
    # "{cores}": this machine's CPU count, so a variant like arena_max = cores means the same on
    # every host (the expanded value is what the process gets, is verified and is recorded).
    items = tuple(t.replace("{cores}", str(os.cpu_count() or 1)) for t in items)
    for t in items:
        if not _TUNABLE.fullmatch(t):
            raise _fail(path, where, f"expected items like 'glibc.malloc.arena_max=1', got {t!r}")
    return items


def _check_env(where: str, value) -> dict[str, str]:
    """An allocator's env table; an error starts with `where` (the file and field, or the entry)."""
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k) and isinstance(v, str)
        for k, v in value.items()
    ):
        raise AllocatorError(f'{where}: expected a table of NAME = "string", got {value!r}')
    if "LD_PRELOAD" in value:
        raise AllocatorError(f"{where}: LD_PRELOAD is set from `library`; remove it from env")
    return dict(value)


def load_registry(path: Path | str | None = None) -> dict[str, AllocatorSpec]:
    """Read and validate the registry; variants are merged with their base. Order is kept."""
    path = Path(path) if path else DEFAULT_REGISTRY
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise AllocatorError(f"{path}: allocator registry not found") from None
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise AllocatorError(f"{path}: cannot read the allocator registry: {e}") from None
    extra = set(data) - {"allocator"}
    if extra:
        raise _fail(
            path, sorted(extra)[0], "unknown top-level key; expected only [allocator.NAME] tables"
        )
    entries = data.get("allocator")
    if not isinstance(entries, dict) or not entries:
        raise _fail(path, "allocator", "expected at least one [allocator.NAME] table")

    raw: dict[str, dict] = {}
    for name, entry in entries.items():
        where = f"allocator.{name}"
        if not _NAME.fullmatch(name) or name == "all":
            raise _fail(
                path,
                where,
                "expected a name of lowercase letters, digits, '-', '_', '.' (not 'all')",
            )
        if not isinstance(entry, dict):
            raise _fail(path, where, "expected a table")
        unknown = set(entry) - _FIELDS
        if unknown:
            raise _fail(
                path,
                f"{where}.{sorted(unknown)[0]}",
                f"unknown field; known: {', '.join(sorted(_FIELDS))}",
            )
        raw[name] = entry

    specs: dict[str, AllocatorSpec] = {}
    for name, entry in raw.items():
        where = f"allocator.{name}"
        base_name = entry.get("base")
        merged: dict = {}
        if base_name is not None:
            if base_name not in raw:
                raise _fail(path, f"{where}.base", f"no allocator {base_name!r} in this file")
            if raw[base_name].get("base") is not None:
                raise _fail(
                    path, f"{where}.base", f"{base_name!r} is itself a variant; name a base entry"
                )
            merged = {k: v for k, v in raw[base_name].items() if k != "core"}
            merged["env"] = dict(raw[base_name].get("env", {})) | dict(entry.get("env", {}))
            merged["tunables"] = list(raw[base_name].get("tunables", [])) + list(
                entry.get("tunables", [])
            )
        merged.update(
            {k: v for k, v in entry.items() if k not in ("env", "tunables") or base_name is None}
        )
        specs[name] = _spec(path, name, merged)
    return specs


def _spec(path: Path, name: str, e: dict) -> AllocatorSpec:
    where = f"allocator.{name}"
    kind = e.get("kind")
    if kind not in KINDS:
        raise _fail(path, f"{where}.kind", f"expected one of {', '.join(KINDS)}, got {kind!r}")
    library = _str_list(path, f"{where}.library", e.get("library", []), absolute=True)
    if kind == "preload" and not library:
        raise _fail(
            path, f"{where}.library", "a preload allocator needs absolute library path candidates"
        )
    if kind != "preload" and library:
        raise _fail(path, f"{where}.library", f"kind {kind!r} preloads nothing; remove library")
    core = e.get("core", False)
    if not isinstance(core, bool):
        raise _fail(path, f"{where}.core", f"expected true or false, got {core!r}")
    family = e.get("family")
    if not isinstance(family, str) or not family:
        raise _fail(path, f"{where}.family", 'expected the allocator family, e.g. "jemalloc"')
    for key in ("package", "description", "min_glibc", "base", "hugetlbfs", "source"):
        if key in e and not isinstance(e[key], str):
            raise _fail(path, f"{where}.{key}", f"expected a string, got {e[key]!r}")
    if e.get("hugetlbfs") and not e["hugetlbfs"].startswith("/"):
        raise _fail(
            path, f"{where}.hugetlbfs", f"expected an absolute path, got {e['hugetlbfs']!r}"
        )
    if e.get("min_glibc") and not re.fullmatch(r"\d+\.\d+", e["min_glibc"]):
        raise _fail(
            path, f"{where}.min_glibc", f'expected a version like "2.35", got {e["min_glibc"]!r}'
        )
    return AllocatorSpec(
        name=name,
        kind=kind,
        family=family,
        core=core,
        library=library,
        identity=_str_list(path, f"{where}.identity", e.get("identity", []), absolute=True),
        package=e.get("package"),
        description=e.get("description", ""),
        env=_check_env(f"{path}: {where}.env", e.get("env", {})),
        tunables=_check_tunables(
            path, f"{where}.tunables", _str_list(path, f"{where}.tunables", e.get("tunables", []))
        ),
        min_glibc=e.get("min_glibc"),
        base=e.get("base"),
        companions=_sonames(path, f"{where}.companions", e.get("companions", [])),
        hugetlbfs=e.get("hugetlbfs"),
        source=e.get("source", ""),
    )


def _sonames(path: Path, where: str, value) -> tuple[str, ...]:
    names = _str_list(path, where, value)
    for n in names:
        if "/" in n or not n.startswith("lib"):
            raise _fail(
                path, where, f"expected library file names like 'libtbbmalloc.so.2', got {n!r}"
            )
    return names


# -- what this machine has -----------------------------------------------------------------------


def glibc_version() -> str | None:
    """The running glibc's version, e.g. "2.36" (None on another C library)."""

    return host_glibc_version()


def version_tuple(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v)[:3])


@lru_cache(maxsize=256)
def package_of(path: str) -> tuple[str, str] | None:
    """(Debian package, installed version) owning `path`, or None (no dpkg, or not packaged)."""
    candidates = [path, os.path.realpath(path)]
    # usrmerge: dpkg knows /lib/... while the file really lives in /usr/lib/...
    candidates += [p.removeprefix("/usr") for p in candidates if p.startswith("/usr/lib")]
    for p in dict.fromkeys(candidates):
        try:
            out = subprocess.run(
                ["dpkg-query", "-S", p], capture_output=True, text=True, timeout=20
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        if out.returncode != 0 or ":" not in out.stdout:
            continue
        pkg = out.stdout.split(": ", 1)[0].split(",")[0].strip()
        ver = subprocess.run(
            ["dpkg-query", "-W", "-f=${Version}", pkg], capture_output=True, text=True, timeout=20
        )
        if ver.returncode == 0 and ver.stdout.strip():
            return pkg.split(":")[0], ver.stdout.strip()
    return None


@lru_cache(maxsize=256)
def _sha256(path: str, _mtime_ns: int, _size: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def sha256_of(path: str) -> str:
    st = os.stat(path)
    return _sha256(os.path.realpath(path), st.st_mtime_ns, st.st_size)


def check_preloadable(library: str) -> str | None:
    """Why `library` cannot serve as a preloaded allocator here, or None when it can."""
    p = Path(library)
    if not p.is_absolute():
        return f"{library} is not an absolute path"
    if not p.is_file():
        return f"{library} does not exist"
    try:
        info = elf_info(p)
        defs = malloc_definitions(p)
    except ServerError as e:
        return str(e)
    if info.elf_type != "ET_DYN" or (info.has_interp and not info.soname):
        return f"{library} is not an ELF shared object (e_type {info.elf_type})"
    want = _HOST_MACHINE.get(platform.machine())
    if want and info.machine != want:
        return f"{library} is built for {info.machine}, this machine is {platform.machine()}"
    if not interposes_malloc(defs):
        return f"{library} does not define malloc/free, so preloading it replaces nothing"
    return None


def spec_fields(spec: AllocatorSpec) -> dict:
    """The Allocator fields a registry entry decides, wherever the allocator is looked for (on
    the host here, in a server root in detect_in_root)."""
    return dict(
        name=spec.name,
        kind=spec.kind,
        family=spec.family,
        env=dict(spec.env),
        tunables=spec.tunables,
        description=spec.description,
        package=spec.package,
        core=spec.core,
        base=spec.base,
        companions=spec.companions,
        source=spec.source,
    )


def no_hugetlbfs(spec: AllocatorSpec, host_path: str | None = None) -> str | None:
    """Why an allocator that allocates from a hugetlbfs mount cannot here (None: it can).
    `host_path`: where its mount point is on this machine (inside a server root)."""
    if not spec.hugetlbfs:
        return None
    where = host_path or spec.hugetlbfs
    try:
        fstype = ProcFS().mounts().get(where)
    except CollectorError:
        fstype = None
    if fstype == "hugetlbfs":
        return None
    return (
        f"needs hugetlbfs mounted at {where} (mount -t hugetlbfs none {where}) and free huge pages;"
        " without it the allocator falls back silently"
    )


def _detect(spec: AllocatorSpec) -> Allocator:
    common = spec_fields(spec)
    why_not = no_hugetlbfs(spec)
    if spec.min_glibc:
        have = glibc_version()
        if have is None or version_tuple(have) < version_tuple(spec.min_glibc):
            why_not = (
                f"needs glibc >= {spec.min_glibc}, this machine has {have or 'another C library'}"
            )
    if spec.kind == "builtin":
        return Allocator(library=None, usable=why_not is None, why_not=why_not, **common)
    if spec.kind == "system":
        ident = next((p for p in spec.identity if os.path.isfile(p)), None)
        owner = package_of(ident) if ident else None
        version = owner[1] if owner else glibc_version()
        sha = sha256_of(ident) if ident else None
        return Allocator(
            library=None,
            version=version,
            sha256=sha,
            usable=why_not is None,
            why_not=why_not,
            **common,
        )
    found = next((p for p in spec.library if os.path.exists(p)), None)
    if found is None:
        hint = f"; install it: apt-get install {spec.package}" if spec.package else ""
        return Allocator(
            library=None,
            usable=False,
            why_not=f"none of {', '.join(spec.library)} exists{hint}",
            **common,
        )
    real = os.path.realpath(found)
    problem = check_preloadable(real)
    if problem:
        return Allocator(library=real, usable=False, why_not=problem, **common)
    owner = package_of(real)
    if owner:
        common["package"] = owner[0]
    return Allocator(
        library=real,
        version=owner[1] if owner else None,
        sha256=sha256_of(real),
        usable=why_not is None,
        why_not=why_not,
        **common,
    )


def detect_all(registry: Mapping[str, AllocatorSpec] | None = None) -> list[Allocator]:
    """Every registry entry as found here, usable or not (with why), in registry order."""
    registry = load_registry() if registry is None else registry
    return [_detect(spec) for spec in registry.values()]


def custom_allocator(entry: Mapping, known: Iterable[str] = ()) -> Allocator:
    """A user's own allocator from a suite file: {name, library, env?, tunables?, description?,
    companions?}. Paths are absolute (the suite loader resolves them from the file's directory)."""
    name = entry.get("name")
    where = f"custom allocator {name!r}"
    if not isinstance(name, str) or not _NAME.fullmatch(name) or name == "all":
        raise AllocatorError(
            f"{where}: name must be lowercase letters, digits, '-', '_', '.' (not 'all')"
        )
    if name in set(known):
        raise AllocatorError(
            f"{where}: the name is already used by configs/allocators.toml; pick another"
        )
    library = entry.get("library")
    if not isinstance(library, str) or not library.startswith("/"):
        raise AllocatorError(f"{where}: library must be an absolute path, got {library!r}")
    problem = check_preloadable(library)
    if problem:
        raise AllocatorError(f"{where}: {problem}")
    env = _check_env(f"{where}: env", dict(entry.get("env") or {}))
    tunables = tuple(entry.get("tunables") or ())
    for t in tunables:
        if not _TUNABLE.fullmatch(t):
            raise AllocatorError(
                f"{where}: tunables item {t!r}; expected e.g. 'glibc.malloc.arena_max=1'"
            )
    companions = entry.get("companions") or []
    if not isinstance(companions, list | tuple):
        raise AllocatorError(f"{where}: companions must be a list of paths, got {companions!r}")
    for c in companions:
        # A proxy-style allocator that loads another allocator library itself: that library may
        # be mapped beside it (verification treats any other allocator library as a second heap).
        if not isinstance(c, str) or not c.startswith("/"):
            raise AllocatorError(f"{where}: companions must be absolute paths, got {c!r}")
        if not os.path.isfile(c):
            raise AllocatorError(f"{where}: companion {c} does not exist")
    real = os.path.realpath(library)
    owner = package_of(real)
    return Allocator(
        name=name,
        kind="preload",
        family=allocator_family(Path(real)) or "custom",
        library=real,
        env=env,
        tunables=tunables,
        description=str(entry.get("description") or f"custom: {library}"),
        package=owner[0] if owner else None,
        version=owner[1] if owner else None,
        sha256=sha256_of(real),
        usable=True,
        core=False,
        custom=True,
        companions=tuple(dict.fromkeys(os.path.realpath(c) for c in companions)),
    )


def resolve(
    names: list[str],
    custom: Iterable[Mapping] = (),
    registry: Mapping[str, AllocatorSpec] | None = None,
    root=None,
) -> list[Allocator]:
    """The allocators a suite asks for, in the order asked, without duplicates.

    "all" = every usable core allocator, plus every custom one (a custom entry in a suite file is
    there to be run). Otherwise custom allocators run only when named. A named registry entry that
    is not usable here is returned with usable=False and why_not, for the caller to refuse.
    """
    registry = load_registry() if registry is None else registry
    detect = _detect
    if root is not None:
        # A server in a root (servers.root.ServerRoot) runs on the root's own allocators.
        def detect(spec: AllocatorSpec) -> Allocator:
            return detect_in_root(spec, root)

        if list(custom):
            raise AllocatorError(
                f"allocators.custom: a custom library is a host file; it cannot be preloaded "
                f"into a server in root {root.path}"
            )
    customs = {}
    for entry in custom:
        a = custom_allocator(entry, known=registry)
        if a.name in customs:
            raise AllocatorError(f"custom allocator {a.name!r} is defined twice")
        customs[a.name] = a
    chosen: dict[str, Allocator] = {}
    for name in names:
        if name == "all":
            for spec in registry.values():
                if spec.core and spec.name not in chosen:
                    a = detect(spec)
                    if a.usable:
                        chosen[a.name] = a
            for a in customs.values():
                chosen.setdefault(a.name, a)
        elif name in customs:
            chosen.setdefault(name, customs[name])
        elif name in registry:
            if name not in chosen:
                chosen[name] = detect(registry[name])
        else:
            known = ", ".join(["all", *registry, *customs])
            raise AllocatorError(f"unknown allocator {name!r}; known: {known}")
    return list(chosen.values())


# -- in a server root: the registry's entries found among the root's own files ------------------
# A server in a root runs on that release's libraries, so its allocators are that release's
# packages too (names differ between releases: the t64 transition renamed some, so they are found
# by file, not by package name), with versions from the root's dpkg database. `glibc` in a root is
# the root's glibc. `library` stays a path as seen inside the root: it is what LD_PRELOAD names
# there (servers.root), and what verification reaches through /proc/PID/root.
def _too_old(spec: AllocatorSpec, root: ServerRoot) -> str | None:
    if not spec.min_glibc:
        return None
    if root.glibc is None or version_tuple(root.glibc) < version_tuple(spec.min_glibc):
        return f"needs glibc >= {spec.min_glibc}, root {root.path} has {root.glibc or 'no glibc'}"
    return None


def detect_in_root(spec: AllocatorSpec, root: ServerRoot) -> Allocator:
    """`spec` as found in `root`: usable or not (with why), version from the root's dpkg."""
    common = dict(spec_fields(spec), root=root.path)
    why_not = _too_old(spec, root) or (
        no_hugetlbfs(spec, root.host(spec.hugetlbfs)) if spec.hugetlbfs else None
    )
    if spec.kind == "builtin":
        return Allocator(library=None, usable=why_not is None, why_not=why_not, **common)
    candidates = spec.identity if spec.kind == "system" else spec.library
    found = next((p for p in candidates if os.path.isfile(root.host(root.resolve(p)))), None)
    if spec.kind == "system":
        real = root.resolve(found) if found else None
        owner = package_of_in_root(root.path, real) if real else None
        if owner:
            common["package"] = owner[0]
        return Allocator(
            library=None,
            version=owner[1] if owner else root.libc_package_version,
            sha256=sha256_of(root.host(real)) if real else None,
            usable=why_not is None,
            why_not=why_not,
            **common,
        )
    if found is None:
        hint = f" (Debian package {spec.package} or its renamed successor)" if spec.package else ""
        return Allocator(
            library=None,
            usable=False,
            why_not=f"root {root.path} has none of {', '.join(spec.library)}: install it in the "
            f"root{hint}",
            **common,
        )
    real = root.resolve(found)
    problem = check_preloadable(root.host(real))
    if problem:
        return Allocator(library=real, usable=False, why_not=problem, **common)
    owner = package_of_in_root(root.path, real)
    if owner:
        common["package"] = owner[0]
    return Allocator(
        library=real,
        version=owner[1] if owner else None,
        sha256=sha256_of(root.host(real)),
        usable=why_not is None,
        why_not=why_not,
        **common,
    )
