"""MariaDB started for real under every installed core allocator, with proof, and bad input.

One pristine datadir is initialised per session (conftest) and copied per start, so each server begins from
the same files. Servers run on free ports with sockets in short private dirs and are always
stopped (context manager), and each test checks that nothing of them is left running.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
from pathlib import Path

import pytest

from rundir.format import OWNER_MARKER
from servers.allocators import Allocator, detect_all, resolve
from servers.errors import AllocatorError, ServerError
from servers.ports import free_port
from suites.families.mysql.server import MySQLServer, MySQLSettings, ServerBinary, find_mysql

pytestmark = pytest.mark.integration

CORE = ["glibc", "jemalloc", "tcmalloc", "tcmalloc-minimal", "mimalloc", "tbbmalloc"]
# What MariaDB's @@version_malloc_library says for each (it recognises only jemalloc and tcmalloc).
REPORTED = {
    "glibc": "system",
    "jemalloc": "jemalloc",
    "tcmalloc": "tcmalloc",
    "tcmalloc-minimal": "tcmalloc",
    "mimalloc": "system",
    "tbbmalloc": "system",
}


def small_settings(**extra) -> MySQLSettings:
    return MySQLSettings(buffer_pool_mb=64, max_threads=32, innodb_log_file_mb=16, extra=extra)


@pytest.fixture(scope="module")
def binary(mariadb_binary) -> ServerBinary:
    return mariadb_binary  # the conftest's: skips where no MariaDB is installed


@pytest.fixture(scope="module")
def pristine(binary, pristine_datadir) -> Path:
    """The session's initialised datadir of this server (conftest); tests copy it."""
    datadir = pristine_datadir(binary)
    assert (datadir / "mysql").is_dir() and (datadir / OWNER_MARKER).is_file()
    return datadir


def copy_datadir(pristine: Path, work: Path) -> None:
    work.mkdir(parents=True, exist_ok=True)
    shutil.copytree(pristine, work / "datadir")


def processes_using(path: Path) -> list[int]:
    """Pids whose command line mentions `path` (our my.cnf): none may outlive a test."""
    found = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if str(path).encode() in (d / "cmdline").read_bytes():
                    found.append(int(d.name))
            except OSError:
                continue
    return found


@pytest.mark.parametrize("name", CORE)
def test_start_verify_query_stop(name, binary, pristine, short_tmp):
    alloc = {a.name: a for a in detect_all()}[name]
    if not alloc.usable:
        pytest.skip(f"{name} not installed here: {alloc.why_not}")
    copy_datadir(pristine, short_tmp / "w")
    server = MySQLServer(binary, short_tmp / "w", small_settings(), alloc)
    with server:
        pid = server.start(timeout_s=120)
        ev = server.evidence
        assert ev["verdict"] == "verified" and ev["pid"] == pid
        assert ev["binary_malloc_definitions"] == []
        if alloc.kind == "preload":
            assert ev["library_mapped"] == [alloc.library]
            assert ev["process_env"]["LD_PRELOAD"] == alloc.library
        else:
            assert ev["allocator_libraries_mapped"] == [] and ev["library_mapped"] == []
            assert "LD_PRELOAD" not in ev["process_env"]
        assert ev["server_reported"].lower().startswith(REPORTED[name])
        # The proof is the binding: mariadbd's own malloc/free and libstdc++'s (operator new)
        # point into the allocator's library; glibc's arm into libc.
        if alloc.kind == "preload":
            serving = [alloc.library]
        else:
            serving = [p for p in ev["binding_expected"] if os.path.basename(p) == "libc.so.6"]
        assert serving and ev["bound_to"] == {"malloc": serving, "free": serving}
        objects = ev["binding"]["objects"]
        assert objects[0] == os.path.realpath(binary.path) and "libstdc++.so" in objects[1]
        exe = [e for e in ev["binding"]["entries"] if e["object"] == objects[0]]
        # Debian builds mariadbd with BIND_NOW: every slot is bound at start, none lazy.
        assert {e["symbol"] for e in exe} >= {"malloc", "free", "calloc", "realloc", "_Znwm"}
        assert all(e["state"] == "bound" for e in exe)
        by_sym = {e["symbol"]: e["library"] for e in exe}
        assert by_sym["malloc"] in serving and by_sym["realloc"] in serving
        expected = "not-detectable-by-server" if name in ("mimalloc", "tbbmalloc") else "agrees"
        assert ev["server_agreement"] == expected

        conn = server.connect()
        try:
            cur = conn.cursor()
            cur.execute("SELECT 1, @@version_malloc_library")
            one, lib = cur.fetchone()
        finally:
            conn.close()
        assert one == 1 and lib == ev["server_reported"]
        v = server.variables(
            [
                "innodb_buffer_pool_dump_at_shutdown",
                "innodb_buffer_pool_load_at_startup",
                "thread_cache_size",
                "bind_address",
                "port",
            ]
        )
        assert v["innodb_buffer_pool_dump_at_shutdown"] == "OFF"
        assert v["innodb_buffer_pool_load_at_startup"] == "OFF"
        assert int(v["thread_cache_size"]) >= 32 and v["bind_address"] == "127.0.0.1"
        assert int(v["port"]) == server.port
        assert server.global_status()["Uptime"] >= 0
        assert server.to_manifest()["evidence"] is ev
    exit_info = server.exit
    assert exit_info is not None and exit_info.returncode == 0, server.error_log_tail()
    assert exit_info.rusage["ru_utime"] > 0
    assert not Path(f"/proc/{pid}").exists()
    assert processes_using(server.my_cnf) == []
    assert server.stop() is exit_info  # idempotent


