"""Build our preload shims (servers/shims/*.c: keep_thp, alloc_stats) on demand with the system compiler.

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

SOURCE = Path(__file__).resolve().parent / "shims" / "keep_thp.c"


def _cache_dir() -> Path:
    return owned_subdir("shims")


def keep_thp_library() -> Path:
    """Absolute path of keep_thp.so, compiling it if this source version was not built yet."""
    return build_shim(SOURCE, "thp.keep_server_thp")


def build_shim(source: Path, needed_by: str, libs: tuple[str, ...] = ("-ldl",)) -> Path:
    """Absolute path of `source` built as a shared library, compiled once per source version."""
    src = source.read_bytes()
    digest = hashlib.sha256(src).hexdigest()[:16]
    out = _cache_dir() / f"{source.stem}-{digest}.so"
    if out.is_file():
        return out
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise ServerError(f"{needed_by} needs a C compiler (apt-get install gcc) to build its shim")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(f".tmp{os.getpid()}")
    r = subprocess.run(
        [cc, "-shared", "-fPIC", "-O2", "-o", str(tmp), str(source), *libs],
        capture_output=True,
        text=True,
    )
    if r.returncode != 0:
        raise ServerError(f"building {source.name} failed: {r.stderr.strip().splitlines()[-1:]}")
    os.replace(tmp, out)
    return out
