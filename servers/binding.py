"""Which library a running process's malloc calls are bound to, read from the process itself.

What is mapped does not decide who serves malloc: a binary that links tcmalloc (DT_NEEDED) and
runs with jemalloc preloaded has both mapped, and ld.so binds each imported symbol to the first
object in lookup order that defines it (the preload comes first). The truth is in the binding: an
object calls an imported function through its GOT, and the dynamic loader writes the resolved
address there. So, for the executable and for libstdc++ (C++ servers allocate through its
operator new, which calls malloc through libstdc++'s own GOT):

- read the object's dynamic relocations of the malloc family (JUMP_SLOT in .rela.plt, GLOB_DAT in
  .rela.dyn) from the ELF file the process mapped, reached through /proc/PID/map_files (or
  /proc/PID/root + path), so a server under chroot is read from its own root;
- find the object's load base in /proc/PID/maps (PIE or not: mapping start minus the first
  PT_LOAD's page-aligned address), read each GOT entry from /proc/PID/mem at base + r_offset;
- resolve the address to the mapping that holds it. An entry that still points into the object
  itself, where it defines no such symbol, is a lazy PLT stub: never called yet, "unbound";
- an entry bound into a forwarding shim (the exposure counter, servers/shims/alloc_count.c, which
  interposes every call and passes it on) is followed to where the shim forwards it, read from
  the shim's own table in the process memory: the library named is the one that serves the call.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

from elftools.elf.elffile import ELFFile
from elftools.elf.enums import ENUM_RELOC_TYPE_AARCH64, ENUM_RELOC_TYPE_x64
from elftools.elf.relocation import RelocationSection

from servers.elfcheck import INTERPOSING, kept_per_file, read_elf
from servers.errors import AllocatorError, ServerError

# operator new / new[] / delete / delete[] in every overload (sized, nothrow, aligned): their
# Itanium-mangled names all start with one of these.
_OPERATOR_PREFIXES = ("_Znw", "_Zna", "_Zdl", "_Zda")
# Relocation types through which a call binds to a symbol: per machine, (JUMP_SLOT, GLOB_DAT).
_BINDING_RELOCS = {
    "EM_X86_64": {
        ENUM_RELOC_TYPE_x64["R_X86_64_JUMP_SLOT"]: "JUMP_SLOT",
        ENUM_RELOC_TYPE_x64["R_X86_64_GLOB_DAT"]: "GLOB_DAT",
    },
    "EM_AARCH64": {
        ENUM_RELOC_TYPE_AARCH64["R_AARCH64_JUMP_SLOT"]: "JUMP_SLOT",
        ENUM_RELOC_TYPE_AARCH64["R_AARCH64_GLOB_DAT"]: "GLOB_DAT",
    },
}
# States of one GOT entry.
BOUND = "bound"  # points into another object: the library named serves the call
SELF = "self"  # points to the object's own definition (a binary that defines malloc itself)
UNBOUND = "unbound"  # lazy binding, still the object's PLT stub: not called yet
ANONYMOUS = "anonymous"  # into memory no file backs (a JIT, a trampoline)
UNMAPPED = "unmapped"  # into no mapping at all


def is_malloc_family(name: str) -> bool:
    """A symbol through which memory is allocated or freed: C's malloc family or C++'s
    operator new/delete."""
    return name in INTERPOSING or name.startswith(_OPERATOR_PREFIXES)


class ProcessGone(ServerError):
    """The process exited while its binding was being read."""


@dataclass(frozen=True)
class Mapping:
    """One line of /proc/PID/maps."""

    start: int
    end: int
    offset: int
    inode: int
    path: str | None  # None for anonymous memory; "[heap]" and the like keep their name

    @property
    def is_file(self) -> bool:
        return bool(self.path) and self.path.startswith("/")


@dataclass(frozen=True)
class Slot:
    """An imported malloc-family symbol of an ELF object: where its GOT entry is."""

    symbol: str
    r_offset: int  # the GOT entry's address in the object's own (link-time) address space
    reloc: str  # JUMP_SLOT or GLOB_DAT


@dataclass(frozen=True)
class ObjectLayout:
    """What the binding reader needs from an ELF object: its slots and how it is placed."""

    slots: tuple[Slot, ...]
    first_load: tuple[int, int]  # (p_offset, p_vaddr) of the first PT_LOAD segment
    word: int  # GOT entry size: 8 or 4
    little_endian: bool
    defined: dict[str, int]  # malloc-family symbols the object defines itself -> st_value
    needed: tuple[str, ...] = ()  # DT_NEEDED sonames: the libraries it links


@dataclass(frozen=True)
class Entry:
    """One GOT entry as read from the running process."""

    object: str  # the importing object's path, as mapped
    symbol: str
    reloc: str
    got: int  # run-time address of the GOT entry
    target: int  # what the entry holds
    state: str  # BOUND, SELF, UNBOUND, ANONYMOUS, UNMAPPED
    library: str | None  # the mapped file holding `target` (None unless BOUND or SELF)
    # A forwarding shim the GOT entry points into (the exposure counter): `target` and `library`
    # are then where that shim forwards the call, read from its table in the process.
    via: str | None = None

    def to_manifest(self) -> dict:
        return {
            "object": self.object,
            "symbol": self.symbol,
            "reloc": self.reloc,
            "got": f"{self.got:#x}",
            "target": f"{self.target:#x}",
            "state": self.state,
            "library": self.library,
        } | ({"via": self.via} if self.via else {})


# -- the ELF side --------------------------------------------------------------------------------


def _layout_json(layout: ObjectLayout) -> dict:
    return {
        "slots": [[s.symbol, s.r_offset, s.reloc] for s in layout.slots],
        "first_load": list(layout.first_load),
        "word": layout.word,
        "little_endian": layout.little_endian,
        "defined": layout.defined,
        "needed": list(layout.needed),
    }


def _layout_from_json(d: dict) -> ObjectLayout:
    return ObjectLayout(
        slots=tuple(Slot(str(a), int(b), str(c)) for a, b, c in d["slots"]),
        first_load=(int(d["first_load"][0]), int(d["first_load"][1])),
        word=int(d["word"]),
        little_endian=bool(d["little_endian"]),
        defined={str(k): int(v) for k, v in d["defined"].items()},
        needed=tuple(str(n) for n in d["needed"]),
    )


@kept_per_file(_layout_json, _layout_from_json)
def object_layout(path: Path | str, name: str | None = None) -> ObjectLayout:
    """The malloc-family imports of an ELF object and its placement facts.

    ServerError (one line, naming `name` or `path`) when the file is unreadable or not ELF.
    """

    def read(elf: ELFFile) -> ObjectLayout:
        kinds = _BINDING_RELOCS.get(elf["e_machine"])
        if kinds is None:
            raise ServerError(
                f"{name or path}: reading the malloc binding of {elf['e_machine']} objects is "
                "not supported (x86-64 and AArch64 are)"
            )
        slots = []
        for sec in elf.iter_sections():
            if not isinstance(sec, RelocationSection) or sec["sh_link"] == 0:
                continue
            symtab = elf.get_section(sec["sh_link"])
            for rel in sec.iter_relocations():
                kind = kinds.get(rel["r_info_type"])
                if kind is None or rel["r_info_sym"] == 0:
                    continue
                sym = symtab.get_symbol(rel["r_info_sym"])
                if is_malloc_family(sym.name):
                    slots.append(Slot(sym.name, rel["r_offset"], kind))
        loads = [s for s in elf.iter_segments() if s["p_type"] == "PT_LOAD"]
        if not loads:
            raise ServerError(f"{name or path}: no PT_LOAD segment; not a loadable ELF object")
        first = min(loads, key=lambda s: s["p_vaddr"])
        defined = {}
        dynsym = elf.get_section_by_name(".dynsym")
        if dynsym is not None:
            for sym in dynsym.iter_symbols():
                if sym["st_shndx"] != "SHN_UNDEF" and is_malloc_family(sym.name):
                    defined[sym.name] = sym["st_value"]
        dyn = elf.get_section_by_name(".dynamic")
        needed = [t.needed for t in dyn.iter_tags() if t.entry.d_tag == "DT_NEEDED"] if dyn else []
        return ObjectLayout(
            needed=tuple(needed),
            slots=tuple(sorted(set(slots), key=lambda s: (s.symbol, s.r_offset))),
            first_load=(first["p_offset"], first["p_vaddr"]),
            word=8 if elf.elfclass == 64 else 4,
            little_endian=elf.little_endian,
            defined=defined,
        )

    return read_elf(Path(path), read, name=name)


# -- the process side ----------------------------------------------------------------------------


def _gone(pid: int) -> ProcessGone:
    return ProcessGone(f"process {pid} is gone: it exited while its malloc binding was read")


def parse_maps(text: str) -> list[Mapping]:
    """The lines of a /proc/PID/maps text (paths may contain spaces; " (deleted)" is dropped)."""
    out = []
    for line in text.splitlines():
        parts = line.split(None, 5)
        if len(parts) < 5:
            continue
        lo, _, hi = parts[0].partition("-")
        path = parts[5].removesuffix(" (deleted)") if len(parts) == 6 else None
        out.append(Mapping(int(lo, 16), int(hi, 16), int(parts[2], 16), int(parts[4]), path))
    return out


def read_maps(pid: int, proc_root: str = "/proc") -> list[Mapping]:
    try:
        text = (Path(proc_root) / str(pid) / "maps").read_text(errors="replace")
    except (FileNotFoundError, ProcessLookupError):
        raise _gone(pid) from None
    except PermissionError:
        raise AllocatorError(
            f"cannot read {proc_root}/{pid}/maps: permission denied (the allocator proof needs "
            "the server to run as our own user, or root)"
        ) from None
    maps = parse_maps(text)
    if not maps:  # a zombie has an empty maps file
        raise _gone(pid)
    return maps


def mapping_at(maps: list[Mapping], address: int) -> Mapping | None:
    """The mapping that contains `address`, or None."""
    return next((m for m in maps if m.start <= address < m.end), None)


def load_base(maps: list[Mapping], path: str, first_load: tuple[int, int]) -> int:
    """Where `path` was loaded: the mapping of its first PT_LOAD page minus that page's link-time
    address (0 for a non-PIE executable, the mapping start for a PIE or shared object)."""
    p_offset, p_vaddr = first_load
    page = os.sysconf("SC_PAGE_SIZE")
    candidates = [m.start for m in maps if m.path == path and m.offset == p_offset & ~(page - 1)]
    if not candidates:
        raise AllocatorError(f"{path} has no mapping of its first segment in the process")
    return min(candidates) - (p_vaddr & ~(page - 1))


def _elf_of(pid: int, m: Mapping, proc_root: str) -> str:
    """A path through which this process's copy of the mapped file can be opened: map_files (the
    very file mapped, even if replaced on disk or in a chroot), else the process's root + path."""
    via = Path(proc_root) / str(pid) / "map_files" / f"{m.start:x}-{m.end:x}"
    try:
        with open(via, "rb"):
            return str(via)
    except (FileNotFoundError, ProcessLookupError):
        if not (Path(proc_root) / str(pid)).exists():
            raise _gone(pid) from None
    except OSError:
        pass  # map_files needs CAP_SYS_ADMIN/CHECKPOINT_RESTORE; the root path works without
    rooted = Path(proc_root) / str(pid) / "root" / m.path.lstrip("/")
    return str(rooted) if rooted.exists() else m.path


