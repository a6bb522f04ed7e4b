"""Malloc-binding internals on binaries built here: the relocations read from the ELF file, and
the address arithmetic against /proc/PID/maps (parsing, load base, address -> mapping)."""

from __future__ import annotations

import pytest
from elftools.elf.elffile import ELFFile

from servers.binding import (
    Mapping,
    is_malloc_family,
    load_base,
    mapping_at,
    object_layout,
    parse_maps,
)
from servers.errors import AllocatorError, ServerError
from tests.malloc_programs import LOOP, build, build_linked

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
