"""The malloc binding of real processes under real allocators: a plain program and one that links
tcmalloc_minimal itself (DT_NEEDED), each run with and without a preloaded allocator.

What must hold: a preload wins over the linked tcmalloc (which stays mapped, recorded, but serves
nothing); the plain program under glibc is bound to libc; the linked one's own allocator is its
`builtin` arm, named with library and version; its `glibc` arm is refused before launch; and
a proof that claims an allocator the calls do not reach fails, even when that library is mapped.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from servers.allocators import detect_all
from servers.binding import BOUND, UNBOUND, ProcessGone, read_binding
from servers.errors import AllocatorError
from servers.verify import refuse_self_allocating, verify_allocator
from tests.malloc_programs import TCMALLOC_MINIMAL, Running, build, build_linked

pytestmark = pytest.mark.integration

PRELOADS = ["jemalloc", "mimalloc", "tbbmalloc"]


@pytest.fixture(scope="module")
def progs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bindprog")
    return {"plain": build(tmp, "plain"), "linked": build_linked(tmp)}


@pytest.fixture(scope="module")
def allocators():
    return {a.name: a for a in detect_all()}


def _usable(allocators, name):
    a = allocators[name]
    if not a.usable:
        pytest.skip(f"{name} not installed here: {a.why_not}")
    return a


def _real(path: str) -> str:
    return os.path.realpath(path)


def test_plain_program_under_glibc_is_bound_to_libc(progs, allocators):
    glibc = allocators["glibc"]
    assert refuse_self_allocating(progs["plain"], glibc) == []
    with Running(progs["plain"]) as pid:
        ev = verify_allocator(pid, glibc, progs["plain"])
        binding = read_binding(pid)
    assert ev["verdict"] == "verified"
    libc = [p for p in ev["binding_expected"] if os.path.basename(p).startswith("libc.so")]
    assert libc and ev["bound_to"] == {"malloc": libc, "free": libc}
    # The executable's own slots, read at their GOT addresses: malloc/free bound, valloc lazy.
    exe = {e.symbol: e for e in binding.entries if e.object == str(progs["plain"])}
    assert exe["malloc"].state == BOUND and exe["free"].state == BOUND
    assert exe["valloc"].state == UNBOUND and exe["valloc"].library is None
    assert ev["binding"]["objects"] == [str(progs["plain"])]  # no libstdc++ in a C program
    got = {e["symbol"]: e for e in ev["binding"]["entries"]}
    assert got["malloc"]["got"] == f"{exe['malloc'].got:#x}" and got["valloc"]["state"] == UNBOUND


@pytest.mark.parametrize("name", PRELOADS)
def test_preload_binds_the_plain_program(progs, allocators, name):
    alloc = _usable(allocators, name)
    with Running(progs["plain"], alloc.library) as pid:
        ev = verify_allocator(pid, alloc, progs["plain"])
    assert ev["verdict"] == "verified"
    assert ev["bound_to"]["malloc"] == [alloc.library] == ev["bound_to"]["free"]
    assert ev["mapped_not_bound"] == []


@pytest.mark.parametrize("name", PRELOADS)
def test_preload_wins_over_a_linked_tcmalloc(progs, allocators, name):
    alloc = _usable(allocators, name)
    assert refuse_self_allocating(progs["linked"], alloc) == []  # a preload is allowed
    with Running(progs["linked"], alloc.library) as pid:
        ev = verify_allocator(pid, alloc, progs["linked"])
    tc = _real(TCMALLOC_MINIMAL)
    assert ev["verdict"] == "verified", ev.get("problems")
    assert ev["bound_to"]["malloc"] == [alloc.library] == ev["bound_to"]["free"]
    # Both allocators mapped; the linked one is recorded, not a failure: nothing is bound to it.
    assert tc in ev["allocator_libraries_mapped"] and alloc.library in ev["library_mapped"]
    assert ev["mapped_not_bound"] == [tc]
    assert ev["binary_links_allocators"] == ["libtcmalloc_minimal.so.4"]
    # libstdc++ (which tcmalloc pulls in) was read too, and none of its calls reach tcmalloc.
    assert len(ev["binding"]["objects"]) == 2
    assert all(e["library"] != tc for e in ev["binding"]["entries"])


def test_linked_tcmalloc_is_the_builtin_arm_named_with_version(progs, allocators):
    builtin = allocators["builtin"]
    with Running(progs["linked"]) as pid:
        ev = verify_allocator(pid, builtin, progs["linked"])
    tc = _real(TCMALLOC_MINIMAL)
    assert ev["verdict"] == "verified" and ev["bound_to"]["malloc"] == [tc]
    b = ev["builtin"]
    version = subprocess.run(
        ["dpkg-query", "-W", "-f=${Version}", "libtcmalloc-minimal4"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    assert b["family"] == "tcmalloc" and b["library"] == tc and b["version"] == version
    assert (
        b["label"]
        == f"builtin: tcmalloc (libtcmalloc_minimal.so.4, libtcmalloc-minimal4 {version})"
    )


def test_glibc_is_refused_before_launch_for_a_linked_tcmalloc(progs, allocators):
    with pytest.raises(AllocatorError) as e:
        refuse_self_allocating(progs["linked"], allocators["glibc"])
    msg = str(e.value)
    assert "\n" not in msg
    assert "links libtcmalloc_minimal.so.4 itself: its malloc is tcmalloc, not glibc" in msg
    assert "use 'builtin' to measure it, or a preloaded allocator" in msg


def test_glibc_claim_fails_when_calls_reach_the_linked_tcmalloc(progs, allocators):
    """Had the refusal been bypassed, the proof itself catches it: the binding, not a list of
    mapped files, decides (nothing was preloaded, the env is clean, and still: not glibc)."""
    with Running(progs["linked"]) as pid:
        with pytest.raises(AllocatorError, match="malloc is bound to .*libtcmalloc_minimal") as e:
            verify_allocator(pid, allocators["glibc"], progs["linked"])
    assert e.value.evidence["verdict"] == "failed"


def test_mapped_and_preloaded_is_not_enough_when_another_preload_wins(progs, allocators):
    """jemalloc is mapped and in LD_PRELOAD, but tcmalloc_minimal comes first and gets every
    binding: jemalloc is not the allocator measured, and the proof says where the calls go."""
    je = _usable(allocators, "jemalloc")
    with Running(progs["plain"], f"{TCMALLOC_MINIMAL} {je.library}") as pid:
        with pytest.raises(AllocatorError) as e:
            verify_allocator(pid, je, progs["plain"])
    ev = e.value.evidence
    assert ev["library_mapped"] == [je.library]
    assert ev["bound_to"]["malloc"] == [_real(TCMALLOC_MINIMAL)]
    assert "malloc is bound to" in str(e.value) and "\n" not in str(e.value)


def test_a_process_that_exited_is_gone(progs):
    run = Running(progs["plain"])
    pid = run.__enter__()
    run.__exit__()  # exited and reaped
    with pytest.raises(ProcessGone, match=f"process {pid} is gone"):
        read_binding(pid)


def test_a_zombie_is_gone(progs):
    """Exited but not reaped: maps is empty, the binding cannot be read."""
    proc = subprocess.Popen([str(progs["plain"])], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        proc.stdout.readline()
        proc.stdin.close()
        os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)  # exited, still unreaped
        with pytest.raises(ProcessGone):
            read_binding(proc.pid)
    finally:
        proc.wait()
        proc.stdout.close()


def test_binding_is_read_through_the_process_root(progs, tmp_path):
    """An injected procfs root: the files are opened through <root>/PID/..., not the host path
    (what lets a chrooted server be read from its own root)."""
    fake = tmp_path / "proc"
    with Running(progs["plain"]) as pid:
        (fake / str(pid)).mkdir(parents=True)
        for name in ("maps", "mem", "exe", "root"):
            (fake / str(pid) / name).symlink_to(Path("/proc") / str(pid) / name)
        b = read_binding(pid, proc_root=str(fake))
    assert {e.symbol for e in b.entries if e.state == BOUND} >= {"malloc", "free"}