def _read_words(pid: int, addresses: list[int], word: int, little: bool, proc_root: str):
    fmt = ("<" if little else ">") + ("Q" if word == 8 else "I")
    out = {}
    try:
        with open(Path(proc_root) / str(pid) / "mem", "rb", buffering=0) as mem:
            for a in addresses:
                mem.seek(a)
                raw = mem.read(word)
                if len(raw) != word:
                    raise _gone(pid)
                out[a] = struct.unpack(fmt, raw)[0]
    except (FileNotFoundError, ProcessLookupError):
        raise _gone(pid) from None
    except PermissionError:
        raise AllocatorError(
            f"cannot read {proc_root}/{pid}/mem: permission denied (the binding proof needs "
            "ptrace access to the server: run it as our child, or as root)"
        ) from None
    except OSError:
        # EIO: the address space went away under us (exit), or the address is not mapped.
        if not (Path(proc_root) / str(pid) / "mem").exists():
            raise _gone(pid) from None
        raise AllocatorError(f"cannot read the GOT of process {pid} from its memory") from None
    return out


def _classify(target: int, maps: list[Mapping], obj: str, base: int, layout: ObjectLayout, sym):
    m = mapping_at(maps, target)
    if m is None:
        return UNMAPPED, None
    if not m.is_file:
        return ANONYMOUS, None
    if m.path != obj:
        return BOUND, m.path
    if sym in layout.defined and layout.defined[sym] + base == target:
        return SELF, m.path
    return UNBOUND, None


