"""The allocators of a server root: the registry's entries found among the ROOT's own files.

A server in a root runs on that release's libraries, so its allocators are that release's
packages too (names differ between releases — the t64 transition renamed some — so they are found
by file, not by package name), with versions from the root's dpkg database. `glibc` in a root is
the root's glibc. `library` stays a path as seen inside the root: it is what LD_PRELOAD names
there (servers.root), and what verification reaches through /proc/PID/root.
"""

from __future__ import annotations

import os

from servers.allocators import (
    Allocator,
    AllocatorSpec,
    check_preloadable,
    sha256_of,
    spec_fields,
    version_tuple,
)
from servers.root import ServerRoot, package_of_in_root


def _too_old(spec: AllocatorSpec, root: ServerRoot) -> str | None:
    if not spec.min_glibc:
        return None
    if root.glibc is None or version_tuple(root.glibc) < version_tuple(spec.min_glibc):
        return f"needs glibc >= {spec.min_glibc}, root {root.path} has {root.glibc or 'no glibc'}"
    return None


def detect_in_root(spec: AllocatorSpec, root: ServerRoot) -> Allocator:
    """`spec` as found in `root`: usable or not (with why), version from the root's dpkg."""
    common = dict(spec_fields(spec), root=root.path)
    why_not = _too_old(spec, root)
    if spec.kind == "builtin":
        return Allocator(library=None, usable=why_not is None, why_not=why_not, **common)
    candidates = spec.identity if spec.kind == "system" else spec.library
    found = next((p for p in candidates if os.path.isfile(root.host(root.resolve(p)))), None)
    if spec.kind == "system":
        real = root.resolve(found) if found else None
        owner = package_of_in_root(root.path, real) if real else None
        if owner:
            common["package"] = owner[0]
        return Allocator(
            library=None,
            version=owner[1] if owner else root.libc_package_version,
            sha256=sha256_of(root.host(real)) if real else None,
            usable=why_not is None,
            why_not=why_not,
            **common,
        )
    if found is None:
        hint = f" (Debian package {spec.package} or its renamed successor)" if spec.package else ""
        return Allocator(
            library=None,
            usable=False,
            why_not=f"root {root.path} has none of {', '.join(spec.library)}: install it in the "
            f"root{hint}",
            **common,
        )
    real = root.resolve(found)
    problem = check_preloadable(root.host(real))
    if problem:
        return Allocator(library=real, usable=False, why_not=problem, **common)
    owner = package_of_in_root(root.path, real)
    if owner:
        common["package"] = owner[0]
    return Allocator(
        library=real,
        version=owner[1] if owner else None,
        sha256=sha256_of(root.host(real)),
        usable=why_not is None,
        why_not=why_not,
        **common,
    )
