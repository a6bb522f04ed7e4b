"""The release metric (rundir.derive.scenario.release) on a program whose answer is known: it
mallocs a known amount in small blocks, touches it, frees it, and idles, while RSS is read
through the collectors' own /proc reader at the same moments a spike cycle reads it (before the
burst, at its end, then through the idle time). Under allocators with known settings:

- glibc, everything freed: the main arena's top is trimmed at free (trim_threshold 128 KiB):
  nearly all of it comes back;
- glibc, one block kept at the top of the heap: free cannot trim below it, and glibc does not
  give back free chunks in the middle: nearly nothing comes back;
- jemalloc with dirty_decay_ms:0 and muzzy_decay_ms:0: freed pages are purged at once: nearly all;
- jemalloc with dirty_decay_ms:-1: never purged: nearly nothing.
"""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from collectors.procfs import ProcFS
from rundir.derive.scenario import release
from servers.allocators import resolve
from tests.malloc_programs import build

pytestmark = pytest.mark.integration

BLOCKS, SIZE = 4096, 16 * 1024  # 64 MiB in blocks below glibc's mmap threshold
PROGRAM = rf"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
static char *blocks[{BLOCKS}];
static void step(const char *what) {{ char c; puts(what); fflush(stdout); if (read(0, &c, 1) != 1) exit(1); }}
int main(int argc, char **argv) {{
    int keep_top = argc > 1 && argv[1][0] == 'k';
    step("ready");
    for (int i = 0; i < {BLOCKS}; i++) {{ blocks[i] = malloc({SIZE}); memset(blocks[i], 1, {SIZE}); }}
    step("burst");
    for (int i = 0; i < {BLOCKS} - (keep_top ? 1 : 0); i++) free(blocks[i]);
    step("freed");
    return 0;
}}
"""


class Stepper:
    def __init__(self, program, keep_top: bool, env: dict[str, str]):
        self.p = subprocess.Popen(
            [str(program), "keep" if keep_top else "all"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
        )  # fmt: skip

    def expect(self, word: str) -> None:
        assert self.p.stdout.readline().strip() == word.encode()

    def go(self) -> None:
        self.p.stdin.write(b"x")
        self.p.stdin.flush()

    def close(self) -> None:
        self.p.stdin.close()
        self.p.wait(10)
        self.p.stdout.close()


def measure(program, keep_top: bool, env: dict[str, str]) -> tuple[float | None, float | None]:
    procfs = ProcFS()
    s = Stepper(program, keep_top, env)
    try:
        s.expect("ready")
        pre = procfs.status(s.p.pid).vm_rss_kb
        s.go()
        s.expect("burst")
        end = procfs.status(s.p.pid).vm_rss_kb
        s.go()
        s.expect("freed")
        t0, idle = time.monotonic(), []
        for _ in range(3):
            time.sleep(0.2)
            idle.append((time.monotonic() - t0, procfs.status(s.p.pid).vm_rss_kb))
        s.go()
    finally:
        s.close()
    assert end - pre >= BLOCKS * SIZE // 1024 * 0.9  # the burst really is resident
    return release(pre, end, idle)


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    return build(tmp_path_factory.mktemp("release"), "burst", source=PROGRAM)


def _env(**more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "MALLOC_CONF")}
    return env | more


@pytest.mark.parametrize(
    ("allocator", "conf", "keep_top", "returned"),
    [
        ("glibc", None, False, (0.9, 1.1)),
        ("glibc", None, True, (-0.1, 0.1)),
        ("jemalloc", "dirty_decay_ms:0,muzzy_decay_ms:0", False, (0.9, 1.1)),
        ("jemalloc", "dirty_decay_ms:-1,muzzy_decay_ms:-1", False, (-0.1, 0.1)),
    ],
)
def test_release_of_a_known_burst(program, allocator, conf, keep_top, returned):
    (alloc,) = resolve([allocator])
    if not alloc.usable:
        pytest.skip(f"{allocator} is not installed here ({alloc.why_not}); make setup installs it")
    env = _env(**({"LD_PRELOAD": alloc.library} if alloc.library else {}))
    if conf:
        env["MALLOC_CONF"] = conf
    share, _back_s = measure(program, keep_top, env)
    lo, hi = returned
    assert share is not None and lo <= share <= hi, share