def object_entries(
    pid: int, path: str, maps: list[Mapping], proc_root: str = "/proc"
) -> tuple[list[Entry], ObjectLayout]:
    """The malloc-family GOT entries of the mapped object `path` in process `pid`, and the
    object's layout as read from the file the process mapped."""
    first = next((m for m in maps if m.path == path), None)
    if first is None:
        raise AllocatorError(f"{path} is not mapped in process {pid}")
    layout = object_layout(_elf_of(pid, first, proc_root), name=path)
    base = load_base(maps, path, layout.first_load)
    words = _read_words(
        pid,
        [base + s.r_offset for s in layout.slots],
        layout.word,
        layout.little_endian,
        proc_root,
    )
    entries = []
    for s in layout.slots:
        got = base + s.r_offset
        state, lib = _classify(words[got], maps, path, base, layout, s.symbol)
        entries.append(Entry(path, s.symbol, s.reloc, got, words[got], state, lib))
    return entries, layout


def executable_path(pid: int, maps: list[Mapping], proc_root: str = "/proc") -> str:
    """The executable's path as it appears in maps (matched by inode: /proc/PID/exe and maps
    may spell a chrooted path differently)."""
    exe = Path(proc_root) / str(pid) / "exe"
    try:
        inode = os.stat(exe).st_ino
        link = os.readlink(exe).removesuffix(" (deleted)")
    except (FileNotFoundError, ProcessLookupError):
        raise _gone(pid) from None
    except PermissionError:
        raise AllocatorError(f"cannot read {exe}: permission denied") from None
    if any(m.path == link for m in maps):
        return link
    found = next((m.path for m in maps if m.is_file and m.inode == inode), None)
    if found is None:
        raise AllocatorError(f"the executable of process {pid} ({link}) is not in its maps")
    return found


