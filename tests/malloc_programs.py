"""Tiny C programs built with gcc for the malloc-binding tests: one plain, one that links
tcmalloc_minimal itself (DT_NEEDED, like Debian's MySQL 9.7 links libtcmalloc.so.4). Each mallocs
and frees in a loop, prints "ready", and waits for a byte on stdin, so the test reads a process
whose malloc and free have been called (bound) and whose valloc never was (lazy: unbound)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

LOOP = r"""
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
void *volatile keep[64];   /* volatile: gcc may not drop a malloc whose result is unused */
int main(int argc, char **argv) {
    (void)argv;
    for (int i = 0; i < 20000; i++) {
        keep[i % 64] = malloc(16 + i % 512);
        if (i % 64 == 63)
            for (int j = 0; j < 64; j++) { free(keep[j]); keep[j] = 0; }
    }
    if (argc > 5) keep[0] = valloc(4096);  /* never called: its slot stays a lazy PLT stub */
    puts("ready");
    fflush(stdout);
    char c;
    return read(0, &c, 1) < 0;
}
"""
TCMALLOC_MINIMAL = "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4"


def build(tmp: Path, name: str, *flags: str, source: str = LOOP) -> Path:
    """gcc -O1 `source` into tmp/name; lazy binding on purpose (Debian's default, made explicit)."""
    if shutil.which("gcc") is None:
        pytest.skip("gcc is needed to build the test programs (apt-get install gcc)")
    src = tmp / f"{name}.c"
    src.write_text(source)
    out = tmp / name
    subprocess.run(
        ["gcc", "-O1", "-Wl,-z,lazy", "-o", str(out), str(src), *flags],
        check=True,
        capture_output=True,
    )
    return out


def build_linked(tmp: Path, name: str = "linked") -> Path:
    """The loop program with libtcmalloc_minimal.so.4 as DT_NEEDED (linked by full path: the
    package ships no -dev symlink)."""
    if not os.path.exists(TCMALLOC_MINIMAL):
        pytest.skip(f"{TCMALLOC_MINIMAL} is missing: apt-get install libtcmalloc-minimal4")
    return build(tmp, name, TCMALLOC_MINIMAL)


class Running:
    """The program running as our child until the context ends (then released and reaped)."""

    def __init__(self, program: Path, preload: str | None = None):
        env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
        if preload:
            env["LD_PRELOAD"] = preload
        self.proc = subprocess.Popen(
            [str(program)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
        )

    def __enter__(self) -> int:
        line = self.proc.stdout.readline()
        if line.strip() != b"ready":
            self.__exit__()
            raise AssertionError(f"test program did not start: {line!r}")
        return self.proc.pid

    def __exit__(self, *exc) -> None:
        try:
            self.proc.stdin.close()  # read() returns 0: the program exits
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        finally:
            self.proc.stdout.close()