def test_deep_workdir_gets_a_short_private_socket(binary, pristine, short_tmp):
    deep = short_tmp / ("d" * 60) / ("e" * 60)
    copy_datadir(pristine, deep)
    server = MySQLServer(binary, deep, small_settings(), resolve(["glibc"])[0])
    with server:
        server.start(timeout_s=120)
        sock = server.socket
        assert len(str(sock)) < 108 and sock.parent.parent == Path("/tmp")
        conn = server.connect()
        conn.close()
    assert not sock.parent.exists()


def test_server_contradicting_the_allocator_fails_the_start(binary, pristine, short_tmp):
    jemalloc = {a.name: a for a in detect_all()}["jemalloc"]
    if not jemalloc.usable:
        pytest.skip(f"jemalloc not installed here: {jemalloc.why_not}")
    # Preload jemalloc while claiming tcmalloc: MariaDB reports jemalloc, a real contradiction.
    liar = Allocator(name="liar", kind="preload", family="tcmalloc", library=jemalloc.library)
    copy_datadir(pristine, short_tmp / "w")
    server = MySQLServer(binary, short_tmp / "w", small_settings(), liar)
    with pytest.raises(
        AllocatorError, match=r"allocator 'liar' not verified.*reports malloc library 'jemalloc"
    ):
        server.start(timeout_s=120)
    assert not server.alive and server.exit is not None
    assert server.evidence["verdict"] == "failed"
    assert processes_using(server.my_cnf) == []


def test_start_failure_shows_exit_and_error_log(binary, pristine, short_tmp):
    copy_datadir(pristine, short_tmp / "w")
    server = MySQLServer(
        binary, short_tmp / "w", small_settings(no_such_option_xyz="1"), resolve(["glibc"])[0]
    )
    with pytest.raises(
        ServerError, match=r"exited with status \d+ during start-up.*no_such_option_xyz"
    ):
        server.start(timeout_s=60)
    assert not server.alive


# -- bad input: one-line errors naming the value, nothing deleted ----------------------------------


def test_unknown_allocator():
    with pytest.raises(AllocatorError, match="unknown allocator 'jemallocc'"):
        resolve(["jemallocc"])


def test_custom_library_missing():
    with pytest.raises(AllocatorError, match="/nonexistent/libmy.so does not exist"):
        resolve(["all"], custom=[{"name": "my", "library": "/nonexistent/libmy.so"}])


def test_allocator_library_gone_refused_before_launch(binary, pristine, short_tmp):
    gone = Allocator(
        name="gone",
        kind="preload",
        family="jemalloc",
        library=None,
        usable=False,
        why_not="none of /nonexistent/libjemalloc.so.2 exists",
    )
    copy_datadir(pristine, short_tmp / "w")
    server = MySQLServer(binary, short_tmp / "w", small_settings(), gone)
    with pytest.raises(AllocatorError, match="/nonexistent/libjemalloc.so.2"):
        server.start()
    assert server.child is None and (short_tmp / "w" / "datadir" / "mysql").is_dir()


