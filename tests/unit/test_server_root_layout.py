"""Server roots without running anything: paths resolved inside a root, its dpkg database, its
allocators found by file (t64 names), the argv that enters it, and the suite's root settings."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from servers.allocators import detect_in_root, load_registry, resolve
from servers.errors import AllocatorError, ServerError
from servers.root import (
    mount_points,
    open_root,
    package_of_in_root,
    remove_mount_points,
    resolve_in_root,
    rooted,
)
from suites.errors import SuiteError
from suites.suite.model import parse_suite

HOST_JEMALLOC = Path("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2")

STATUS = """Package: libc6
Status: install ok installed
Architecture: amd64
Version: 2.43-7

Package: libjemalloc2
Status: install ok installed
Architecture: amd64
Version: 5.3.1-2

Package: libtcmalloc-minimal4t64
Status: install ok installed
Version: 2.18.1-2

Package: removed-one
Status: deinstall ok config-files
Version: 1.0
"""


@pytest.fixture
def fake_root(tmp_path) -> Path:
    """A root laid out like a usrmerged Debian: /lib -> usr/lib, dpkg database, os-release."""
    r = tmp_path / "root"
    lib = r / "usr/lib/x86_64-linux-gnu"
    lib.mkdir(parents=True)
    (r / "lib").symlink_to("usr/lib")
    (r / "usr/bin").mkdir()
    (r / "usr/bin/env").write_text("")
    (r / "proc").mkdir()
    (r / "etc").mkdir()
    (r / "etc/os-release").write_text(
        'PRETTY_NAME="Debian GNU/Linux forky/sid"\nVERSION_CODENAME=forky\n'
    )
    info = r / "var/lib/dpkg/info"
    info.mkdir(parents=True)
    (r / "var/lib/dpkg/status").write_text(STATUS)
    (info / "libc6:amd64.list").write_text("/.\n/usr/lib/x86_64-linux-gnu/libc.so.6\n")
    (lib / "libc.so.6").write_bytes(b"not really libc")
    if HOST_JEMALLOC.is_file():
        shutil.copy(HOST_JEMALLOC, lib / "libjemalloc.so.2")
        # dpkg's list names the pre-usrmerge path; the file is reached through /usr/lib.
        (info / "libjemalloc2:amd64.list").write_text("/lib/x86_64-linux-gnu/libjemalloc.so.2\n")
    # An absolute symlink must resolve inside the root, never on the host.
    (lib / "libalias.so").symlink_to("/usr/lib/x86_64-linux-gnu/libc.so.6")
    return r


def test_resolve_in_root_keeps_absolute_links_inside(fake_root):
    assert resolve_in_root(str(fake_root), "/lib/x86_64-linux-gnu/libc.so.6") == (
        "/usr/lib/x86_64-linux-gnu/libc.so.6"
    )
    assert resolve_in_root(str(fake_root), "/usr/lib/x86_64-linux-gnu/libalias.so") == (
        "/usr/lib/x86_64-linux-gnu/libc.so.6"
    )
    assert resolve_in_root(str(fake_root), "/../../etc/../usr/bin/env") == "/usr/bin/env"


def test_open_root_reads_release_and_glibc(fake_root):
    root = open_root(fake_root)
    assert root.path == str(fake_root) and root.codename == "forky"
    assert root.glibc == "2.43" and root.libc_package_version == "2.43-7"
    assert root.to_manifest()["release"] == "Debian GNU/Linux forky/sid"


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda r: shutil.rmtree(r), "is not a directory"),
        (lambda r: os.unlink(r / "usr/bin/env"), "has no /usr/bin/env"),
    ],
)
def test_open_root_refuses(fake_root, make, message):
    make(fake_root)
    with pytest.raises(ServerError, match=message):
        open_root(fake_root)


def test_package_found_by_file_through_usrmerge(fake_root):
    assert package_of_in_root(str(fake_root), "/usr/lib/x86_64-linux-gnu/libc.so.6") == (
        "libc6",
        "2.43-7",
    )
    assert package_of_in_root(str(fake_root), "/usr/lib/x86_64-linux-gnu/nothing.so") is None


@pytest.mark.skipif(not HOST_JEMALLOC.is_file(), reason="libjemalloc2 is not installed here")
def test_root_allocators_are_the_roots_own(fake_root):
    root = open_root(fake_root)
    reg = load_registry()
    je = detect_in_root(reg["jemalloc"], root)
    assert je.usable and je.library == "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"
    assert (je.package, je.version, je.root) == ("libjemalloc2", "5.3.1-2", str(fake_root))
    g = detect_in_root(reg["glibc"], root)
    assert g.usable and (g.package, g.version) == ("libc6", "2.43-7")
    mi = detect_in_root(reg["mimalloc"], root)
    assert not mi.usable and f"root {fake_root} has none of" in mi.why_not
    # The root's glibc decides a tunable's minimum, not the host's.
    assert detect_in_root(reg["glibc-hugetlb"], root).usable
    # The launch environment preloads the path inside the root.
    assert je.launch_env({})["LD_PRELOAD"] == je.library


def test_custom_allocators_refused_in_a_root(fake_root):
    with pytest.raises(AllocatorError, match="host file"):
        resolve(
            ["mine"],
            custom=[{"name": "mine", "library": str(HOST_JEMALLOC)}],
            root=open_root(fake_root),
        )


def test_rooted_launch_checks_binds():
    launch = rooted("/r", ["/w", "/tmp/s"])
    assert launch.root == "/r" and launch.binds == ("/w", "/tmp/s")
    for bad in ("relative", "/", "/a\nb"):
        with pytest.raises(ServerError):
            rooted("/r", [bad])


def test_mount_points_created_and_removed_exactly(fake_root):
    (fake_root / "tmp").mkdir()
    made = mount_points(str(fake_root), ["/tmp/a/b/w", "/tmp/s"])
    assert made == ["/tmp/a", "/tmp/a/b", "/tmp/a/b/w", "/tmp/s"]
    assert (fake_root / "tmp/a/b/w").is_dir()
    remove_mount_points(str(fake_root), made)
    assert sorted(p.name for p in (fake_root / "tmp").iterdir()) == []


def _suite(tmp_path, server: str) -> str:
    return f'[suite]\nname = "t"\n[server]\n{server}\n'


def test_suite_root_settings(tmp_path, fake_root):
    s = parse_suite(
        _suite(tmp_path, f'root = "{fake_root}"\nbinary = "/usr/sbin/mysqld"'), "s.toml"
    )
    assert s.server.root == str(fake_root) and s.server.binary == "/usr/sbin/mysqld"
    with pytest.raises(SuiteError, match="absolute path inside the root"):
        parse_suite(_suite(tmp_path, f'root = "{fake_root}"\nbinary = "mysqld"'), "s.toml")
    with pytest.raises(SuiteError, match="server.root"):
        parse_suite(_suite(tmp_path, f'root = "{tmp_path}/none"'), "s.toml")
    with pytest.raises(SuiteError, match="MySQL-family"):
        parse_suite(
            f'[suite]\nname = "t"\nkind = "iibench"\n[server]\nflavor = "mongodb"\n'
            f'root = "{fake_root}"\n',
            "s.toml",
        )
