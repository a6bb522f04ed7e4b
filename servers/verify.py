"""Proof that the allocator we asked for is the one serving malloc in a server process.

Before launch (`refuse_self_allocating`): a binary that defines malloc itself, or a static one,
cannot run under a preloaded allocator — its own calls would never reach it.
After start (`verify_allocator`):
- the preloaded library is mapped in /proc/PID/maps (matched by real path or inode, so a symlink
  that changed, or the _debug build picked by a soname lookup, cannot pass for it);
- no other allocator library is mapped (for glibc: none at all);
- the binary defines no malloc of its own (unless the allocator is `builtin`);
- the environment the process really has (/proc/PID/environ) carries our LD_PRELOAD and tunables;
- what the server itself reports (MariaDB @@version_malloc_library) agrees. MariaDB recognises
  jemalloc and tcmalloc but says "system" for mimalloc and TBB, so it is a cross-check only.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from servers.allocators import Allocator
from servers.elfcheck import elf_info, interposes_malloc, malloc_definitions
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
# Environment keys that shape allocation; recorded from the live process as evidence.
_ENV_KEYS = ("LD_PRELOAD", "GLIBC_TUNABLES", "MALLOC_CONF", "MALLOC_ARENA_MAX")
_ENV_PREFIXES = ("TCMALLOC_", "MIMALLOC_", "JE_", "TBB_")
# What MariaDB's @@version_malloc_library can name (it checks for tc_version, then mallctl).
_SERVER_DETECTS = {"jemalloc", "tcmalloc"}


def known_allocator_family(path: str) -> str | None:
    """The allocator family a mapped library file belongs to, by its basename."""
    base = os.path.basename(path)
    for pattern, family in _ALLOCATOR_LIBS:
        if pattern.search(base):
            return family
    return None


def refuse_self_allocating(binary: Path, allocator: Allocator) -> list[str]:
    """Before launch: refuse what cannot work, else return the binary's own malloc definitions.

    A binary defining malloc can only be measured as `builtin`; a static binary ignores
    LD_PRELOAD and GLIBC_TUNABLES alike. An unusable allocator is refused with its reason.
    """
    if not allocator.usable:
        raise AllocatorError(
            f"allocator {allocator.name!r} is not usable here: {allocator.why_not}"
        )
    defs = malloc_definitions(binary)
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


def _process_root(pid: int, proc_root: str) -> str:
    """The prefix that turns a path as `pid` sees it into one we can open: "/proc/PID/root"
    (its root directory: / for a host server, the root's directory for one under chroot), or ""
    where that is not available (a recorded procfs in tests)."""
    p = Path(proc_root) / str(pid) / "root"
    return str(p) if p.is_dir() else ""


def verify_allocator(
    pid: int,
    allocator: Allocator,
    binary: Path,
    server_reported: str | None = None,
    proc_root: str = "/proc",
) -> dict:
    """Evidence that `allocator` serves malloc in `pid`; AllocatorError naming what was found.

    `binary` and the allocator's paths are as the process sees them (inside its server root, if
    it runs in one): they are reached through /proc/PID/root, which is / for a host server."""
    files = mapped_files(pid, proc_root)
    env = process_env(pid, proc_root)
    seen = _process_root(pid, proc_root)
    defs = malloc_definitions(Path(seen + str(binary)) if seen else binary)
    ours = _mapped_as(files, [seen + allocator.library] if allocator.library else [])
    # Only the companions the registry names (TBB's proxy loads libtbbmalloc.so.2 itself) may sit
    # beside ours. Same family is not enough: libtcmalloc_debug next to libtcmalloc_minimal is a
    # second tcmalloc heap.
    companions = _mapped_as(files, [seen + p for p in allocator.companion_paths()])
    allocator_libs = {p: known_allocator_family(p) for p in files if known_allocator_family(p)}
    foreign = sorted(p for p in allocator_libs if p not in ours and p not in companions)
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
        "process_env": env,
        "server_reported": server_reported,
        "server_agreement": server_agreement(allocator, server_reported),
    }
    problems = []
    if allocator.kind == "preload":
        if not ours:
            problems.append(f"{allocator.library} is not mapped in /proc/{pid}/maps")
        # The allocator must be in LD_PRELOAD; other entries may only be non-allocator shims
        # (keep_thp), which the foreign-allocator check below would catch if they were not.
        preloaded = (env.get("LD_PRELOAD") or "").split()
        if allocator.library not in preloaded:
            problems.append(f"the process has LD_PRELOAD={env.get('LD_PRELOAD')!r}")
    if allocator.kind != "builtin":
        if foreign:
            problems.append(
                f"other allocator libraries are mapped: {', '.join(foreign)} "
                "(if the binary links one itself, run it as 'builtin')"
            )
        own = interposes_malloc(defs)
        if own:
            problems.append(f"{binary} defines {', '.join(own)} itself")
        for t in allocator.tunables:
            if t not in env.get("GLIBC_TUNABLES", "").split(":"):
                problems.append(f"GLIBC_TUNABLES of the process lacks {t}")
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
