"""Servers in a root (issue 12): MySQL and MariaDB 11.8 from Debian's archive, under chroot in a
private mount namespace, as our direct child; end to end through `mallocsweep run`, and nothing
(process, mount, mount point, temp directory) left behind after a run or a SIGINT."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from pathlib import Path

import pytest

from servers.allocators import resolve
from suites.cli.main import main
from suites.families.mysql.server import MySQLServer, MySQLSettings, find_mysql
from tests.integration.runs_helpers import (
    kill_quietly,
    manifest,
    results,
    run_dir_of,
    server_pid,
    small_suite,
    start_run,
    wait_for,
)

pytestmark = pytest.mark.integration


def _dpkg_version(root: Path, package: str) -> str:
    """The oracle: dpkg's own answer from the root's database (not our parser)."""
    done = subprocess.run(
        ["dpkg-query", f"--admindir={root}/var/lib/dpkg", "-W", "-f=${Version}", package],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def _suite(out: Path, flavor: str, root: Path, allocators: list[str], duration=3) -> Path:
    p = out / "suite.toml"
    p.write_text(
        small_suite(
            "root-smoke",
            "two short POINT_SELECT levels in a server root",
            server={"flavor": flavor, "root": str(root)},
            allocators={"use": allocators},
            warmup={"cap_s": 3, "threads": 2},
            sysbench={"threads": [2, 4], "duration_s": duration},
        )
    )
    return p


def _mounts_mentioning(*paths) -> list[str]:
    text = Path("/proc/mounts").read_text()
    return [ln for ln in text.splitlines() if any(str(p) in ln for p in paths)]


def _processes_in(root: Path, ours: Path) -> list[int]:
    """Live processes whose root directory is `root` (a chroot into it) and whose command line
    mentions `ours` (the test's directory: its servers' my.cnf is there). Other tests may run
    servers in the same fetched root at the same time (pytest-xdist workers, a user's run)."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if (
                    os.readlink(d / "root") == str(root)
                    and str(ours).encode() in (d / "cmdline").read_bytes()
                ):
                    out.append(int(d.name))
            except OSError:
                continue
    return out


def _tree(root: Path, *ours: Path) -> set[str]:
    """The root's directories outside /usr, /var, /etc (where a mount point of ours would go),
    those at or under one of `ours` (the test's own directories, as seen inside the root) when
    given: another test's server in the same root may hold mount points of its own meanwhile."""
    skip = {"usr", "var", "etc", "proc", "sys", "dev"}
    found = set()
    for top in root.iterdir():
        if top.name in skip or top.is_symlink() or not top.is_dir():
            continue
        for dirpath, _dirs, _files in os.walk(top):
            inside = dirpath[len(str(root)) :] or "/"
            if not ours or any(
                inside == str(o) or inside.startswith(f"{o}/") or str(o).startswith(f"{inside}/")
                for o in ours
            ):
                found.add(dirpath)
    return found


def _socket_dirs(run_dir: Path) -> list[Path]:
    """The short socket directories (/tmp/ms-sock-*) this run's servers used, left or not."""
    out = []
    for c in manifest(run_dir)["cells"]:
        sock = (c.get("server") or {}).get("socket")
        if sock and Path(sock).parent.name.startswith("ms-sock-"):
            out.append(Path(sock).parent)
    return out


def _socket_dirs_left(run_dir: Path) -> list[str]:
    """The short socket directories (/tmp/ms-sock-*) this run's servers used that still exist."""
    out = []
    for c in manifest(run_dir)["cells"]:
        sock = (c.get("server") or {}).get("socket")
        if sock and Path(sock).parent.name.startswith("ms-sock-") and Path(sock).parent.exists():
            out.append(str(Path(sock).parent))
    return out


def _run_suite(suite: Path, out: Path, cache: Path) -> tuple[int, Path, str]:
    proc = start_run([str(suite), "--out", str(out / "runs")], cache)
    try:
        _, err = proc.communicate(timeout=900)
    finally:
        kill_quietly(proc)
    assert proc.returncode == 0, err
    return proc.returncode, run_dir_of(out / "runs", 5), err