def libstdcxx_path(maps: list[Mapping]) -> str | None:
    """libstdc++ as mapped, when the process has it (C++ servers allocate through it)."""
    return next(
        (m.path for m in maps if m.is_file and os.path.basename(m.path).startswith("libstdc++.so")),
        None,
    )


@dataclass(frozen=True)
class Binding:
    """The malloc binding of a process: every malloc-family GOT entry of the objects read."""

    pid: int
    objects: tuple[str, ...]  # executable first, then libstdc++ if mapped
    entries: tuple[Entry, ...]
    maps: tuple[Mapping, ...]
    # The executable's DT_NEEDED, read from the very file it runs (inside its root, if any).
    needed: tuple[str, ...] = ()

    def targets(self, symbol: str) -> set[str]:
        """The libraries `symbol` is bound to, over all objects read (bound entries only)."""
        return {e.library for e in self.entries if e.symbol == symbol and e.state == BOUND}

    def to_manifest(self) -> dict:
        return {
            "objects": list(self.objects),
            "needed": list(self.needed),
            "entries": [e.to_manifest() for e in self.entries],
        }


# A forwarding shim (servers/shims/alloc_count.c) exports where each interposed symbol goes:
# mallocsweep_next[i] is the address symbol i of mallocsweep_next_names (comma-separated) calls.
FORWARD_TABLE = "mallocsweep_next"
FORWARD_NAMES = "mallocsweep_next_names"


