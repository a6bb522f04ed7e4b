"""The declared search spaces (configs/allocators.toml, [allocator.NAME.tune]) against the
installed libraries: every knob, at its bounds, in between and at each choice, is given to the
library the way a tuned server gets it, and the library reads the value back:

- jemalloc: mallctl("opt.KEY") in a process with MALLOC_CONF (and nothing on stderr: jemalloc
  says "Invalid conf pair" there and ignores a knob it does not know);
- glibc: `ld.so --list-tunables` under GLIBC_TUNABLES (glibc ignores an unknown or out-of-range
  tunable silently: only the read-back shows it took);
- gperftools: MallocExtension's numeric properties and GetMemoryReleaseRate;
- mimalloc: its own list of the options it read (MIMALLOC_VERBOSE=1).

A declared knob the installed library does not take fails here, not in a two-hour tune.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from servers.allocators import resolve
from suites.tune.space import Knob, declared_spaces

pytestmark = pytest.mark.integration

SPACES = declared_spaces()


def _values(k: Knob) -> list:
    if k.kind == "choice":
        return list(k.choices)
    if k.kind == "int":
        return [int(k.low), int(k.high), int((k.low + k.high) // 3)]
    return [k.low, k.high, round((k.low + k.high) / 3, 1)]


def _library(name: str) -> str:
    (a,) = resolve([name])
    if not a.usable:
        pytest.skip(f"{name}: {a.why_not}")
    return a.library


def _python(code: str, env: dict) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "MALLOC_CONF")}
    return subprocess.run(
        [sys.executable, "-c", code], env=base | env, capture_output=True, text=True, timeout=60
    )


JEMALLOC_READ = """
import ctypes, json, sys
ctl = ctypes.CDLL(None).mallctl
kinds = {"narenas": ctypes.c_uint, "dirty_decay_ms": ctypes.c_ssize_t,
         "muzzy_decay_ms": ctypes.c_ssize_t, "background_thread": ctypes.c_bool,
         "tcache_max": ctypes.c_size_t}
out = {}
for key in sys.argv[1:] or json.loads(input()):
    v = kinds.get(key, ctypes.c_char_p)()
    size = ctypes.c_size_t(ctypes.sizeof(v))
    rc = ctl(("opt." + key).encode(), ctypes.byref(v), ctypes.byref(size), None, 0)
    val = v.value.decode() if isinstance(v.value, bytes) else v.value
    out[key] = None if rc else (str(val).lower() if isinstance(val, bool) else str(val))
print(json.dumps(out))
"""


@pytest.mark.parametrize("name", sorted(SPACES["jemalloc"].knobs))
def test_jemalloc_takes_every_declared_value(name):
    lib = _library("jemalloc")
    knob = SPACES["jemalloc"].knobs[name]
    for value in _values(knob):
        text = knob.text(value)
        p = _python(
            JEMALLOC_READ.replace("sys.argv[1:] or json.loads(input())", repr([name])),
            {"LD_PRELOAD": lib, "MALLOC_CONF": f"{name}:{text}"},
        )
        assert p.returncode == 0, p.stderr
        assert "<jemalloc>" not in p.stderr, p.stderr
        assert p.stdout.strip() == f'{{"{name}": "{text}"}}', (name, text, p.stdout)


def _tunables(items: str) -> dict[str, int]:
    ld = next(
        (
            p
            for p in ("/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1")
            if os.path.exists(p)
        ),
        None,
    )
    if ld is None:
        pytest.skip("no dynamic loader at a known path")
    p = subprocess.run(
        [ld, "--list-tunables"], env={"GLIBC_TUNABLES": items}, capture_output=True, text=True
    )
    assert p.returncode == 0, p.stderr
    return {
        m.group(1): int(m.group(2), 0)
        for m in re.finditer(r"^(glibc\.malloc\.\w+): (\S+) ", p.stdout, re.M)
    }


@pytest.mark.parametrize("name", sorted(SPACES["glibc"].knobs))
def test_glibc_takes_every_declared_tunable(name):
    knob = SPACES["glibc"].knobs[name]
    for value in _values(knob):
        (item,) = SPACES["glibc"].env_of({name: value})[1]
        assert _tunables(item)[f"glibc.malloc.{name}"] == int(value), item


TCMALLOC_READ = """
import ctypes, json
lib = ctypes.CDLL(None)
def prop(name):
    v = ctypes.c_size_t()
    return v.value if lib.MallocExtension_GetNumericProperty(name.encode(), ctypes.byref(v)) else None
instance = lib._ZN15MallocExtension8instanceEv
instance.restype = ctypes.c_void_p
rate = lib._ZN22TCMallocImplementation20GetMemoryReleaseRateEv
rate.restype, rate.argtypes = ctypes.c_double, [ctypes.c_void_p]
print(json.dumps({
    "TCMALLOC_RELEASE_RATE": rate(instance()),
    "TCMALLOC_MAX_TOTAL_THREAD_CACHE_BYTES": prop("tcmalloc.max_total_thread_cache_bytes"),
    "TCMALLOC_AGGRESSIVE_DECOMMIT": prop("tcmalloc.aggressive_memory_decommit"),
}))
"""


@pytest.mark.parametrize("allocator", ["tcmalloc", "tcmalloc-minimal"])
def test_gperftools_takes_every_declared_value(allocator):
    import json

    lib = _library(allocator)
    space = SPACES[allocator]
    for knob in space.knobs.values():
        for value in _values(knob):
            env, _ = space.env_of({knob.name: value})
            p = _python(TCMALLOC_READ, {"LD_PRELOAD": lib, **env})
            assert p.returncode == 0, p.stderr
            got = json.loads(p.stdout)[knob.env]
            want = {"true": 1, "false": 0}.get(knob.text(value), value)
            assert float(got) == pytest.approx(float(want)), (knob.name, value, got)


@pytest.mark.parametrize("name", sorted(SPACES["mimalloc"].knobs))
def test_mimalloc_takes_every_declared_value(name):
    lib = _library("mimalloc")
    knob = SPACES["mimalloc"].knobs[name]
    for value in _values(knob):
        env, _ = SPACES["mimalloc"].env_of({name: value})
        p = subprocess.run(
            ["/bin/true"],
            env={"LD_PRELOAD": lib, "MIMALLOC_VERBOSE": "1", **env},
            capture_output=True,
            text=True,
            timeout=30,
        )
        read = dict(re.findall(r"option '(\w+)': (-?\d+)", p.stderr))
        assert read.get(name) == knob.text(value), (name, value, p.stderr[:400])
        assert "is deprecated" not in p.stderr, p.stderr[:400]