def test_mysql_smoke_in_root_under_builtin(mysql_root, out, dataset_cache):
    before_tree = _tree(mysql_root, out)
    code, run_dir, err = _run_suite(
        _suite(out, "mysql", mysql_root, ["builtin"]), out, dataset_cache
    )
    assert code == 0, err
    m = manifest(run_dir)
    (cell,) = m["cells"]
    assert cell["status"] == "ok", cell.get("error")
    server = cell["server"]
    # The flavor and version the archive's package says, through dpkg, not through our parser.
    want = re.match(r"(?:\d+:)?(\d+\.\d+\.\d+)", _dpkg_version(mysql_root, "mysql-server-core"))
    assert server["flavor"] == "mysql" and server["version"] == want.group(1)
    assert server["binary"] == "/usr/sbin/mysqld"
    libc = _dpkg_version(mysql_root, "libc6")
    assert server["root"]["path"] == str(mysql_root)
    assert server["root"]["libc6"] == libc and libc.startswith(server["root"]["glibc"] + "-")
    assert server["root"]["glibc"] != m["host"]["glibc_version"]  # the root's, not the host's
    ev = cell["verification"]
    assert ev["verdict"] == "verified" and ev["binary"] == "/usr/sbin/mysqld"
    # Debian's mysqld links tcmalloc itself: mapped from the root's own library directory.
    assert any(
        p.startswith(f"{mysql_root}/usr/lib/") and "libtcmalloc" in p
        for p in ev["allocator_libraries_mapped"]
    ), ev
    assert cell["thp"]["process_thp_enabled"] == 1  # MySQL does not switch THP off for itself
    # The alloc_stats shim (host-built, copied into the bind-mounted work dir) loads on the root's
    # newer glibc and finds the tcmalloc mysqld links itself as the library serving malloc.
    am = cell["alloc_memory"]
    assert am["errors"] == [] and am["api"] == "gperftools MallocExtension", am
    assert am["library"].endswith("/libtcmalloc.so.4") and am["readings"], am
    assert all(0 < r["alloc_in_use_kb"] <= r["rss_kb"] for r in am["readings"]), am
    rows = results(run_dir)
    assert sorted(int(r["threads"]) for r in rows) == [2, 4]
    for r in rows:
        assert r["workload"] == "point_select" and float(r["qps"]) > 0, r
        assert r["server"] == f"mysql-{want.group(1)}"
    # Nothing left: no process chrooted into the root, no mount, no mount point, no socket dir.
    assert _processes_in(mysql_root, out) == []
    assert _mounts_mentioning(mysql_root, out) == []
    assert _tree(mysql_root, out, *_socket_dirs(run_dir)) == before_tree
    assert _socket_dirs_left(run_dir) == []
    assert main(["report", str(run_dir)]) == 0
    summary = (run_dir / "summary.md").read_text()
    assert f"server root**: {mysql_root}" in summary and server["root"]["glibc"] in summary


def test_mariadb_smoke_in_root_under_root_allocators(mariadb_root, out, dataset_cache):
    code, run_dir, err = _run_suite(
        _suite(out, "mariadb", mariadb_root, ["glibc", "jemalloc"]), out, dataset_cache
    )
    assert code == 0, err
    m = manifest(run_dir)
    by = {c["allocator"]["name"]: c for c in m["cells"]}
    assert set(by) == {"glibc", "jemalloc"}
    want = re.match(r"(?:\d+:)?(\d+\.\d+\.\d+)", _dpkg_version(mariadb_root, "mariadb-server-core"))
    for c in by.values():
        assert c["status"] == "ok", c.get("error")
        assert c["server"]["flavor"] == "mariadb" and c["server"]["version"] == want.group(1)
        assert c["verification"]["verdict"] == "verified"
        assert c["allocator"]["root"] == str(mariadb_root)
    g = by["glibc"]
    assert g["allocator"]["version"] == _dpkg_version(mariadb_root, "libc6")
    # nothing preloaded but our shims, from the work dir: the call counter first (it passes each
    # call on to the allocator after it, servers/alloccount.py), alloc_stats last
    shim = [Path(p).name for p in g["verification"]["process_env"]["LD_PRELOAD"].split()]
    assert shim == ["ms-alloc-count.so", "ms-alloc-stats.so"]
    assert g["verification"]["server_reported"].startswith("system")
    j = by["jemalloc"]
    lib = j["allocator"]["library"]
    assert lib.startswith("/usr/lib/") and "libjemalloc" in lib  # a path inside the root
    assert j["allocator"]["version"] == _dpkg_version(mariadb_root, j["allocator"]["package"])
    preload = j["verification"]["process_env"]["LD_PRELOAD"].split()
    assert preload[1] == lib and [Path(p).name for p in preload[::2]] == [
        "ms-alloc-count.so",
        "ms-alloc-stats.so",
    ]
    assert j["verification"]["library_mapped"] == [f"{mariadb_root}{lib}"]
    assert j["verification"]["server_reported"].startswith("jemalloc")
    rows = results(run_dir)
    assert {(r["allocator"], int(r["threads"])) for r in rows} == {
        (a, t) for a in ("glibc", "jemalloc") for t in (2, 4)
    }
    assert all(float(r["qps"]) > 0 for r in rows)
    assert _processes_in(mariadb_root, out) == [] and _mounts_mentioning(mariadb_root, out) == []


