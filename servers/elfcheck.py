"""What an ELF file says about malloc, read from its symbol tables before anything runs.

An executable that defines `malloc` itself (official mongod links tcmalloc statically) keeps
calling its own allocator even under LD_PRELOAD, while the shared libraries it loads call the
preloaded one: two allocators freeing each other's memory. The dynamic symbol table tells us
before launch; .symtab, when not stripped, also catches definitions that were not exported.
A statically linked executable has no dynamic loader at all, so LD_PRELOAD never applies.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from elftools.common.exceptions import ELFError
from elftools.construct import ConstructError
from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection

from rundir.atomic import atomic_write
from servers.cachedir import owned_subdir
from servers.errors import ServerError

# The names through which a process gets memory: a binary defining any of these interposes them.
INTERPOSING = frozenset(
    {
        "malloc",
        "free",
        "calloc",
        "realloc",
        "reallocarray",
        "posix_memalign",
        "aligned_alloc",
        "memalign",
        "valloc",
        "pvalloc",
        "malloc_usable_size",
        "cfree",
    }
)
# Allocator-specific entry points: they identify which allocator a library or binary carries.
FAMILY_MARKERS = {
    "mallctl": "jemalloc",
    "je_malloc": "jemalloc",
    "je_mallctl": "jemalloc",
    "mallocx": "jemalloc",
    "tc_malloc": "tcmalloc",
    "tc_version": "tcmalloc",
    "tc_free": "tcmalloc",
    "mi_malloc": "mimalloc",
    "mi_version": "mimalloc",
    "scalable_malloc": "tbbmalloc",
    "__TBB_malloc_proxy": "tbbmalloc",
}
MALLOC_FAMILY = INTERPOSING | frozenset(FAMILY_MARKERS)
T = TypeVar("T")


@dataclass(frozen=True)
class ElfInfo:
    """The few header facts that decide whether a file can be preloaded into, or preload into."""

    path: str
    elf_type: str  # ET_EXEC, ET_DYN, ...
    machine: str  # EM_X86_64, EM_AARCH64, ...
    elf_class: int  # 32 or 64
    dynamic: bool  # has a PT_INTERP (executable) or PT_DYNAMIC (shared object): ld.so is involved
    has_interp: bool
    soname: str | None


# What pyelftools raises on a damaged file: its own errors, its bundled construct's, and plain
# struct/index/decoding errors from reading a table whose size or offset points past the end.
_PARSE_ERRORS = (ELFError, ConstructError, struct.error, ValueError, IndexError, EOFError)


# What was read from a file, by the file's identity: the same server binary is read at every cell's
# start (its malloc definitions and its GOT layout), and pyelftools takes 1-3 s per reading of
# mariadbd's symbol and relocation tables here. Kept in memory and in the cache directory
# (servers.cachedir, elf/), so a run of many cells and many runs read a binary once. A file
# replaced or rewritten in place gets a new identity (inode, size or mtime), so a stale answer is
# never returned; failures are not kept; an unreadable cache entry is read again from the file.
_READINGS: dict[tuple, object] = {}
_READINGS_MAX = 256


def file_identity(path: Path | str) -> tuple[int, int, int, int] | None:
    """(device, inode, size, mtime ns) of the file `path` names (a /proc/PID/map_files link names
    the mapped file itself); None when it cannot be stat'ed (the reading then says why)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _disk_entry(key: tuple) -> Path:

    digest = hashlib.sha256(repr(key).encode()).hexdigest()[:32]
    return owned_subdir("elf") / f"{key[0]}-{digest}.json"


def kept_per_file(encode: Callable[[T], object], decode: Callable[[object], T]):
    """`fn(path, *args, name=None)` computed once per file identity and args (`name` only words
    its errors); `encode`/`decode` turn its result into JSON and back for the disk cache. The
    result must not be mutated by callers: return tuples and frozen types."""

    def wrap(fn: Callable[..., T]) -> Callable[..., T]:
        @functools.wraps(fn)
        def reading(path, *args, name: str | None = None) -> T:
            ident = file_identity(path)
            if ident is None:
                return fn(path, *args, name=name)
            key = (fn.__name__.strip("_"), ident, args)
            if key in _READINGS:
                return _READINGS[key]
            entry = None
            try:
                entry = _disk_entry(key)
                value = decode(json.loads(entry.read_text()))
            except (OSError, ValueError, TypeError, KeyError):
                value = fn(path, *args, name=name)
                try:
                    if entry is not None:
                        atomic_write(entry, json.dumps(encode(value)))
                except OSError:
                    pass  # a cache that cannot be written costs time, never a run
            if len(_READINGS) >= _READINGS_MAX:
                _READINGS.clear()
            _READINGS[key] = value
            return value

        return reading

    return wrap


