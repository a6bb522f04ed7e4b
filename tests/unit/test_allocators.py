"""Allocator registry, launch environment, resolve/custom errors, and verification evidence.

Registries here point at a tiny malloc-defining .so built with gcc, so the tests do not depend on
which allocator packages are installed; one test reads the shipped configs/allocators.toml.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from servers.allocators import (
    DEFAULT_REGISTRY,
    Allocator,
    custom_allocator,
    detect_all,
    load_registry,
    resolve,
)
from servers.binding import Binding, Entry
from servers.errors import AllocatorError, ServerError
from servers.verify import server_agreement, verify_allocator

FAKE_ALLOC = r"""
#include <stddef.h>
void *malloc(size_t n) { (void)n; return NULL; }
void free(void *p) { (void)p; }
int mallctl(const char *n, void *o, size_t *ol, void *np, size_t nl) { return 0; }
"""
NOT_ALLOC = "int answer(void) { return 42; }\n"

needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc builds the test libraries")


@pytest.fixture(scope="module")
def libs(tmp_path_factory):
    if shutil.which("gcc") is None:
        pytest.skip("gcc builds the test libraries")
    tmp = tmp_path_factory.mktemp("libs")
    out = {}
    for name, src in (("libfake.so", FAKE_ALLOC), ("libnotalloc.so", NOT_ALLOC)):
        c = tmp / f"{name}.c"
        c.write_text(src)
        subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(tmp / name), str(c)], check=True)
        out[name] = str(tmp / name)
    text = tmp / "notelf.so"
    text.write_text("not an ELF file\n")
    out["notelf.so"] = str(text)
    return out


def _registry(tmp_path: Path, body: str) -> Path:
    p = tmp_path / "allocators.toml"
    p.write_text(body)
    return p


@pytest.fixture
def registry(tmp_path, libs):
    return load_registry(
        _registry(
            tmp_path,
            f"""
[allocator.glibc]
kind = "system"
core = true
family = "glibc"
package = "libc6"

[allocator.fake]
kind = "preload"
core = true
family = "jemalloc"
package = "libfake1"
library = ["/nonexistent/libfake.so", "{libs["libfake.so"]}"]
env = {{ MALLOC_CONF = "narenas:2" }}

[allocator.gone]
kind = "preload"
core = true
family = "mimalloc"
package = "libgone9"
library = ["/nonexistent/libgone.so.2"]

[allocator.fake-thp]
base = "fake"
env = {{ MALLOC_CONF = "thp:always" }}
tunables = ["glibc.malloc.arena_max=1"]