def test_server_binary_missing():
    with pytest.raises(ServerError, match="/nonexistent/mariadbd does not exist"):
        find_mysql("/nonexistent/mariadbd")


def test_binary_not_a_mysqld():
    with pytest.raises(ServerError, match="/bin/true is not a MySQL-family server"):
        find_mysql("/bin/true")


def test_port_in_use(binary, pristine, short_tmp):
    port = free_port()
    copy_datadir(pristine, short_tmp / "w")
    with socket.socket() as held:
        held.bind(("127.0.0.1", port))
        held.listen()
        server = MySQLServer(
            binary, short_tmp / "w", small_settings(), resolve(["glibc"])[0], port=port
        )
        with pytest.raises(ServerError, match=f"port {port} on 127.0.0.1 is already in use"):
            server.start()
    assert server.child is None and (short_tmp / "w" / "datadir" / "mysql").is_dir()


@pytest.mark.parametrize("content", [True, False], ids=["with-files", "empty"])
def test_foreign_datadir_refused_and_kept(binary, short_tmp, content):
    datadir = short_tmp / "w" / "datadir"
    datadir.mkdir(parents=True)
    if content:
        (datadir / "precious.ibd").write_text("someone's data")
    server = MySQLServer(binary, short_tmp / "w", small_settings(), resolve(["glibc"])[0])
    with pytest.raises(
        ServerError, match=f"datadir {datadir} exists and was not created by mallocsweep"
    ):
        server.initialize()
    assert [p.name for p in datadir.iterdir()] == (["precious.ibd"] if content else [])


def test_self_allocating_binary_refused_before_launch(short_tmp):
    if shutil.which("gcc") is None:
        pytest.skip("gcc builds the test binary")
    src = short_tmp / "own.c"
    src.write_text(
        "#include <stddef.h>\nvoid *malloc(size_t n){(void)n;return 0;}\n"
        "void free(void *p){(void)p;}\nint main(void){return 0;}\n"
    )
    exe = short_tmp / "mysqld"
    subprocess.run(["gcc", "-o", str(exe), str(src)], check=True)
    fake = ServerBinary(str(exe), "mysql", "8.0.36", "8.0.36", str(exe), str(short_tmp))
    (short_tmp / "w" / "datadir" / "mysql").mkdir(parents=True)
    server = MySQLServer(fake, short_tmp / "w", small_settings(), resolve(["glibc"])[0])
    with pytest.raises(AllocatorError, match=f"{exe} defines free, malloc itself.*'builtin'"):
        server.start()
    assert server.child is None and os.path.isdir(short_tmp / "w" / "datadir" / "mysql")


def test_stop_escalates_to_sigkill_for_a_hung_server(binary, pristine, short_tmp):
    copy_datadir(pristine, short_tmp / "w")
    server = MySQLServer(binary, short_tmp / "w", small_settings(), resolve(["glibc"])[0])
    with server:
        pid = server.start(timeout_s=120)
        os.kill(pid, signal.SIGSTOP)  # answers nothing, handles no SIGTERM: only SIGKILL ends it
        exit_info = server.stop(timeout_s=2)
    assert exit_info.signal == signal.SIGKILL
    assert exit_info.rusage["ru_utime"] > 0
    assert processes_using(server.my_cnf) == []


@pytest.mark.parametrize(
    "name",
    [
        "glibc-arena1",
        "glibc-notcache",
        "glibc-hugetlb",
        "jemalloc-thp",
        "mimalloc-large",
        "builtin",
    ],
)
def test_variants_reach_the_process(name, binary, pristine, short_tmp):
    alloc = {a.name: a for a in detect_all()}[name]
    if not alloc.usable:
        pytest.skip(f"{name} not usable here: {alloc.why_not}")
    copy_datadir(pristine, short_tmp / "w")
    server = MySQLServer(binary, short_tmp / "w", small_settings(), alloc)
    with server:
        server.start(timeout_s=120)
        ev = server.evidence
    assert ev["verdict"] == "verified"
    tunables = ev["process_env"].get("GLIBC_TUNABLES", "").split(":")
    assert all(t in tunables for t in alloc.tunables)
    assert all(ev["process_env"].get(k) == v for k, v in alloc.env.items())
    if name == "builtin":
        assert ev["server_agreement"] == "not-applicable" and "LD_PRELOAD" not in ev["process_env"]
    assert server.exit.returncode == 0