def read_elf(path: Path, read: Callable[[ELFFile], T], name: str | None = None) -> T:
    """`read(ELFFile(path))` with every failure as a one-line ServerError naming the file.

    pyelftools parses lazily: the constructor reads only the header, and a truncated or corrupt
    section table fails later, inside `read`. So the whole reading happens under one handler.
    `name` is how messages call the file when `path` is a way to reach it (/proc/PID/map_files/...).
    """
    try:
        f = open(path, "rb")
    except OSError as e:
        raise ServerError(f"cannot read {name or path}: {e.strerror}") from None
    with f:
        if f.read(4) != b"\x7fELF":
            raise ServerError(
                f"{name or path} is not an ELF file; expected an executable or shared object"
            )
        f.seek(0)
        try:
            return read(ELFFile(f))
        except _PARSE_ERRORS as e:
            why = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise ServerError(f"{name or path}: malformed ELF: {why}") from None


def elf_info(path: Path) -> ElfInfo:
    """Header facts of `path`; ServerError when it is not an ELF file or a damaged one."""

    def read(elf: ELFFile) -> ElfInfo:
        kinds = {seg["p_type"] for seg in elf.iter_segments()}
        soname = None
        dyn = elf.get_section_by_name(".dynamic")
        if dyn is not None:
            for tag in dyn.iter_tags():
                if tag.entry.d_tag == "DT_SONAME":
                    soname = tag.soname
        return ElfInfo(
            path=str(path),
            elf_type=elf["e_type"],
            machine=elf["e_machine"],
            elf_class=elf.elfclass,
            dynamic="PT_DYNAMIC" in kinds,
            has_interp="PT_INTERP" in kinds,
            soname=soname,
        )

    return read_elf(Path(path), read)


def _defined(elf, names, tables=(".dynsym", ".symtab")) -> set[str]:
    """Symbols of `names` (a set, or a predicate on the name) defined in the given tables."""
    wanted = names if callable(names) else names.__contains__
    found: set[str] = set()
    for section_name in tables:
        sec = elf.get_section_by_name(section_name)
        if not isinstance(sec, SymbolTableSection):
            continue
        for sym in sec.iter_symbols():
            # Versioned names never appear here (pyelftools gives the bare name); UND = imported.
            if (
                wanted(sym.name)
                and sym["st_shndx"] != "SHN_UNDEF"
                and sym["st_info"]["type"]
                in (
                    "STT_FUNC",
                    "STT_GNU_IFUNC",
                    "STT_NOTYPE",
                )
            ):
                found.add(sym.name)
    return found


def malloc_definitions(binary: Path) -> list[str]:
    """Malloc-family symbols `binary` defines itself (not imports), sorted.

    Checks .dynsym and, when present, .symtab. ServerError when the file is missing, not ELF, or
    damaged (a truncated copy fails here, not later as an internal error).
    """
    return list(_malloc_definitions(binary))


@kept_per_file(list, tuple)
def _malloc_definitions(binary: Path, name: str | None = None) -> tuple[str, ...]:
    return read_elf(Path(binary), lambda elf: tuple(sorted(_defined(elf, MALLOC_FAMILY))), name)


def exported(path: Path, names) -> set[str]:
    """The symbols of `names` (a set, or a predicate on the name) that `path` exports (defines
    in .dynsym): only those can win a dynamic binding."""
    return read_elf(Path(path), lambda elf: _defined(elf, names, (".dynsym",)))


def needed_libraries(path: Path) -> list[str]:
    """The DT_NEEDED sonames of `path`, in order (what ld.so loads with it)."""

    def read(elf: ELFFile) -> list[str]:
        dyn = elf.get_section_by_name(".dynamic")
        if dyn is None:
            return []
        return [t.needed for t in dyn.iter_tags() if t.entry.d_tag == "DT_NEEDED"]

    return read_elf(Path(path), read)


def interposes_malloc(definitions: list[str]) -> list[str]:
    """The subset of `definitions` that replaces the standard allocator entry points."""
    return sorted(set(definitions) & INTERPOSING)


def allocator_family(library: Path) -> str | None:
    """Which allocator a shared object carries, from its entry points (None when unknown)."""
    for name in sorted(malloc_definitions(library)):
        if name in FAMILY_MARKERS:
            return FAMILY_MARKERS[name]
    return None