def test_running_server_seen_from_the_host(mariadb_root, out, copy_pristine):
    """The live process: our child, chrooted, the allocator preloaded for it alone, its mounts
    invisible from the host, and after the stop no mount point left in the root."""
    binary = find_mysql(root=str(mariadb_root))
    copy_pristine(binary, out / "w")  # initialised in the root once per session
    before = _tree(mariadb_root, out)
    jemalloc = resolve(["jemalloc"], root=binary.root)[0]
    server = MySQLServer(
        binary, out / "w", MySQLSettings(buffer_pool_mb=32, max_threads=8), jemalloc
    )
    try:
        pid = server.start()
        assert os.readlink(f"/proc/{pid}/exe") == f"{mariadb_root}/usr/sbin/mariadbd"
        assert os.readlink(f"/proc/{pid}/root") == str(mariadb_root)
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        assert int(stat[1]) == os.getpid()  # our direct child, through unshare/sh/chroot/env
        environ = dict(
            kv.split("=", 1) for kv in Path(f"/proc/{pid}/environ").read_text().split("\0") if kv
        )
        assert environ["LD_PRELOAD"] == jemalloc.library and "MS_ROOT_PRELOAD" not in environ
        maps = Path(f"/proc/{pid}/maps").read_text()
        assert f"{mariadb_root}{jemalloc.library}" in maps
        assert _mounts_mentioning(out) == []  # the binds live in the server's own namespace
        assert (server.workdir / "datadir" / "mysql").is_dir()
        conn = server.connect()
        try:
            cur = conn.cursor()
            cur.execute("SELECT @@version, @@version_malloc_library")
            version, malloc = cur.fetchone()
        finally:
            conn.close()
        assert version.startswith(binary.version) and malloc.startswith("jemalloc")
    finally:
        server.stop()
    assert server.exit is not None and server.exit.returncode == 0
    assert not Path(f"/proc/{pid}").exists()
    assert _tree(mariadb_root, out) == before


