"""Server roots for the integration tests: one function, `rooted_server(flavor)`.

It returns a root directory holding a real server of that flavor from Debian's archive, built
with debootstrap the first time and cached under the repo's .cache/roots/ (gitignored), so later
sessions reuse it. The version is whatever the archive offers today (archives move on: no version
is hard-coded). `mallocsweep servers fetch` will replace this body; keep it one function.

Measured here: a minbase debootstrap takes ~30 s, the packages ~20 s more; the sid root with
MySQL is ~800 MB.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / ".cache" / "roots"
MIRROR = "http://deb.debian.org/debian"
# flavor -> (Debian suite, packages). sid carries MySQL; trixie (Debian 13) MariaDB 11.8.
# mariadb-client-core brings my_print_defaults, which mariadb-install-db needs.
ROOTS = {
    "mysql": ("sid", ["mysql-server-core", "libjemalloc2"]),
    "mariadb": ("trixie", ["mariadb-server-core", "mariadb-client-core", "libjemalloc2"]),
}
# The archive's Release files for these suites are past their Valid-Until date.
APT = ["apt-get", "-o", "Acquire::Check-Valid-Until=false"]


def rooted_server(flavor: str) -> Path:
    """A root with a `flavor` server in it (cached; built with debootstrap when missing)."""
    suite, packages = ROOTS[flavor]
    if os.geteuid() != 0:
        pytest.skip("a server root needs chroot and mount namespaces: run the tests as root")
    if shutil.which("debootstrap") is None:
        pytest.skip("debootstrap is not installed (make setup installs it)")
    final = CACHE / f"{flavor}-{suite}"
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f".{flavor}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another session may be building the same root
        if (final / ".mallocsweep-root.json").is_file():
            return final
        build = CACHE / f".build-{flavor}-{os.getpid()}"
        shutil.rmtree(build, ignore_errors=True)
        try:
            _run(["debootstrap", "--variant=minbase", suite, str(build), MIRROR], build)
            _run(["chroot", str(build), *APT, "update"], build)
            _run(
                ["chroot", str(build), *APT, "install", "-y", "--no-install-recommends", *packages],
                build,
                env={"DEBIAN_FRONTEND": "noninteractive"},
            )
            _run(["chroot", str(build), "apt-get", "clean"], build)
            (build / ".mallocsweep-root.json").write_text(
                json.dumps({"flavor": flavor, "suite": suite, "packages": packages}) + "\n"
            )
            shutil.rmtree(final, ignore_errors=True)
            build.rename(final)
        finally:
            if build.exists():
                _unmount_under(build)  # debootstrap mounts proc and sys in it while it works
                shutil.rmtree(build, ignore_errors=True)
    return final


def _unmount_under(path: Path) -> None:
    """Unmount whatever an interrupted debootstrap left mounted under `path`, deepest first, so
    that removing the half-built root never reaches into /proc or /sys."""
    prefix = str(path) + "/"
    mounts = [ln.split()[1] for ln in Path("/proc/mounts").read_text().splitlines()]
    for m in sorted((m for m in mounts if m.startswith(prefix)), key=len, reverse=True):
        subprocess.run(["umount", "-l", m], capture_output=True)


def _run(argv: list[str], build: Path, env: dict | None = None) -> None:
    done = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
        timeout=1800,
    )
    if done.returncode != 0:
        tail = (done.stdout + done.stderr).strip().splitlines()[-3:]
        if any(
            "Failed to fetch" in ln or "Couldn't download" in ln or "resolve" in ln for ln in tail
        ):
            pytest.skip(f"Debian's archive is not reachable from here: {' | '.join(tail)}")
        raise AssertionError(f"{' '.join(argv[:3])} failed ({done.returncode}): {' | '.join(tail)}")
