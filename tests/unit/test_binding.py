"""Malloc-binding internals on binaries built here: the relocations read from the ELF file, and
the address arithmetic against /proc/PID/maps (parsing, load base, address -> mapping)."""

from __future__ import annotations

import os

import pytest
from elftools.elf.elffile import ELFFile

from servers.allocators import detect_all
from servers.binding import (
    BOUND,
    Binding,
    Entry,
    Mapping,
    is_malloc_family,
    load_base,
    mapping_at,
    object_layout,
    parse_maps,
)
from servers.errors import AllocatorError, ServerError
from servers.verify import verify_allocator
from tests.malloc_programs import LOOP, TCMALLOC_MINIMAL, build, build_linked

OWN = r"""
#include <stddef.h>
static char heap[1 << 16]; static size_t top;
void *malloc(size_t n) { void *p = heap + top; top += (n + 15) & ~(size_t)15; return p; }
void free(void *p) { (void)p; }
int main(void) { return malloc(8) == 0; }
"""


@pytest.fixture(scope="module")
def progs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("binding")
    return {
        "pie": build(tmp, "pie", "-pie", "-fPIE"),
        "nopie": build(tmp, "nopie", "-no-pie"),
        "linked": build_linked(tmp),
        "own": build(tmp, "own", source=OWN),
    }


def _section_range(path, names):
    with open(path, "rb") as f:
        elf = ELFFile(f)
        out = []
        for n in names:
            s = elf.get_section_by_name(n)
            if s is not None:
                out.append((s["sh_addr"], s["sh_addr"] + s["sh_size"]))
        return out


@pytest.mark.parametrize("name", ["pie", "nopie", "linked"])
def test_imports_of_the_malloc_family_point_into_the_got(progs, name):
    layout = object_layout(progs[name])
    slots = {s.symbol: s for s in layout.slots}
    # The loop calls malloc and free; valloc is imported for the branch never taken.
    assert {"malloc", "free", "valloc"} <= set(slots)
    assert all(s.reloc == "JUMP_SLOT" for s in slots.values())  # calls, through .rela.plt
    got = _section_range(progs[name], [".got", ".got.plt"])
    for s in slots.values():
        assert any(lo <= s.r_offset < hi for lo, hi in got), (s, got)
    assert layout.word == 8 and layout.little_endian
    assert layout.defined == {}  # imports only
    # puts/read/fflush are imported too, but are not the malloc family
    assert not {"puts", "read", "fflush"} & set(slots)


def test_first_segment_places_pie_at_zero_and_non_pie_at_its_link_address(progs):
    assert object_layout(progs["pie"]).first_load == (0, 0)
    off, vaddr = object_layout(progs["nopie"]).first_load
    assert off == 0 and vaddr >= 0x400000


def test_a_binary_defining_malloc_lists_its_own_definitions(progs):
    layout = object_layout(progs["own"])
    assert {"malloc", "free"} <= set(layout.defined)
    assert all(v > 0 for v in layout.defined.values())


def test_operator_new_and_delete_are_malloc_family():
    for name in ("_Znwm", "_Znam", "_ZdlPv", "_ZdaPvm", "_ZnwmRKSt9nothrow_t", "malloc", "free"):
        assert is_malloc_family(name)
    for name in ("freeaddrinfo", "mallopt_x", "_ZNSt6vectorIiE", "read"):
        assert not is_malloc_family(name)


MAPS = """\
55d0c0a00000-55d0c0a01000 r--p 00000000 fd:01 1234 /opt/my server/bin/mysqld
55d0c0a01000-55d0c0a05000 r-xp 00001000 fd:01 1234 /opt/my server/bin/mysqld
55d0c0a05000-55d0c0a06000 rw-p 00005000 fd:01 1234 /opt/my server/bin/mysqld
55d0c1000000-55d0c1021000 rw-p 00000000 00:00 0                          [heap]
7f0000000000-7f0000010000 rw-p 00000000 00:00 0
7f1000000000-7f1000028000 r--p 00000000 fd:01 77 /usr/lib/x86_64-linux-gnu/libjemalloc.so.2
7f1000028000-7f1000100000 r-xp 00028000 fd:01 77 /usr/lib/x86_64-linux-gnu/libjemalloc.so.2
7f2000000000-7f2000001000 r-xp 00000000 fd:01 99 /tmp/old.so (deleted)
"""


def test_maps_lines_keep_spaces_in_paths_and_drop_deleted():
    maps = parse_maps(MAPS)
    assert len(maps) == 8
    assert maps[0].path == "/opt/my server/bin/mysqld" and maps[0].inode == 1234
    assert maps[1].offset == 0x1000 and maps[1].start == 0x55D0C0A01000
    assert maps[3].path == "[heap]" and not maps[3].is_file
    assert maps[4].path is None and not maps[4].is_file
    assert maps[7].path == "/tmp/old.so"


def test_address_resolves_to_the_mapping_holding_it_end_exclusive():
    maps = parse_maps(MAPS)
    assert mapping_at(maps, 0x7F1000028000).offset == 0x28000
    assert mapping_at(maps, 0x7F1000027FFF).offset == 0
    assert mapping_at(maps, 0x7F1000100000) is None  # one past the end
    assert mapping_at(maps, 0x7F0000000010).path is None  # anonymous
    assert mapping_at(maps, 0x10) is None