[allocator.glibc-future]
base = "glibc"
tunables = ["glibc.malloc.hugetlb=1"]
min_glibc = "99.0"
""",
        )
    )


# -- the shipped registry ------------------------------------------------------------------------


def test_shipped_registry_has_six_core_allocators():
    reg = load_registry(DEFAULT_REGISTRY)
    core = [n for n, s in reg.items() if s.core]
    assert core == ["glibc", "jemalloc", "tcmalloc", "tcmalloc-minimal", "mimalloc", "tbbmalloc"]
    assert reg["glibc"].kind == "system" and reg["glibc"].library == ()
    assert all("_debug" not in p for p in reg["tcmalloc"].library)
    assert all("libtbbmalloc_proxy.so.2" in p for p in reg["tbbmalloc"].library)
    assert all(p.startswith("/") for s in reg.values() for p in s.library)
    assert reg["glibc-arena1"].tunables == ("glibc.malloc.arena_max=1",)
    assert reg["glibc-notcache"].tunables == ("glibc.malloc.tcache_count=0",)
    assert reg["jemalloc-thp"].env["MALLOC_CONF"] == "thp:always,metadata_thp:auto"
    assert reg["jemalloc-thp"].library == reg["jemalloc"].library and not reg["jemalloc-thp"].core
    assert reg["builtin"].kind == "builtin"


# -- registry validation -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body, where",
    [
        (
            '[allocator.x]\nkind = "preload"\nfamily = "x"\nlibrary = ["libx.so"]\n',
            "allocator.x.library",
        ),
        ('[allocator.x]\nkind = "magic"\nfamily = "x"\n', "allocator.x.kind"),
        ('[allocator.x]\nkind = "system"\nfamily = "x"\ncolour = 1\n', "allocator.x.colour"),
        ('[allocator.x]\nkind = "preload"\nfamily = "x"\n', "allocator.x.library"),
        ('[allocator.x]\nbase = "nothere"\n', "allocator.x.base"),
        (
            '[allocator.x]\nkind = "system"\nfamily = "x"\ntunables = ["arena_max=1"]\n',
            "allocator.x.tunables",
        ),
        (
            '[allocator.x]\nkind = "system"\nfamily = "x"\nenv = { LD_PRELOAD = "/a.so" }\n',
            "allocator.x.env",
        ),
        ('[allocator.x]\nkind = "system"\nfamily = "x"\ncore = "yes"\n', "allocator.x.core"),
        ("[allocator.x\n", "cannot read"),
        ("[other]\n", "other"),
    ],
)
def test_bad_registry_names_file_and_field(tmp_path, body, where):
    path = _registry(tmp_path, body)
    with pytest.raises(AllocatorError) as e:
        load_registry(path)
    assert str(path) in str(e.value) and where in str(e.value)


def test_missing_registry_file(tmp_path):
    with pytest.raises(AllocatorError, match="not found"):
        load_registry(tmp_path / "none.toml")


# -- detection -----------------------------------------------------------------------------------


def test_detect_all_reports_every_entry_with_why(registry, libs):
    found = {a.name: a for a in detect_all(registry)}
    assert list(found) == ["glibc", "fake", "gone", "fake-thp", "glibc-future"]
    fake = found["fake"]
    assert fake.usable and fake.library == os.path.realpath(libs["libfake.so"])
    assert len(fake.sha256) == 64
    gone = found["gone"]
    assert (
        not gone.usable
        and "/nonexistent/libgone.so.2" in gone.why_not
        and "libgone9" in gone.why_not
    )
    assert not found["glibc-future"].usable and "99.0" in found["glibc-future"].why_not
    assert found["glibc"].usable and found["glibc"].library is None


def test_variant_merges_env_and_tunables(registry):
    v = {a.name: a for a in detect_all(registry)}["fake-thp"]
    assert v.env == {"MALLOC_CONF": "thp:always"} and v.tunables == ("glibc.malloc.arena_max=1",)
    assert v.family == "jemalloc" and not v.core and v.base == "fake"


def test_all_means_usable_core(registry):
    assert [a.name for a in resolve(["all"], registry=registry)] == ["glibc", "fake"]


def test_named_unusable_is_returned_with_reason(registry):
    (a,) = resolve(["gone"], registry=registry)
    assert not a.usable and "libgone.so.2" in a.why_not


def test_unknown_name_lists_known(registry):
    with pytest.raises(
        AllocatorError, match=r"unknown allocator 'jemaloc'; known: all, glibc, fake"
    ):
        resolve(["jemaloc"], registry=registry)


def test_resolve_keeps_order_without_duplicates(registry):
    assert [a.name for a in resolve(["fake", "all", "fake-thp"], registry=registry)] == [
        "fake",
        "glibc",
        "fake-thp",
    ]


# -- custom allocators from a suite --------------------------------------------------------------


def test_custom_allocator(registry, libs):
    custom = [
        {
            "name": "mine",
            "library": libs["libfake.so"],
            "env": {"X": "1"},
            "tunables": ["glibc.malloc.arena_max=2"],
        }
    ]
    got = resolve(["mine"], custom=custom, registry=registry)
    (a,) = got
    assert a.kind == "preload" and a.custom and a.family == "jemalloc"  # from its mallctl symbol
    assert a.launch_env({})["LD_PRELOAD"] == os.path.realpath(libs["libfake.so"])
    assert "mine" in [x.name for x in resolve(["all"], custom=custom, registry=registry)]


@pytest.mark.parametrize(
    "entry, message",
    [
        ({"name": "m", "library": "/nonexistent/libm.so"}, "/nonexistent/libm.so does not exist"),
        ({"name": "m", "library": "relative.so"}, "absolute path"),
        ({"name": "m", "library": "@notelf.so"}, "not an ELF file"),
        ({"name": "m", "library": "@libnotalloc.so"}, "does not define malloc"),
        ({"name": "fake", "library": "@libfake.so"}, "already used"),
        ({"name": "all", "library": "@libfake.so"}, "name must be"),
        ({"name": "m", "library": "@libfake.so", "tunables": ["nope"]}, "tunables item 'nope'"),
    ],
)
def test_bad_custom_allocator(registry, libs, entry, message):
    entry = dict(entry)
    if entry["library"].startswith("@"):
        entry["library"] = libs[entry["library"][1:]]
    with pytest.raises(AllocatorError, match=message):
        resolve(["all"], custom=[entry], registry=registry)


# -- launch environment --------------------------------------------------------------------------


def test_launch_env_preload_and_env(registry, libs):
    (a,) = resolve(["fake"], registry=registry)
    env = a.launch_env({"PATH": "/bin", "LD_PRELOAD": "/other/libstray.so"})
    assert env == {"PATH": "/bin", "LD_PRELOAD": a.library, "MALLOC_CONF": "narenas:2"}
    assert os.path.isabs(env["LD_PRELOAD"])


def test_launch_env_appends_tunables_to_existing(registry):
    (a,) = resolve(["fake-thp"], registry=registry)
    env = a.launch_env({"GLIBC_TUNABLES": "glibc.pthread.rseq=0"})
    assert env["GLIBC_TUNABLES"] == "glibc.pthread.rseq=0:glibc.malloc.arena_max=1"


def test_launch_env_system_preloads_nothing(registry):
    (g,) = resolve(["glibc"], registry=registry)
    env = g.launch_env({"PATH": "/bin", "LD_PRELOAD": "/x/libjemalloc.so.2"})
    assert env == {"PATH": "/bin"}


def test_launch_env_env_tunables_are_appended_too():
    a = Allocator(
        name="t",
        kind="system",
        family="glibc",
        library=None,
        env={"GLIBC_TUNABLES": "glibc.malloc.tcache_count=0"},
        tunables=("glibc.malloc.arena_max=1",),
    )
    assert a.launch_env({"GLIBC_TUNABLES": "a.b.c=1"})["GLIBC_TUNABLES"] == (
        "a.b.c=1:glibc.malloc.tcache_count=0:glibc.malloc.arena_max=1"
    )


def test_manifest_has_provenance(registry):
    (a,) = resolve(["fake"], registry=registry)
    m = a.to_manifest()
    assert (
        m["library"] == a.library
        and m["sha256"] == a.sha256
        and m["env"] == {"MALLOC_CONF": "narenas:2"}
    )


# -- verification (procfs injected) --------------------------------------------------------------


def _fake_proc(root: Path, pid: int, maps: list[str], env: dict[str, str]) -> str:
    d = root / str(pid)
    d.mkdir(parents=True)
    lines = [f"7f0000000000-7f0000001000 r-xp 00000000 08:01 {ino} {path}" for path, ino in maps]
    lines.append("7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0 [stack]")
    (d / "maps").write_text("\n".join(lines) + "\n")
    (d / "environ").write_bytes(b"\0".join(f"{k}={v}".encode() for k, v in env.items()) + b"\0")
    return str(root)


def _bound(pid: int, library: str) -> Binding:
    """A binding as read from a process whose malloc and free are bound to `library` (the fake
    procfs has no memory to read GOT entries from; tests/integration/test_binding.py reads real
    ones)."""
    entries = tuple(
        Entry("/bin/p", sym, "JUMP_SLOT", 0x4000 + 8 * i, 0x7F0000000100, "bound", library)
        for i, sym in enumerate(("malloc", "free"))
    )
    return Binding(pid, ("/bin/p",), entries, ())


@pytest.fixture(scope="module")
def plain_binary(tmp_path_factory):
    if shutil.which("gcc") is None:
        pytest.skip("gcc builds the test binary")
    tmp = tmp_path_factory.mktemp("bin")
    (tmp / "p.c").write_text("int main(void){return 0;}\n")
    subprocess.run(["gcc", "-o", str(tmp / "p"), str(tmp / "p.c")], check=True)
    return tmp / "p"


def test_verify_preloaded_library_mapped(tmp_path, registry, plain_binary):
    (a,) = resolve(["fake"], registry=registry)
    root = _fake_proc(
        tmp_path / "proc",
        42,
        [(a.library, os.stat(a.library).st_ino)],
        {"LD_PRELOAD": a.library, "MALLOC_CONF": "narenas:2", "HOME": "/x"},
    )
    ev = verify_allocator(
        42, a, plain_binary, "jemalloc 5.3.0", proc_root=root, binding=_bound(42, a.library)
    )
    assert ev["verdict"] == "verified" and ev["library_mapped"] == [a.library]
    assert ev["server_agreement"] == "agrees"
    assert ev["process_env"] == {"LD_PRELOAD": a.library, "MALLOC_CONF": "narenas:2"}


def test_verify_fails_when_the_setting_did_not_reach_the_process(tmp_path, registry, plain_binary):
    # A tuned arm's MALLOC_CONF is read back from /proc/PID/environ: another value is a failed
    # proof, never a measurement of the wrong setting.
    (a,) = resolve(["fake"], registry=registry)
    a = dataclasses.replace(a, env={"MALLOC_CONF": "narenas:2,dirty_decay_ms:0"})
    root = _fake_proc(
        tmp_path / "proc",
        42,
        [(a.library, os.stat(a.library).st_ino)],
        {"LD_PRELOAD": a.library, "MALLOC_CONF": "narenas:2"},
    )
    with pytest.raises(AllocatorError, match="has MALLOC_CONF='narenas:2', not 'narenas:2,dirty"):
        verify_allocator(42, a, plain_binary, proc_root=root, binding=_bound(42, a.library))


def test_verify_fails_when_library_not_mapped(tmp_path, registry, plain_binary):
    (a,) = resolve(["fake"], registry=registry)
    root = _fake_proc(tmp_path / "proc", 42, [("/usr/lib/libc.so.6", 5)], {"LD_PRELOAD": a.library})
    with pytest.raises(AllocatorError, match=r"allocator 'fake' not verified.*is not mapped") as e:
        verify_allocator(42, a, plain_binary, proc_root=root, binding=_bound(42, a.library))
    assert e.value.evidence["verdict"] == "failed"


def test_verify_glibc_refuses_any_allocator_library(tmp_path, registry, plain_binary):
    (g,) = resolve(["glibc"], registry=registry)
    libc = "/usr/lib/x86_64-linux-gnu/libc.so.6"
    tc = "/usr/lib/x86_64-linux-gnu/libtcmalloc.so.4.5.10"
    root = _fake_proc(tmp_path / "proc", 7, [(libc, 5), (tc, 9)], {})
    # Bound to libc, but an allocator the binary does not link is mapped: unexplained, refused.
    with pytest.raises(AllocatorError, match="other allocator libraries are mapped: .*4.5.10"):
        verify_allocator(7, g, plain_binary, proc_root=root, binding=_bound(7, libc))


def test_verify_glibc_fails_when_malloc_is_bound_elsewhere(tmp_path, registry, plain_binary):
    (g,) = resolve(["glibc"], registry=registry)
    libc = "/usr/lib/x86_64-linux-gnu/libc.so.6"
    root = _fake_proc(tmp_path / "proc", 9, [(libc, 5)], {})
    ev = verify_allocator(9, g, plain_binary, proc_root=root, binding=_bound(9, libc))
    assert ev["verdict"] == "verified" and ev["bound_to"]["malloc"] == [libc]
    # Same maps, but the GOT says the calls go to a library outside libc: not glibc.
    with pytest.raises(AllocatorError, match=r"malloc is bound to /opt/x/libfoo.so, not to .*libc"):
        verify_allocator(9, g, plain_binary, proc_root=root, binding=_bound(9, "/opt/x/libfoo.so"))


def test_verify_preload_fails_without_bound_calls(tmp_path, registry, plain_binary):
    (a,) = resolve(["fake"], registry=registry)
    root = _fake_proc(
        tmp_path / "proc", 10, [(a.library, os.stat(a.library).st_ino)], {"LD_PRELOAD": a.library}
    )
    lazy = Binding(
        10, ("/bin/p",), (Entry("/bin/p", "malloc", "JUMP_SLOT", 1, 2, "unbound", None),), ()
    )
    with pytest.raises(AllocatorError, match="no bound malloc found in /bin/p"):
        verify_allocator(10, a, plain_binary, proc_root=root, binding=lazy)


def test_verify_server_contradiction_fails(tmp_path, registry, plain_binary):
    (a,) = resolve(["fake"], registry=registry)  # family jemalloc
    root = _fake_proc(
        tmp_path / "proc", 8, [(a.library, os.stat(a.library).st_ino)], {"LD_PRELOAD": a.library}
    )
    with pytest.raises(
        AllocatorError, match="server reports malloc library 'tcmalloc gperftools 2.10'"
    ):
        verify_allocator(
            8,
            a,
            plain_binary,
            server_reported="tcmalloc gperftools 2.10",
            proc_root=root,
            binding=_bound(8, a.library),
        )


def test_verify_gone_process(tmp_path, registry, plain_binary):
    (g,) = resolve(["glibc"], registry=registry)
    with pytest.raises(ServerError, match="exited before"):
        verify_allocator(99, g, plain_binary, proc_root=str(tmp_path))


@pytest.mark.parametrize(
    "family, reported, expected",
    [
        ("glibc", "system", "agrees"),
        ("jemalloc", "jemalloc 5.3.0-0-g54eaed1d", "agrees"),
        ("tcmalloc", "tcmalloc gperftools 2.10", "agrees"),
        ("mimalloc", "system", "not-detectable-by-server"),
        ("tbbmalloc", "system", "not-detectable-by-server"),
        ("tcmalloc", "jemalloc 5.3.0", "disagrees"),
        ("jemalloc", "system", "disagrees"),
        ("glibc", "jemalloc 5.3.0", "disagrees"),
        ("glibc", None, "not-reported"),
    ],
)
def test_server_agreement(family, reported, expected):
    a = Allocator(
        name=family, kind="system" if family == "glibc" else "preload", family=family, library=None
    )
    assert server_agreement(a, reported) == expected


def test_server_agreement_builtin_is_recorded_not_judged():
    a = Allocator(name="builtin", kind="builtin", family="builtin", library=None)
    assert server_agreement(a, "tcmalloc gperftools 2.10") == "not-applicable"


# -- companions: only the libraries an allocator loads itself may be mapped beside it ------------


@pytest.fixture
def family_libs(tmp_path):
    """Malloc-defining libraries named like real ones, in one directory (as in /usr/lib)."""
    if shutil.which("gcc") is None:
        pytest.skip("gcc builds the test libraries")
    d = tmp_path / "lib"
    d.mkdir()
    src = tmp_path / "a.c"
    src.write_text(FAKE_ALLOC)
    names = [
        "libtbbmalloc_proxy.so.2",
        "libtbbmalloc.so.2",
        "libtcmalloc_minimal.so.4",
        "libtcmalloc.so.4",
        "libtcmalloc_debug.so.4",
    ]
    for n in names:
        subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(d / n), str(src)], check=True)
    other = tmp_path / "elsewhere"
    other.mkdir()
    shutil.copy(d / "libtbbmalloc.so.2", other / "libtbbmalloc.so.2")
    return d, other


def _family_registry(tmp_path: Path, d: Path) -> dict:
    return load_registry(
        _registry(
            tmp_path,
            f"""
