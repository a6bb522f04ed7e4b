"""`mallocsweep servers fetch` against the real Debian archive (a package registry).

Fetched servers are kept in the repo's gitignored .cache/servers, so a second `make test` fetches
nothing. Versions are picked from what the archive offers today, by flavor: an older MariaDB
10.11 patch than the host's (bookworm), and the newest MySQL of sid — never hard-coded ones.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from servers.acquire import archive, fetch
from servers.allocators import resolve
from servers.errors import ServerError
from suites.families.mysql.server import MySQLServer, MySQLSettings, find_mysql
from tests.integration import roots

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / ".cache" / "servers"
MALLOCSWEEP = [sys.executable, "-m", "suites.cli.main"]


@pytest.fixture(scope="module", autouse=True)
def servers_cache():
    roots.wait_prefetch()  # the checks below look for half-done fetches in the whole directory
    old = os.environ.get("MALLOCSWEEP_SERVERS")
    os.environ["MALLOCSWEEP_SERVERS"] = old or str(CACHE)
    try:
        yield Path(os.environ["MALLOCSWEEP_SERVERS"])
    finally:
        if old is None:
            os.environ.pop("MALLOCSWEEP_SERVERS", None)


def _index(release: str) -> archive.ReleaseIndex:
    ix = archive.ReleaseIndex(release, fetch.servers_dir() / ".archive" / release)
    ix.update()
    return ix


def _no_leftovers(base: Path) -> None:
    assert [d.name for d in base.iterdir() if ".partial-" in d.name] == []
    assert fetch.mounts_under(base) == []


def test_basedir_of_an_older_patch_initialises_and_starts(short_tmp, older_mariadb):
    spec = older_mariadb
    s = fetch.fetch(spec)
    assert (s.kind, s.release, s.flavor) == ("basedir", archive.host_release(), "mariadb")
    assert s.glibc and s.size_bytes > 10_000_000
    # a second fetch is a cache hit: the same metadata, nothing rebuilt (it says so, and the
    # fetched tree is the same directory, untouched)
    said = []

    def stamp():
        return [(p.stat().st_ino, p.stat().st_mtime_ns) for p in (Path(s.path), s.host_binary)]

    before = stamp()
    assert fetch.fetch(spec, say=said.append) == s
    assert len(said) == 1 and "is already fetched" in said[0], said
    assert stamp() == before
    assert fetch.lookup(spec) == s
    ok, detail = fetch.check_runs(s)
    assert ok, detail

    binary = find_mysql(basedir=s.path)
    assert binary.path == s.binary and binary.version == s.version
    assert binary.install_tool.startswith(s.path)  # its own mariadb-install-db, not the host's
    settings = MySQLSettings(buffer_pool_mb=64, max_threads=16, innodb_log_file_mb=16)
    srv = MySQLServer(binary, short_tmp / "w", settings, resolve(["glibc"])[0])
    try:
        srv.initialize()
        srv.start(timeout_s=120)
        conn = srv.connect()
        cur = conn.cursor()
        cur.execute("SELECT VERSION()")
        (version,) = cur.fetchone()
        conn.close()
        assert version.startswith(s.version + "-MariaDB"), version
        pid = srv.pid
    finally:
        srv.stop()
    assert not Path(f"/proc/{pid}").exists()
    _no_leftovers(fetch.servers_dir())


def _newest_sid_mysql() -> str:
    pkgs = _index("sid").show(archive.SERVER_PACKAGES["mysql"])
    if not pkgs:
        pytest.skip("Debian sid has no mysql-server-core today")
    return f"mysql-{archive.newest_first(pkgs)[0].upstream}"


@pytest.mark.skipif(
    os.geteuid() != 0, reason="a server root needs debootstrap and chroot: root only"
)
def test_sid_root_with_mysql_and_its_allocators(capsys, pristine_datadir):
    from suites.cli.main import main

    spec = _newest_sid_mysql()
    assert main(["servers", "fetch", spec]) == 0
    capsys.readouterr()
    s = fetch.lookup(spec)
    assert (s.kind, s.release, s.flavor, s.binary) == ("root", "sid", "mysql", "/usr/sbin/mysqld")
    root = Path(s.path)
    assert (root / "usr/sbin/mysqld").is_file()
    # glibc is the root's own, from its dpkg database, and newer than the host's
    installed = fetch.parse_dpkg_status((root / "var/lib/dpkg/status").read_text())
    assert s.glibc == archive.upstream_version(installed["libc6"])
    assert tuple(map(int, s.glibc.split("."))) >= (2, 41)
    # every allocator package of sid, at the version dpkg has, with its library in the root
    assert set(s.allocators) == set(archive.ALLOCATOR_PACKAGES)
    for name, a in s.allocators.items():
        assert installed[a["package"]] == a["version"], name
    libdir = root / "usr/lib/x86_64-linux-gnu"
    assert list(libdir.glob("libjemalloc.so.*")) and list(libdir.glob("libtbbmalloc_proxy.so.*"))
    ok, detail = fetch.check_runs(s)
    assert ok and detail.startswith(s.version), detail
    out = subprocess.run(
        ["chroot", s.path, s.binary, "--no-defaults", "--version"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert f"Ver {s.version}" in out
    # the root holds what the server needs to make a datadir: the session's pristine one of this
    # root (mysqld --initialize-insecure, under chroot through the exec helper; test_server_root
    # and the MySQL runs start on copies of it), made here if no test made it before
    datadir = pristine_datadir(find_mysql(root=s.path))
    assert (datadir / "mysql.ibd").is_file() and (datadir / "mysql").is_dir()
    assert main(["servers", "list", "--json"]) == 0
    assert f'"spec": "{spec}"' in capsys.readouterr().out
    _no_leftovers(fetch.servers_dir())


def _private_cache(tmp: Path) -> Path:
    """A servers dir of its own that shares the downloaded indexes (no second download)."""
    d = tmp / "servers"
    d.mkdir()
    src = fetch.servers_dir() / ".archive"
    if src.is_dir():
        shutil.copytree(src, d / ".archive", symlinks=True)
    return d


def _start(spec: str, servers: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [*MALLOCSWEEP, "servers", "fetch", spec],
        cwd=REPO,
        env=dict(os.environ, MALLOCSWEEP_SERVERS=str(servers)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for(cond, timeout_s: float, what: str, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        if proc.poll() is not None:
            raise AssertionError(
                f"fetch ended ({proc.returncode}) before {what}: {proc.stderr.read()}"
            )
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"no {what} within {timeout_s}s")
        time.sleep(0.1)


def test_sigkill_mid_fetch_leaves_nothing_that_looks_fetched(tmp_path, monkeypatch, older_mariadb):
    spec = older_mariadb
    servers = _private_cache(tmp_path)
    proc = _start(spec, servers)
    try:
        _wait_for(
            lambda: any((d / "debs").is_dir() for d in servers.glob(".*.partial-*")),
            120,
            "download step",
            proc,
        )
    finally:
        proc.kill()
        proc.wait()
    monkeypatch.setenv("MALLOCSWEEP_SERVERS", str(servers))
    assert fetch.list_fetched() == []
    with pytest.raises(ServerError, match="not fetched"):
        fetch.lookup(spec)
    # the next fetch removes the leftover and completes
    s = fetch.fetch(spec)
    assert s.spec == spec and Path(s.binary).is_file()
    _no_leftovers(servers)


@pytest.mark.skipif(
    os.geteuid() != 0, reason="a server root needs debootstrap and chroot: root only"
)
def test_sigint_during_debootstrap_removes_the_partial_root(tmp_path):
    pkgs = _index("sid").show(archive.SERVER_PACKAGES["mariadb"])
    if not pkgs:
        pytest.skip("Debian sid has no mariadb-server-core today")
    servers = _private_cache(tmp_path)
    # the sid root of MariaDB: another release than the host's, so debootstrap runs
    proc = _start(f"mariadb-{archive.newest_first(pkgs)[0].upstream}", servers)
    _wait_for(
        lambda: any((d / "root" / "var").is_dir() for d in servers.glob(".*.partial-*")),
        180,
        "debootstrap at work",
        proc,
    )
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert list(servers.glob(".*.partial-*")) == []
    assert fetch.mounts_under(servers) == []
    # nothing started for the fetch is still running
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert str(servers) not in ps
