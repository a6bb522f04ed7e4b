"""The exposure counter (servers/shims/alloc_count.c) on real programs under real allocators.

A synthetic program makes a known number of calls of each malloc-family function on its main
thread and in threads that exit before the read; the shim's sums must hold them (plus the few
calls the C library makes itself: thread creation, stdio). The binding proof, with the counter
preloaded first, must follow the calls through it to the allocator under test, and must still
fail a claim that the calls do not reach that allocator.
"""

from __future__ import annotations

import os
import subprocess

import pytest

from servers.allocators import detect_all
from servers.alloccount import ALLOC_KINDS, ENV, alloc_count_library
from servers.binding import BOUND, read_binding
from servers.errors import AllocatorError
from servers.verify import verify_allocator
from tests.malloc_programs import Running, build

pytestmark = pytest.mark.integration

ALLOCATORS = ["glibc", "jemalloc", "tcmalloc-minimal", "mimalloc", "tbbmalloc"]
N = 500  # calls of each function per thread

PROGRAM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
/* gcc drops a malloc/free pair whose pointer does not escape; one sink per thread, since
 * KEEP re-reads it: a shared one handed a thread another thread's block to free (a double free
 * in the test program itself, seen as glibc's "double free or corruption" at 3 threads) */
static __thread void *volatile sink;
#define KEEP(x) (sink = (x), sink)
static int with_pvalloc;  /* jemalloc defines no pvalloc: libc's would serve it, jemalloc free it */
static void work(void) {
    for (int i = 0; i < %(n)d; i++) {
        void *p = KEEP(malloc(100)); free(KEEP(p));
        p = KEEP(calloc(10, 10)); free(KEEP(p));
        p = KEEP(malloc(50)); p = KEEP(realloc(p, 100)); free(KEEP(p));
        p = KEEP(memalign(64, 100)); free(KEEP(p));
        if (posix_memalign(&p, 64, 100) == 0) free(KEEP(p));
        p = KEEP(aligned_alloc(64, 128)); free(KEEP(p));
        p = KEEP(valloc(100)); free(KEEP(p));
        if (with_pvalloc) { p = KEEP(pvalloc(100)); free(KEEP(p)); }
    }
}
static void *thread(void *a) { (void)a; work(); return NULL; }
int main(int argc, char **argv) {
    int threads = atoi(argv[1]);
    with_pvalloc = argc > 2;
    typedef int (*sums_t)(uint64_t *, int, uint64_t *);
    sums_t sums = (sums_t)dlsym(RTLD_DEFAULT, "mallocsweep_alloc_counts");
    const char *kinds = dlsym(RTLD_DEFAULT, "mallocsweep_count_kinds");
    if (!sums || !kinds) { puts("no counter"); return 3; }
    uint64_t a[16] = {0}, b[16] = {0}, ba = 0, bb = 0;
    sums(a, 16, &ba);
    work();
    pthread_t t[8];
    for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, thread, NULL);
    for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);  /* exited before the read */
    int blocks = sums(b, 16, &bb);
    printf("kinds %%s\nblocks %%d\nbytes %%llu\n", kinds, blocks, (unsigned long long)(bb - ba));
    for (int k = 0; k < 11; k++) printf("%%llu ", (unsigned long long)(b[k] - a[k]));
    puts("");
    return 0;
}
"""


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("countprog")
    return build(tmp, "calls", "-lpthread", "-ldl", source=PROGRAM % {"n": N})


@pytest.fixture(scope="module")
def allocators():
    return {a.name: a for a in detect_all()}


def _usable(allocators, name):
    a = allocators.get(name)
    if a is None or not a.usable:
        pytest.skip(f"{name} not installed here")
    return a


def _run(program, preload: str, threads: int, pvalloc: bool = True) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    env |= {"LD_PRELOAD": preload, ENV: "1"}
    argv = [str(program), str(threads)] + (["pvalloc"] if pvalloc else [])
    r = subprocess.run(argv, env=env, capture_output=True, text=True,
                       timeout=60)  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    kinds = lines[0].split()[1].split(",")
    counts = [int(x) for x in lines[3].split()]
    return {
        "calls": dict(zip(kinds, counts, strict=True)),
        "blocks": int(lines[1].split()[1]),
        "bytes": int(lines[2].split()[1]),
    }


@pytest.mark.parametrize("name", ALLOCATORS)
def test_counts_every_family_call_on_every_thread(program, allocators, name):
    alloc = _usable(allocators, name)
    preload = " ".join(p for p in (str(alloc_count_library()), alloc.library or "") if p)
    threads = 3
    pv = name != "jemalloc"  # see the program
    got = _run(program, preload, threads, pvalloc=pv)
    runs = 1 + threads  # the main thread's work, then each thread's
    calls = got["calls"]
    assert calls["pvalloc"] == (N * runs if pv else 0), calls
    # Exactly the program's calls of each kind; thread creation adds a calloc per thread (its
    # TLS block) in glibc, and printf/exit free a few: a small, bounded excess, never fewer.
    assert 2 * N * runs <= calls["malloc"] <= 2 * N * runs + 16, calls  # malloc, then realloc's
    for kind in ("realloc", "memalign", "posix_memalign", "aligned_alloc", "valloc"):
        assert N * runs <= calls[kind] <= N * runs + 16, (kind, calls)
    assert N * runs <= calls["calloc"] <= N * runs + 16, calls
    frees = (8 if pv else 7) * N * runs
    assert frees <= calls["free"] <= frees + 64, calls
    assert calls["new"] == 0 and calls["delete"] == 0  # a C program calls no operator new
    # bytes asked: 100 per call except aligned_alloc's 128 and the 50 realloc starts from
    want = N * runs * (100 * (7 if pv else 6) + 128 + 50)
    assert want <= got["bytes"] <= want + 64 * 1024, got
    # one block for the main thread; the exited threads' blocks are adopted by the next thread
    assert 2 <= got["blocks"] <= 1 + threads


def test_counts_of_concurrent_threads_add_up(program, allocators):
    """Threads running at once each write their own block: none of their calls is lost."""
    glibc = _usable(allocators, "glibc")
    assert glibc.library is None
    threads = 8
    got = _run(program, str(alloc_count_library()), threads)
    assert 2 * N * 9 <= got["calls"]["malloc"] <= 2 * N * 9 + 16
    assert sum(got["calls"][k] for k in ALLOC_KINDS) >= 9 * N * 9


def test_without_the_switch_nothing_is_counted(program, allocators):
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", ENV)}
    env["LD_PRELOAD"] = str(alloc_count_library())
    r = subprocess.run([str(program), "1"], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0
    assert set(r.stdout.splitlines()[3].split()) == {"0"}


@pytest.mark.parametrize("name", ["glibc", "jemalloc", "tcmalloc-minimal", "mimalloc", "tbbmalloc"])
def test_binding_proof_follows_the_counter_to_the_allocator(tmp_path, allocators, name):
    alloc = _usable(allocators, name)
    plain = build(tmp_path, "plain")
    counter = str(alloc_count_library())
    preload = " ".join(p for p in (counter, alloc.library or "") if p)
    with Running(plain, preload) as pid:
        ev = verify_allocator(pid, alloc, plain)
        binding = read_binding(pid)
    assert ev["verdict"] == "verified"
    exe = {e.symbol: e for e in binding.entries if e.object == str(plain)}
    for sym in ("malloc", "free"):
        e = exe[sym]
        # the GOT points into the counter; the call is judged where the counter sends it
        assert e.via == counter and e.state == BOUND and e.library != counter
        assert [e.library] == ev["bound_to"][sym]
    if alloc.library:
        assert ev["bound_to"]["malloc"] == [alloc.library]
    else:
        assert os.path.basename(ev["bound_to"]["malloc"][0]).startswith("libc.so")


def test_binding_proof_still_fails_a_wrong_claim_through_the_counter(tmp_path, allocators):
    """jemalloc preloaded behind the counter, the proof asked for mimalloc: it must fail."""
    je, mi = _usable(allocators, "jemalloc"), _usable(allocators, "mimalloc")
    plain = build(tmp_path, "plain")
    with Running(plain, f"{alloc_count_library()} {je.library}") as pid:
        with pytest.raises(AllocatorError, match="malloc is bound to"):
            verify_allocator(pid, mi, plain)
