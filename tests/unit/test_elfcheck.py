"""ELF malloc checks on tiny programs built here with gcc: one defines malloc, one does not."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from servers.allocators import Allocator
from servers.elfcheck import allocator_family, elf_info, interposes_malloc, malloc_definitions
from servers.errors import AllocatorError, ServerError
from servers.verify import refuse_self_allocating

OWN_MALLOC = r"""
#include <stddef.h>
#include <string.h>
static char heap[1 << 20];
static size_t top;
void *malloc(size_t n) { n = (n + 15) & ~(size_t)15; if (top + n > sizeof heap) return NULL;
                         void *p = heap + top; top += n; return p; }
void free(void *p) { (void)p; }
void *calloc(size_t a, size_t b) { void *p = malloc(a * b); if (p) memset(p, 0, a * b); return p; }
void *realloc(void *p, size_t n) { void *q = malloc(n); if (q && p) memcpy(q, p, n); return q; }
int main(void) { return malloc(8) ? 0 : 1; }
"""
PLAIN = r"""
#include <stdlib.h>
int main(void) { void *p = malloc(8); free(p); return 0; }
"""

pytestmark = pytest.mark.skipif(
    shutil.which("gcc") is None, reason="gcc is needed to build test binaries"
)


def _cc(tmp: Path, name: str, source: str, *flags: str) -> Path:
    src = tmp / f"{name}.c"
    src.write_text(source)
    out = tmp / name
    subprocess.run(
        ["gcc", "-O1", "-o", str(out), str(src), *flags], check=True, capture_output=True
    )
    return out


@pytest.fixture(scope="module")
def binaries(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("elf")
    own = _cc(tmp, "own", OWN_MALLOC)
    stripped = tmp / "own-stripped"
    shutil.copy(own, stripped)
    subprocess.run(["strip", str(stripped)], check=True)
    return {"own": own, "stripped": stripped, "plain": _cc(tmp, "plain", PLAIN), "tmp": tmp}


def _alloc(kind: str, name: str = "x", library: str | None = None) -> Allocator:
    return Allocator(
        name=name, kind=kind, family="glibc" if kind == "system" else name, library=library
    )


def test_binary_defining_malloc_is_found(binaries):
    defs = malloc_definitions(binaries["own"])
    assert {"malloc", "free", "calloc", "realloc"} <= set(defs)
    assert interposes_malloc(defs) == ["calloc", "free", "malloc", "realloc"]


def test_stripped_binary_still_exports_malloc_in_dynsym(binaries):
    assert "malloc" in malloc_definitions(binaries["stripped"])


def test_binary_importing_malloc_defines_nothing(binaries):
    assert malloc_definitions(binaries["plain"]) == []
    assert elf_info(binaries["plain"]).has_interp


def test_not_an_elf_names_the_path(tmp_path):
    f = tmp_path / "script.sh"
    f.write_text("#!/bin/sh\necho hi\n")
    with pytest.raises(ServerError, match=str(f)):
        malloc_definitions(f)


def test_missing_file_names_the_path(tmp_path):
    with pytest.raises(ServerError, match="nope"):
        malloc_definitions(tmp_path / "nope")


def test_refuse_preload_into_self_allocating_binary(binaries):
    with pytest.raises(
        AllocatorError, match=r"defines calloc, free, malloc, realloc itself.*'builtin'"
    ):
        refuse_self_allocating(binaries["own"], _alloc("system", "glibc"))


def test_builtin_is_allowed_for_self_allocating_binary(binaries):
    assert "malloc" in refuse_self_allocating(binaries["own"], _alloc("builtin", "builtin"))


def test_plain_binary_is_accepted_for_preload(binaries):
    assert refuse_self_allocating(binaries["plain"], _alloc("system", "glibc")) == []


def test_unusable_allocator_refused_with_reason(binaries):
    a = Allocator(
        name="jemalloc",
        kind="preload",
        family="jemalloc",
        library=None,
        usable=False,
        why_not="none of /x/libjemalloc.so.2 exists",
    )
    with pytest.raises(AllocatorError, match="/x/libjemalloc.so.2"):
        refuse_self_allocating(binaries["plain"], a)


def test_static_binary_refused(binaries):
    try:
        static = _cc(
            binaries["tmp"],
            "static",
            "int main(void){return 0;}",
            "-static",
            "-nostdlib",
            "-e",
            "main",
        )
    except subprocess.CalledProcessError:
        pytest.skip("gcc cannot link a static binary here")
    with pytest.raises(AllocatorError, match="statically linked"):
        refuse_self_allocating(static, _alloc("system", "glibc"))


def test_family_of_installed_allocators():
    libs = {
        "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2": "jemalloc",
        "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4": "tcmalloc",
        "/usr/lib/x86_64-linux-gnu/libmimalloc.so.2": "mimalloc",
        "/usr/lib/x86_64-linux-gnu/libtbbmalloc_proxy.so.2": "tbbmalloc",
    }
    present = {p: f for p, f in libs.items() if Path(p).exists()}
    if not present:
        pytest.skip("no Debian allocator packages installed (make setup installs them)")
    for path, family in present.items():
        assert allocator_family(Path(path)) == family, path


def _libc_path() -> Path:
    """The libc.so this very interpreter has mapped: a real shared object on any glibc system."""
    for line in Path("/proc/self/maps").read_text().splitlines():
        path = line.split(None, 5)[-1]
        if "/libc.so" in path or "/libc-" in path:
            return Path(path)
    pytest.skip("no libc.so mapped in this process (not a glibc system)")


@pytest.mark.parametrize("keep", [20, 64, 1000, 0.5, -200])
def test_truncated_shared_object_is_a_one_line_malformed_elf(tmp_path, keep):
    """A damaged copy (a cut download, a full disk) is the user's problem to fix, not an internal
    error: every reader says which file and that it is malformed."""
    data = _libc_path().read_bytes()
    n = int(len(data) * keep) if isinstance(keep, float) else keep % len(data)
    cut = tmp_path / "libcut.so"
    cut.write_bytes(data[:n])
    for read in (malloc_definitions, elf_info, allocator_family):
        with pytest.raises(ServerError) as e:
            read(cut)
        msg = str(e.value)
        assert msg.startswith(f"{cut}: malformed ELF: ") and "\n" not in msg, (read, msg)


def test_intact_shared_object_still_reads(tmp_path):
    lib = tmp_path / "libc-copy.so"
    lib.write_bytes(_libc_path().read_bytes())
    assert "malloc" in malloc_definitions(lib)
    assert elf_info(lib).elf_type == "ET_DYN"