def test_mysql_in_root_auth_x_protocol_and_secure_file_priv(mysql_root, out, copy_pristine):
    """MySQL's own defaults that would break a private server: the X protocol's fixed port, a
    secure_file_priv directory that does not exist; and root's caching_sha2_password login over
    the socket, from mysql-connector-python and from sysbench (MariaDB Connector/C). The datadir
    is the session's --initialize-insecure one (MySQL 9.7 takes 15 s to initialise here)."""
    binary = find_mysql(root=str(mysql_root))
    copy_pristine(binary, out / "w")
    builtin = resolve(["builtin"], root=binary.root)[0]
    server = MySQLServer(
        binary, out / "w", MySQLSettings(buffer_pool_mb=32, max_threads=8), builtin
    )
    try:
        pid = server.start()
        assert os.readlink(f"/proc/{pid}/exe") == f"{mysql_root}/usr/sbin/mysqld"
        conn = server.connect()
        try:
            cur = conn.cursor()
            cur.execute("SELECT plugin FROM mysql.user WHERE user = 'root'")
            assert {r[0] for r in cur.fetchall()} == {"caching_sha2_password"}
            cur.execute(
                "SELECT plugin_status FROM information_schema.plugins WHERE plugin_name='mysqlx'"
            )
            status = cur.fetchall()
            assert status in ([], [("DISABLED",)]), status  # not listening on port 33060
            cur.execute("SELECT @@secure_file_priv")
            assert cur.fetchone()[0].rstrip("/") == str(server.secure_file_priv)
            cur.execute("CREATE DATABASE sbtest")
        finally:
            conn.close()
        done = subprocess.run(
            [
                "sysbench",
                "oltp_point_select",
                "--db-driver=mysql",
                f"--mysql-socket={server.socket}",
                "--mysql-user=root",
                "--mysql-db=sbtest",
                "--tables=1",
                "--table-size=100",
                "prepare",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert "Inserting 100 records into 'sbtest1'" in done.stdout
    finally:
        server.stop()
    assert server.exit is not None and server.exit.returncode == 0


def test_sigint_mid_run_leaves_nothing(mysql_root, out, dataset_cache):
    before_tree = _tree(mysql_root, out)
    suite = _suite(out, "mysql", mysql_root, ["builtin"], duration=30)
    proc = start_run([str(suite), "--out", str(out / "runs")], dataset_cache)
    try:
        run_dir = run_dir_of(out / "runs", 300)
        pid = wait_for(lambda: server_pid(run_dir), 300, "the server in the root to start")
        assert pid in _processes_in(mysql_root, out)
        wait_for(lambda: any(run_dir.glob("logs/*/point_select@2.log")), 300, "the first level")
        proc.send_signal(signal.SIGINT)
        proc.wait(120)
        assert proc.returncode == 130, proc.stderr.read()
    finally:
        kill_quietly(proc)
    m = json.loads((run_dir / "manifest.json").read_text())
    assert m["status"] == "interrupted" and m["cells"][0]["server"]["socket"]
    assert not Path(f"/proc/{pid}").exists()
    assert _processes_in(mysql_root, out) == []
    assert _mounts_mentioning(mysql_root, out) == []
    assert _tree(mysql_root, out, *_socket_dirs(run_dir)) == before_tree
    assert _socket_dirs_left(run_dir) == []


def test_mysql_in_root_proof_follows_the_binding(mysql_root, out, dataset_cache):
    """Debian's mysqld links libtcmalloc.so.4: `builtin` is that tcmalloc, named with its
    package version; a preloaded jemalloc wins the binding while tcmalloc stays mapped, idle."""
    code, run_dir, err = _run_suite(
        _suite(out, "mysql", mysql_root, ["builtin", "jemalloc"]), out, dataset_cache
    )
    assert code == 0, err
    by = {c["allocator"]["name"]: c for c in manifest(run_dir)["cells"]}
    for c in by.values():
        assert c["status"] == "ok", c.get("error")
        assert c["verification"]["verdict"] == "verified", c["verification"].get("problems")
    b = by["builtin"]["verification"]
    assert b["builtin"]["family"] == "tcmalloc" and b["builtin"]["soname"] == "libtcmalloc.so.4"
    pkg = b["builtin"]["package"]
    assert b["builtin"]["version"] == _dpkg_version(mysql_root, pkg)  # the root's, via dpkg
    assert b["builtin"]["label"].startswith("builtin: tcmalloc (libtcmalloc.so.4, ")
    for sym in ("malloc", "free"):
        (lib,) = b["bound_to"][sym]
        assert lib.startswith(f"{mysql_root}/usr/lib/") and "libtcmalloc.so.4" in lib, b["bound_to"]
    j = by["jemalloc"]["verification"]
    for sym in ("malloc", "free"):
        (lib,) = j["bound_to"][sym]
        assert lib.startswith(f"{mysql_root}/usr/lib/") and "libjemalloc" in lib, j["bound_to"]
    assert any("libtcmalloc.so.4" in p for p in j["mapped_not_bound"]), j
    rows = results(run_dir)
    assert {r["allocator"] for r in rows} == {"builtin", "jemalloc"}
    assert all(float(r["qps"]) > 0 for r in rows)
    assert _processes_in(mysql_root, out) == [] and _mounts_mentioning(mysql_root, out) == []


def test_mysql_in_root_refuses_glibc_before_anything_runs(mysql_root, out, dataset_cache):
    proc = start_run(
        [str(_suite(out, "mysql", mysql_root, ["glibc"])), "--out", str(out / "runs")],
        dataset_cache,
    )
    try:
        _, err = proc.communicate(timeout=300)
    finally:
        kill_quietly(proc)
    assert proc.returncode == 2, err
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert "Traceback" not in err
    assert any(
        "links libtcmalloc.so.4 itself: its malloc is tcmalloc, not glibc" in ln for ln in lines
    ), err
    assert not (out / "runs").exists() or not any((out / "runs").iterdir())
    assert _processes_in(mysql_root, out) == []
