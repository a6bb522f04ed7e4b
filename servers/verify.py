"""Proof that the allocator we asked for is the one serving malloc in a server process.

Before launch (`refuse_self_allocating`): a binary that defines malloc itself, or a static one,
cannot run under a preloaded allocator — its own calls would never reach it. A binary that links
an allocator library (DT_NEEDED libtcmalloc.so.4: Debian's MySQL 9.7) has that allocator as its
default, so its `glibc` arm would measure tcmalloc: refused, with 'builtin' or a preload instead.
After start (`verify_allocator`), the proof is the binding (servers/binding.py): the library the
process's malloc and free GOT entries really point to — in the executable, and in libstdc++ whose
operator new calls malloc. A preloaded allocator is verified only if they point into it (or into
a companion it loads itself); glibc only if they point into libc. Besides:
- the preloaded library is mapped in /proc/PID/maps (matched by real path or inode, so a symlink
  that changed, or the _debug build picked by a soname lookup, cannot pass for it);
- another allocator library merely mapped beside it (a DT_NEEDED tcmalloc that lost the binding
  to the preload) is recorded, and fails the proof only when some call is bound to it;
- the binary defines no malloc of its own (unless the allocator is `builtin`);
- the environment the process really has (/proc/PID/environ) carries our LD_PRELOAD, tunables and
  the allocator's own variables (MALLOC_CONF, TCMALLOC_*, MIMALLOC_*), each with our value;
- what the server itself reports (MariaDB @@version_malloc_library) agrees. MariaDB recognises
  jemalloc and tcmalloc but says "system" for mimalloc and TBB, so it is a cross-check only.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from servers.allocators import Allocator, package_of
from servers.binding import BOUND, Binding, is_malloc_family, read_binding
from servers.elfcheck import (
    elf_info,
    exported,
    interposes_malloc,
    malloc_definitions,
    needed_libraries,
)
from servers.errors import AllocatorError, ServerError

# Basenames of allocator libraries, by family: what must not be mapped next to another allocator.
_ALLOCATOR_LIBS = [
    (re.compile(r"^libjemalloc[._-]"), "jemalloc"),
    (re.compile(r"^libtcmalloc(_minimal|_and_profiler)?(_debug)?\.so"), "tcmalloc"),
    (re.compile(r"^libmimalloc(-[a-z]+)?\.so"), "mimalloc"),
    (re.compile(r"^libtbbmalloc(_proxy)?\.so"), "tbbmalloc"),
    (re.compile(r"^libhoard\.so"), "hoard"),
    (re.compile(r"^libsnmallocshim.*\.so"), "snmalloc"),
]
# glibc's C library, as mapped: what the glibc arm's malloc must be bound to.
_LIBC = re.compile(r"^libc(-[0-9.]+)?\.so")
# The calls that must be served by the allocator under test for the proof to hold.
_REQUIRED = ("malloc", "free")
# Environment keys that shape allocation; recorded from the live process as evidence.
_ENV_KEYS = ("LD_PRELOAD", "GLIBC_TUNABLES", "MALLOC_CONF", "MALLOC_ARENA_MAX")
# "glibc.": GLIBC_TUNABLES items after the first, split off by glibc itself (tunables_in)
_ENV_PREFIXES = ("TCMALLOC_", "MIMALLOC_", "JE_", "TBB_", "glibc.")
# What MariaDB's @@version_malloc_library can name (it checks for tc_version, then mallctl).
_SERVER_DETECTS = {"jemalloc", "tcmalloc"}


def known_allocator_family(path: str) -> str | None:
    """The allocator family a mapped library file belongs to, by its basename."""
    base = os.path.basename(path)
    for pattern, family in _ALLOCATOR_LIBS:
        if pattern.search(base):
            return family
    return None


def linked_allocators(binary: Path | None = None, needed=None) -> list[tuple[str, str]]:
    """(soname, family) of each allocator library `binary` links itself (DT_NEEDED), or among the
    sonames `needed` (read from the running process's executable)."""
    out = []
    for soname in needed_libraries(binary) if needed is None else needed:
        family = known_allocator_family(soname)
        if family:
            out.append((soname, family))
    return out


def refuse_self_allocating(binary: Path, allocator: Allocator) -> list[str]:
    """Before launch: refuse what cannot work, else return the binary's own malloc definitions.

    A binary defining malloc can only be measured as `builtin`; a static binary ignores
    LD_PRELOAD and GLIBC_TUNABLES alike; a binary linking an allocator library has no glibc arm
    (its malloc is that allocator's). An unusable allocator is refused with its reason.
    """
    if not allocator.usable:
        raise AllocatorError(
            f"allocator {allocator.name!r} is not usable here: {allocator.why_not}"
        )
    defs = malloc_definitions(binary)
    if allocator.kind == "system":
        linked = linked_allocators(binary)
        if linked:
            soname, family = linked[0]
            raise AllocatorError(
                f"{binary} links {soname} itself: its malloc is {family}, not glibc; use "
                f"'builtin' to measure it, or a preloaded allocator (allocator {allocator.name!r} "
                "refused)"
            )
    if allocator.kind == "builtin":
        return defs
    own = interposes_malloc(defs)
    if own:
        raise AllocatorError(
            f"{binary} defines {', '.join(own)} itself, so allocator {allocator.name!r} would serve "
            "only its shared libraries (mixed heaps); run it with allocator 'builtin'"
        )
    info = elf_info(binary)
    if not info.has_interp:
        raise AllocatorError(
            f"{binary} is statically linked: LD_PRELOAD and GLIBC_TUNABLES never reach it; "
            f"allocator {allocator.name!r} cannot be applied (use 'builtin')"
        )
    return defs


def _read(path: Path, pid: int) -> bytes:
    try:
        return path.read_bytes()
    except (FileNotFoundError, ProcessLookupError):
        raise ServerError(f"process {pid} exited before its allocator could be verified") from None


def mapped_files(pid: int, proc_root: str = "/proc") -> dict[str, set[int]]:
    """File-backed mappings of `pid`: path -> inodes seen (a replaced file shows a new inode)."""
    text = _read(Path(proc_root) / str(pid) / "maps", pid).decode(errors="replace")
    files: dict[str, set[int]] = {}
    for line in text.splitlines():
        parts = line.split(None, 5)
        if len(parts) < 6 or not parts[5].startswith("/"):
            continue
        path = parts[5].removesuffix(" (deleted)")
        files.setdefault(path, set()).add(int(parts[4]))
    return files


def process_env(pid: int, proc_root: str = "/proc") -> dict[str, str]:
    """The allocation-related part of the environment `pid` was exec'd with."""
    raw = _read(Path(proc_root) / str(pid) / "environ", pid)
    env = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.decode(errors="replace").partition("=")
        if sep and (key in _ENV_KEYS or key.startswith(_ENV_PREFIXES)):
            env[key] = value
    return env


def server_agreement(allocator: Allocator, reported: str | None) -> str:
    """How the server's own report relates to what we preloaded.

    "agrees", "disagrees", "not-detectable-by-server" (the server cannot name this allocator, and
    said "system"), "not-reported" (the server has no such report), or "not-applicable" (builtin:
    the report is recorded as what the binary carries).
    """
    if reported is None or not reported.strip():
        return "not-reported"
    said = reported.strip().lower()
    named = next((f for f in _SERVER_DETECTS if said.startswith(f)), None)
    if said.startswith("system"):
        named = "system"
    if allocator.kind == "builtin":
        return "not-applicable"  # whatever the binary carries is, by definition, the builtin one
    expected = "system" if allocator.family == "glibc" else allocator.family
    if named is None:
        return "disagrees"
    if named == expected:
        return "agrees"
    if named == "system" and expected not in _SERVER_DETECTS:
        return "not-detectable-by-server"
    return "disagrees"


def _mapped_as(files: dict[str, set[int]], libraries: list[str]) -> list[str]:
    """The mapped paths that are one of `libraries`: by real path, or by inode with the same
    basename (the process may see the file through another mount or a symlinked directory)."""
    out = []
    for lib in libraries:
        real = os.path.realpath(lib)
        try:
            inode = os.stat(real).st_ino
        except OSError:
            inode = None
        out += [
            p
            for p, inodes in files.items()
            if p == real or (inode in inodes and os.path.basename(p) == os.path.basename(real))
        ]
    return sorted(set(out))


def _libc_paths(files: dict[str, set[int]]) -> list[str]:
    return sorted(p for p in files if _LIBC.match(os.path.basename(p)))


def _exported_by(paths: list[str]) -> set[str]:
    """The malloc-family symbols any of `paths` exports (what it can win a binding for). Mapped
    paths are as this process sees them (the host's path of a file in a server root)."""
    names: set[str] = set()
    for p in paths:
        names |= exported(Path(p), is_malloc_family)
    return names


def _package_owning(pid: int, library: str, proc_root: str) -> tuple[str, str] | None:
    """(package, version) owning a mapped library: from the host's dpkg database, or from the
    server root's when the process runs in one (its /proc/PID/root is not /)."""
    try:
        root = os.readlink(Path(proc_root) / str(pid) / "root")
    except OSError:
        root = "/"
    if root == "/" or not library.startswith(root.rstrip("/") + "/"):
        return package_of(library)
    inside = library[len(root.rstrip("/")) :]
    admin = f"--admindir={root}/var/lib/dpkg"
    try:
        found = subprocess.run(
            ["dpkg-query", admin, "-S", inside], capture_output=True, text=True, timeout=20
        )
        if found.returncode != 0 or ": " not in found.stdout:
            return None
        pkg = found.stdout.split(": ", 1)[0].split(",")[0].strip()
        ver = subprocess.run(
            ["dpkg-query", admin, "-W", "-f=${Version}", pkg],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (pkg.split(":")[0], ver.stdout.strip()) if ver.returncode == 0 else None


def builtin_identity(binding: Binding, proc_root: str = "/proc") -> dict | None:
    """For a binary that links an allocator library: which, named with library and version,
    e.g. "builtin: tcmalloc (libtcmalloc.so.4, libgoogle-perftools4 2.10-1)"."""
    linked = linked_allocators(needed=binding.needed)
    if not linked:
        return None
    soname, family = linked[0]
    # The file the process mapped for it: the binding's target when malloc went there.
    served = sorted(binding.targets("malloc"))
    library = next((p for p in served if known_allocator_family(p) == family), None)
    owner = _package_owning(binding.pid, library, proc_root) if library else None
    version = f"{owner[0]} {owner[1]}" if owner else "version unknown"
    return {
        "family": family,
        "soname": soname,
        "library": library,
        "package": owner[0] if owner else None,
        "version": owner[1] if owner else None,
        "label": f"builtin: {family} ({soname}, {version})",
    }


def _linked_and_idle(foreign: list[str], binding: Binding) -> list[str]:
    """The mapped allocator libraries that the executable links itself (matched by soname) and
    that no GOT entry read points into."""
    linked = {soname for soname, _ in linked_allocators(needed=binding.needed)}
    out = []
    for p in foreign:
        if any(e.library == p for e in binding.entries):
            continue
        try:
            soname = elf_info(Path(p)).soname
        except ServerError:
            continue  # unreadable: cannot be shown to be the linked one
        if soname in linked or os.path.basename(p) in linked:
            out.append(p)
    return out


def binding_problems(
    binding: Binding, allocator: Allocator, expected: list[str], builtin: dict | None
) -> tuple[list[str], list[str]]:
    """(problems, notes) of the binding against what should serve the calls.

    `expected` is the mapped files that should: the preload and its companions, libc for glibc,
    the linked allocator for a builtin one. A symbol bound elsewhere is a problem when the
    expected library exports it (a second heap serves some calls); a note when it does not (the
    allocator lacks that entry point, so ld.so rightly looked further).
    """
    problems: list[str] = []
    notes: list[str] = []
    if allocator.kind == "builtin" and builtin is None:
        return problems, notes  # whatever the binary carries is, by definition, the builtin one
    want = " or ".join(expected) or (
        f"the {builtin['soname']} it links" if builtin else "the allocator (not mapped)"
    )
    for sym in _REQUIRED:
        targets = binding.targets(sym)
        if not targets:
            problems.append(
                f"no bound {sym} found in {', '.join(binding.objects)} (lazy binding: not called yet)"
            )
        elif targets - set(expected):
            problems.append(f"{sym} is bound to {', '.join(sorted(targets))}, not to {want}")
    served = _exported_by(expected)
    # Grouped by (object, library) so that a message stays one readable line.
    wrong: dict[tuple[str, str], list[str]] = {}
    lacking: dict[tuple[str, str], list[str]] = {}
    for e in binding.entries:
        if e.state != BOUND or e.library in expected or e.symbol in _REQUIRED:
            continue
        if e.library in binding.objects:
            # Bound to libstdc++ (operator new, when it precedes the allocator in lookup order:
            # Debian's mysqld needs libstdc++ before libtcmalloc): it forwards to malloc through
            # its own GOT, read and judged here too.
            continue
        key = (os.path.basename(e.object), e.library)
        family = known_allocator_family(e.library)
        if allocator.family == "glibc":
            if family:
                wrong.setdefault(key, []).append(e.symbol)
        elif e.symbol in served:
            wrong.setdefault(key, []).append(e.symbol)
        else:
            lacking.setdefault(key, []).append(e.symbol)
    for (obj, lib), syms in wrong.items():
        family = known_allocator_family(lib)
        problems.append(
            f"{', '.join(syms)} of {obj} {'is' if len(syms) == 1 else 'are'} bound to {lib}"
            + (f" ({family})" if family else "")
        )
    for (obj, lib), syms in lacking.items():
        notes.append(
            f"{', '.join(syms)} of {obj} {'is' if len(syms) == 1 else 'are'} bound to {lib} "
            f"({want} does not define {'it' if len(syms) == 1 else 'them'})"
        )
    return problems, notes


def _process_root(pid: int, proc_root: str) -> str:
    """The prefix that turns a path as `pid` sees it into one we can open: "/proc/PID/root"
    (its root directory: / for a host server, the root's directory for one under chroot), or ""
    where that is not available (a recorded procfs in tests)."""
    p = Path(proc_root) / str(pid) / "root"
    return str(p) if p.is_dir() else ""


def tunables_in(env: dict[str, str]) -> set[str]:
    """The GLIBC_TUNABLES items of a process, from its /proc/PID/environ as parsed into `env`.

    glibc parses GLIBC_TUNABLES at start-up in the process's own environment block, writing a
    NUL where each ':' was (measured with Debian's glibc 2.36: GLIBC_TUNABLES=a=1:b=2 reads back
    from /proc/PID/environ as "GLIBC_TUNABLES=a=1", then an entry "b=2"): the items after the
    first are entries of their own, named glibc.<namespace>.<tunable>."""
    items = {t for t in env.get("GLIBC_TUNABLES", "").split(":") if t}
    return items | {f"{k}={v}" for k, v in env.items() if k.startswith("glibc.")}


def verify_allocator(
    pid: int,
    allocator: Allocator,
    binary: Path,
    server_reported: str | None = None,
    proc_root: str = "/proc",
    binding: Binding | None = None,
) -> dict:
    """Evidence that `allocator` serves malloc in `pid`; AllocatorError naming what was found.

    `binary` and the allocator's paths are as the process sees them (inside its server root, if
    it runs in one): they are reached through /proc/PID/root, which is / for a host server."""
    files = mapped_files(pid, proc_root)
    env = process_env(pid, proc_root)
    seen = _process_root(pid, proc_root)
    defs = malloc_definitions(Path(seen + str(binary)) if seen else binary)
    binding = binding or read_binding(pid, proc_root)
    ours = _mapped_as(files, [seen + allocator.library] if allocator.library else [])
    # Only the companions the registry names (TBB's proxy loads libtbbmalloc.so.2 itself) may sit
    # beside ours. Same family is not enough: libtcmalloc_debug next to libtcmalloc_minimal is a
    # second tcmalloc heap.
    companions = _mapped_as(files, [seen + p for p in allocator.companion_paths()])
    allocator_libs = {p: known_allocator_family(p) for p in files if known_allocator_family(p)}
    foreign = sorted(p for p in allocator_libs if p not in ours and p not in companions)
    builtin = builtin_identity(binding, proc_root) if allocator.kind == "builtin" else None
    if allocator.kind == "preload":
        expected = ours + companions
    elif allocator.kind == "system":
        expected = _libc_paths(files)
    else:
        expected = [builtin["library"]] if builtin and builtin["library"] else []
    bound_problems, bound_notes = binding_problems(binding, allocator, expected, builtin)
    evidence = {
        "allocator": allocator.name,
        "kind": allocator.kind,
        "family": allocator.family,
        "pid": pid,
        "library": allocator.library,
        "library_mapped": ours,
        "allocator_libraries_mapped": sorted(allocator_libs),
        "companion_libraries_mapped": companions,
        "foreign_allocator_libraries": foreign,
        "binary": str(binary),
        "binary_malloc_definitions": defs,
        "binary_links_allocators": [s for s, _ in linked_allocators(needed=binding.needed)],
        "process_env": env,
        "server_reported": server_reported,
        "server_agreement": server_agreement(allocator, server_reported),
        # Who serves the calls, per symbol over the executable and libstdc++: the proof.
        "bound_to": {sym: sorted(binding.targets(sym)) for sym in _REQUIRED},
        "binding": binding.to_manifest(),
        "binding_expected": expected,
        "binding_notes": bound_notes,
    }
    if builtin:
        evidence["builtin"] = builtin
    problems = list(bound_problems)
    if allocator.kind == "preload":
        if not ours:
            problems.append(f"{allocator.library} is not mapped in /proc/{pid}/maps")
        # The allocator must be in LD_PRELOAD; other entries may only be non-allocator shims
        # (keep_thp), which the binding check above would catch if they served malloc.
        preloaded = (env.get("LD_PRELOAD") or "").split()
        if allocator.library not in preloaded:
            problems.append(f"the process has LD_PRELOAD={env.get('LD_PRELOAD')!r}")
    if allocator.kind != "builtin":
        # An allocator the binary links itself (DT_NEEDED) is mapped whatever we preload: when no
        # call is bound to it (it lost the binding to the preload) it is recorded, not a failure.
        # Any other allocator library beside ours is unexplained — a proxy may forward to it, a
        # library may call it directly — and fails the proof, as does any call bound to one.
        idle = _linked_and_idle(foreign, binding)
        evidence["mapped_not_bound"] = idle
        unexplained = [p for p in foreign if p not in idle]
        if unexplained:
            problems.append(
                f"other allocator libraries are mapped: {', '.join(unexplained)} "
                "(if the binary links one itself, run it as 'builtin')"
            )
        own = interposes_malloc(defs)
        if own:
            problems.append(f"{binary} defines {', '.join(own)} itself")
        have = tunables_in(env)
        for t in allocator.tunables:
            if t not in have:
                problems.append(f"GLIBC_TUNABLES of the process lacks {t}")
        # The allocator's own variables (MALLOC_CONF, TCMALLOC_*, MIMALLOC_*) read back from the
        # live process: a setting that did not reach it would be measured as if it had.
        for key, value in allocator.env.items():
            if (key in _ENV_KEYS or key.startswith(_ENV_PREFIXES)) and env.get(key) != value:
                problems.append(f"the process has {key}={env.get(key)!r}, not {value!r}")
    if evidence["server_agreement"] == "disagrees":
        problems.append(f"the server reports malloc library {server_reported!r}")
    evidence["verdict"] = "failed" if problems else "verified"
    if problems:
        evidence["problems"] = problems
        err = AllocatorError(
            f"allocator {allocator.name!r} not verified in pid {pid}: {'; '.join(problems)}"
        )
        err.evidence = evidence  # the manifest keeps what was found even when the start fails
        raise err
    return evidence
