"""Build our preload shims (servers/shims/*.c: keep_thp, alloc_stats), and the exec helper where
`make setup` did not, on demand with the system compiler.

Shipped as source, compiled once per source version into the cache, so nothing binary lives in the
repository and the build is reproducible on the machine that runs it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from servers.cachedir import owned_subdir
from servers.errors import ServerError
from servers.shipped import shipped

SOURCE = shipped("servers", "shims", "keep_thp.c")


def _cache_dir() -> Path:
    return owned_subdir("shims")


def keep_thp_library(cache: Path | None = None) -> Path:
    """Absolute path of keep_thp.so, compiling it if this source version was not built yet."""
    return build_shim(SOURCE, "thp.keep_server_thp", cache=cache)


SHIM_FLAGS = ("-shared", "-fPIC", "-O2")


def build_shim(
    source: Path, needed_by: str, libs: tuple[str, ...] = ("-ldl",), cache: Path | None = None
) -> Path:
    """Absolute path of `source` built as a shared library, compiled once per source version."""
    return compile_once(source, needed_by, SHIM_FLAGS, libs, suffix=".so", cache=cache)


def compile_once(
    source: Path,
    needed_by: str,
    flags: tuple[str, ...],
    libs: tuple[str, ...] = (),
    suffix="",
    cache: Path | None = None,
) -> Path:
    """Absolute path of `source` compiled with the system compiler into the cache, once per
    source version (its hash is in the name); a one-line ServerError without a compiler.
    `cache`: another cache's shims directory (a kit prebuilds its shims into its own root's
    cache, where the tool inside finds them by the same name and needs no compiler)."""
    src = source.read_bytes()
    digest = hashlib.sha256(src).hexdigest()[:16]
    out = (cache or _cache_dir()) / f"{source.stem}-{digest}{suffix}"
    if out.is_file():
        return out
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise ServerError(
            f"{needed_by} needs a C compiler to build {source.name}: apt-get install gcc"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f"{out.name}.tmp{os.getpid()}")
    r = subprocess.run(
        [cc, *flags, "-o", str(tmp), str(source), *libs],
        capture_output=True,
        text=True,
    )
    if r.returncode != 0:
        raise ServerError(f"building {source.name} failed: {r.stderr.strip().splitlines()[-1:]}")
    os.replace(tmp, out)
    return out