[allocator.tbbmalloc]
kind = "preload"
family = "tbbmalloc"
library = ["{d}/libtbbmalloc_proxy.so.2"]
companions = ["libtbbmalloc.so.2"]

[allocator.tcmalloc-minimal]
kind = "preload"
family = "tcmalloc"
library = ["{d}/libtcmalloc_minimal.so.4"]
""",
        )
    )


def _mapped(*paths: Path) -> list[tuple[str, int]]:
    return [(str(p), os.stat(p).st_ino) for p in paths]


def test_verify_accepts_the_named_companion(tmp_path, family_libs, plain_binary):
    d, _ = family_libs
    (tbb,) = resolve(["tbbmalloc"], registry=_family_registry(tmp_path, d))
    assert tbb.companions == ("libtbbmalloc.so.2",)
    root = _fake_proc(
        tmp_path / "proc",
        50,
        _mapped(d / "libtbbmalloc_proxy.so.2", d / "libtbbmalloc.so.2"),
        {"LD_PRELOAD": tbb.library},
    )
    ev = verify_allocator(50, tbb, plain_binary, proc_root=root, binding=_bound(50, tbb.library))
    assert ev["verdict"] == "verified"
    assert ev["companion_libraries_mapped"] == [str(d / "libtbbmalloc.so.2")]


def test_verify_refuses_a_same_family_library_that_is_no_companion(
    tmp_path, family_libs, plain_binary
):
    d, _ = family_libs
    (tcm,) = resolve(["tcmalloc-minimal"], registry=_family_registry(tmp_path, d))
    root = _fake_proc(
        tmp_path / "proc",
        51,
        _mapped(
            d / "libtcmalloc_minimal.so.4", d / "libtcmalloc.so.4", d / "libtcmalloc_debug.so.4"
        ),
        {"LD_PRELOAD": tcm.library},
    )
    with pytest.raises(AllocatorError, match="other allocator libraries are mapped") as e:
        verify_allocator(51, tcm, plain_binary, proc_root=root, binding=_bound(51, tcm.library))
    assert e.value.evidence["foreign_allocator_libraries"] == [
        str(d / "libtcmalloc.so.4"),
        str(d / "libtcmalloc_debug.so.4"),
    ]


def test_verify_companion_must_be_the_one_beside_the_library(tmp_path, family_libs, plain_binary):
    d, other = family_libs
    (tbb,) = resolve(["tbbmalloc"], registry=_family_registry(tmp_path, d))
    root = _fake_proc(
        tmp_path / "proc",
        52,
        _mapped(d / "libtbbmalloc_proxy.so.2", other / "libtbbmalloc.so.2"),
        {"LD_PRELOAD": tbb.library},
    )
    with pytest.raises(AllocatorError, match=str(other / "libtbbmalloc.so.2")):
        verify_allocator(52, tbb, plain_binary, proc_root=root, binding=_bound(52, tbb.library))


def test_companions_must_be_file_names(tmp_path):
    path = _registry(
        tmp_path,
        '[allocator.x]\nkind = "preload"\nfamily = "x"\nlibrary = ["/l/libx.so"]\n'
        'companions = ["/usr/lib/liby.so"]\n',
    )
    with pytest.raises(AllocatorError, match=r"allocator\.x\.companions: expected library file"):
        load_registry(path)


def test_shipped_tbbmalloc_names_its_companion():
    reg = load_registry(DEFAULT_REGISTRY)
    assert reg["tbbmalloc"].companions == ("libtbbmalloc.so.2",)
    assert all(not reg[n].companions for n in ("jemalloc", "tcmalloc", "tcmalloc-minimal"))


def test_custom_allocator_companions_may_be_mapped_beside_it(tmp_path, family_libs, plain_binary):
    # A proxy from a suite file that loads an allocator library from another directory: named as a
    # companion (an absolute path), it passes; without it, the same process is a second heap.
    d, other = family_libs
    entry = {"name": "myproxy", "library": str(d / "libtbbmalloc_proxy.so.2")}
    maps = _mapped(d / "libtbbmalloc_proxy.so.2", other / "libtbbmalloc.so.2")
    with_companion = custom_allocator(entry | {"companions": [str(other / "libtbbmalloc.so.2")]})
    assert with_companion.companions == (str(other / "libtbbmalloc.so.2"),)
    assert with_companion.to_manifest()["companions"] == [str(other / "libtbbmalloc.so.2")]
    env = {"LD_PRELOAD": with_companion.library}
    root = _fake_proc(tmp_path / "a", 60, maps, env)
    ev = verify_allocator(
        60,
        with_companion,
        plain_binary,
        proc_root=root,
        binding=_bound(60, str(d / "libtbbmalloc_proxy.so.2")),
    )
    assert ev["verdict"] == "verified"
    assert ev["companion_libraries_mapped"] == [str(other / "libtbbmalloc.so.2")]
    alone = custom_allocator(entry)
    assert alone.companions == ()
    with pytest.raises(AllocatorError, match="other allocator libraries are mapped"):
        verify_allocator(
            61,
            alone,
            plain_binary,
            proc_root=_fake_proc(tmp_path / "b", 61, maps, env),
            binding=_bound(61, str(d / "libtbbmalloc_proxy.so.2")),
        )


@pytest.mark.parametrize(
    "companions, message",
    [
        (["libtbbmalloc.so.2"], "companions must be absolute paths, got 'libtbbmalloc.so.2'"),
        (["/nonexistent/libz.so"], "companion /nonexistent/libz.so does not exist"),
        ("/x/liby.so", "companions must be a list of paths"),
    ],
)
def test_custom_allocator_companions_are_checked(family_libs, companions, message):
    d, _ = family_libs
    entry = {"name": "p", "library": str(d / "libtbbmalloc_proxy.so.2"), "companions": companions}
    with pytest.raises(AllocatorError, match=re.escape(f"custom allocator 'p': {message}")):
        custom_allocator(entry)


def test_tunables_split_by_glibc_itself_still_verify(tmp_path, plain_binary):
    """glibc writes a NUL where each ':' of GLIBC_TUNABLES was, in the process's own environment
    block (seen with Debian's glibc 2.36): /proc/PID/environ then holds the items after the first
    as entries of their own. A variant with two tunables (glibc-trim), or one appended to a
    user's own, is verified from all of them."""
    (trim,) = resolve(["glibc-trim"])
    env = {"GLIBC_TUNABLES": "glibc.pthread.rseq=0", **dict(t.split("=") for t in trim.tunables)}
    root = _fake_proc(tmp_path / "proc", 9, [("/usr/lib/x86_64-linux-gnu/libc.so.6", 5)], env)
    ev = verify_allocator(
        9,
        trim,
        plain_binary,
        proc_root=root,
        binding=_bound(9, "/usr/lib/x86_64-linux-gnu/libc.so.6"),
    )
    assert ev["verdict"] == "verified"
    env.pop(trim.tunables[1].split("=")[0])
    root = _fake_proc(tmp_path / "proc2", 9, [("/usr/lib/x86_64-linux-gnu/libc.so.6", 5)], env)
    with pytest.raises(AllocatorError, match=r"lacks glibc\.malloc\.mmap_threshold=131072"):
        verify_allocator(
            9,
            trim,
            plain_binary,
            proc_root=root,
            binding=_bound(9, "/usr/lib/x86_64-linux-gnu/libc.so.6"),
        )