@kept_per_file(lambda d: d, lambda d: {k: (int(v[0]), int(v[1])) for k, v in d.items()})
def forward_symbols(path: Path | str, name: str | None = None) -> dict[str, tuple[int, int]]:
    """(st_value, st_size) of the forwarding table's two symbols that `path` defines (once per
    file: libc and the allocator are asked at every server start)."""

    def read(elf: ELFFile) -> dict[str, tuple[int, int]]:
        dynsym = elf.get_section_by_name(".dynsym")
        out = {}
        if dynsym is not None:
            for n in (FORWARD_TABLE, FORWARD_NAMES):
                syms = dynsym.get_symbol_by_name(n) or []
                for sym in syms:
                    if sym["st_shndx"] != "SHN_UNDEF":
                        out[n] = (sym["st_value"], sym["st_size"])
        return out

    return read_elf(Path(path), read, name=name)


def _read_bytes(pid: int, address: int, size: int, proc_root: str) -> bytes:
    try:
        with open(Path(proc_root) / str(pid) / "mem", "rb", buffering=0) as mem:
            mem.seek(address)
            return mem.read(size)
    except (FileNotFoundError, ProcessLookupError):
        raise _gone(pid) from None
    except OSError:
        raise AllocatorError(f"cannot read the forwarding table of process {pid}") from None


def forwarding(pid: int, path: str, maps: list[Mapping], proc_root: str = "/proc"):
    """{symbol: address} a forwarding shim mapped as `path` sends each interposed call to, read
    from the running process; None when `path` is no such shim."""
    first = next((m for m in maps if m.path == path), None)
    if first is None:
        return None
    found = forward_symbols(_elf_of(pid, first, proc_root), name=path)
    if set(found) != {FORWARD_TABLE, FORWARD_NAMES}:
        return None
    layout = object_layout(_elf_of(pid, first, proc_root), name=path)
    base = load_base(maps, path, layout.first_load)
    at, size = found[FORWARD_NAMES]
    names = _read_bytes(pid, base + at, size, proc_root).rstrip(b"\0").decode().split(",")
    table = base + found[FORWARD_TABLE][0]
    addresses = [table + i * layout.word for i in range(len(names))]
    words = _read_words(pid, addresses, layout.word, layout.little_endian, proc_root)
    return {n: words[a] for n, a in zip(names, addresses, strict=True)}


def follow_forwarders(
    pid: int, entries: list[Entry], maps: list[Mapping], proc_root: str = "/proc"
) -> list[Entry]:
    """Entries bound into a forwarding shim, replaced by where the shim sends the call (`via`
    names the shim): the proof judges the library that serves the call, not the counter."""
    tables: dict[str, dict | None] = {}
    out = []
    for e in entries:
        if e.state != BOUND or e.library is None:
            out.append(e)
            continue
        if e.library not in tables:
            tables[e.library] = forwarding(pid, e.library, maps, proc_root)
        table = tables[e.library]
        if table is None or e.symbol not in table:
            out.append(e)
            continue
        target = table[e.symbol]
        m = mapping_at(maps, target)
        if target == 0:
            state, lib = UNBOUND, None  # the shim found no next definition (never called)
        elif m is None:
            state, lib = UNMAPPED, None
        elif not m.is_file:
            state, lib = ANONYMOUS, None
        else:
            state, lib = BOUND, m.path
        out.append(Entry(e.object, e.symbol, e.reloc, e.got, target, state, lib, via=e.library))
    return out


def read_binding(pid: int, proc_root: str = "/proc") -> Binding:
    """The malloc binding of the running process `pid` (see the module's doc).

    ProcessGone when it exits meanwhile; AllocatorError when it cannot be read.
    """
    maps = read_maps(pid, proc_root)
    objects = [executable_path(pid, maps, proc_root)]
    cxx = libstdcxx_path(maps)
    if cxx and cxx not in objects:
        objects.append(cxx)
    entries = []
    needed: tuple[str, ...] = ()
    for obj in objects:
        found, layout = object_entries(pid, obj, maps, proc_root)
        entries += found
        needed = needed or layout.needed  # the executable's: it comes first
    entries = follow_forwarders(pid, entries, maps, proc_root)
    return Binding(pid, tuple(objects), tuple(entries), tuple(maps), needed)