def test_load_base_pie_is_the_first_mapping_and_non_pie_is_zero():
    maps = parse_maps(MAPS)
    assert load_base(maps, "/opt/my server/bin/mysqld", (0, 0)) == 0x55D0C0A00000
    nopie = [
        Mapping(0x400000, 0x401000, 0, 5, "/usr/bin/x"),
        Mapping(0x401000, 0x402000, 0x1000, 5, "/usr/bin/x"),
    ]
    assert load_base(nopie, "/usr/bin/x", (0, 0x400000)) == 0
    # A first segment at an unaligned offset/address still finds its page.
    odd = [Mapping(0x7F0000001000, 0x7F0000003000, 0x1000, 5, "/lib/y.so")]
    assert load_base(odd, "/lib/y.so", (0x1040, 0x1040)) == 0x7F0000000000
    with pytest.raises(AllocatorError, match="/lib/none.so has no mapping"):
        load_base(maps, "/lib/none.so", (0, 0))


def test_not_an_elf_file_is_one_line_naming_it(tmp_path):
    f = tmp_path / "notelf"
    f.write_text(LOOP)
    with pytest.raises(ServerError, match="shown-name is not an ELF file") as e:
        object_layout(f, name="shown-name")
    assert "\n" not in str(e.value)


def _fake_proc(root, pid, paths, env):
    d = root / str(pid)
    d.mkdir(parents=True)
    lines = [
        f"7f{i:02x}00000000-7f{i:02x}00001000 r-xp 00000000 08:01 {os.stat(p).st_ino} {p}"
        for i, p in enumerate(paths)
    ]
    (d / "maps").write_text("\n".join(lines) + "\n")
    (d / "environ").write_bytes(b"\0".join(f"{k}={v}".encode() for k, v in env.items()) + b"\0")
    return str(root)


def test_a_linked_allocator_that_serves_nothing_is_recorded_not_refused(progs, tmp_path):
    """The MySQL 9.7 case in miniature: the binary links tcmalloc_minimal, jemalloc is preloaded
    and wins every binding. Both are mapped; only the binary's own, idle allocator is tolerated."""
    je = next(a for a in detect_all() if a.name == "jemalloc")
    if not je.usable:
        pytest.skip(f"jemalloc not installed here: {je.why_not}")
    tc = os.path.realpath(TCMALLOC_MINIMAL)
    env = {"LD_PRELOAD": je.library}
    entries = tuple(
        Entry(str(progs["linked"]), sym, "JUMP_SLOT", 0x4000 + 8 * i, 0x7F0000000100, BOUND, lib)
        for i, (sym, lib) in enumerate([("malloc", je.library), ("free", je.library)])
    )
    # The executable's DT_NEEDED comes with the binding, read from the file the process runs.
    linked = object_layout(progs["linked"]).needed
    assert linked[0] == "libtcmalloc_minimal.so.4"
    bound = Binding(5, (str(progs["linked"]),), entries, (), linked)
    root = _fake_proc(tmp_path / "a", 5, [je.library, tc], env)
    ev = verify_allocator(5, je, progs["linked"], proc_root=root, binding=bound)
    assert ev["verdict"] == "verified" and ev["mapped_not_bound"] == [tc]
    assert ev["binary_links_allocators"] == ["libtcmalloc_minimal.so.4"]
    # The plain binary does not link it: the same tcmalloc beside jemalloc is unexplained.
    plain = Binding(5, (str(progs["pie"]),), entries, (), object_layout(progs["pie"]).needed)
    root = _fake_proc(tmp_path / "b", 5, [je.library, tc], env)
    with pytest.raises(AllocatorError, match="other allocator libraries are mapped"):
        verify_allocator(5, je, progs["pie"], proc_root=root, binding=plain)
    # And a linked allocator that does serve a call is a second heap, whatever the rest says.
    calloc = Entry(str(progs["linked"]), "calloc", "JUMP_SLOT", 0x4010, 0x7F0100000100, BOUND, tc)
    mixed = Binding(5, bound.objects, (*entries, calloc), (), linked)
    root = _fake_proc(tmp_path / "c", 5, [je.library, tc], env)
    with pytest.raises(AllocatorError, match="calloc of linked is bound to .*tcmalloc_minimal"):
        verify_allocator(5, je, progs["linked"], proc_root=root, binding=mixed)


def test_operator_new_through_libstdcxx_is_judged_by_libstdcxx_own_malloc(progs, tmp_path):
    """Debian's mysqld lists libstdc++ before libtcmalloc: its operator new binds to libstdc++'s,
    which calls malloc through libstdc++'s own GOT. That is tcmalloc serving, not a second heap;
    an operator new bound to a library that is not read (jemalloc here) is one."""
    builtin = next(a for a in detect_all() if a.name == "builtin")
    tc = os.path.realpath(TCMALLOC_MINIMAL)
    exe, cxx = str(progs["linked"]), "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"

    def entry(obj, sym, lib):
        return Entry(obj, sym, "JUMP_SLOT", 0x4000, 0x7F0000000100, BOUND, lib)

    calls = (entry(exe, "malloc", tc), entry(exe, "free", tc), entry(cxx, "malloc", tc))
    needed = object_layout(progs["linked"]).needed
    through = Binding(6, (exe, cxx), (*calls, entry(exe, "_Znwm", cxx)), (), needed)
    root = _fake_proc(tmp_path / "a", 6, [tc], {})
    ev = verify_allocator(6, builtin, progs["linked"], proc_root=root, binding=through)
    assert ev["verdict"] == "verified" and ev["builtin"]["library"] == tc
    assert ev["builtin"]["label"].startswith("builtin: tcmalloc (libtcmalloc_minimal.so.4, ")
    wrong = entry(exe, "_Znwm", "/opt/libjemalloc.so.2")
    elsewhere = Binding(6, (exe, cxx), (*calls, wrong), (), needed)
    root = _fake_proc(tmp_path / "b", 6, [tc], {})
    with pytest.raises(AllocatorError, match="_Znwm of linked is bound to /opt/libjemalloc.so.2"):
        verify_allocator(6, builtin, progs["linked"], proc_root=root, binding=elsewhere)
