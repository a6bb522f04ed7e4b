"""The MongoDB path end to end on a real process: start, readiness, iibench through pymongo,
shutdown, wait4 — against the wire-protocol stand-in (no mongod is packaged for Debian), and
against a real mongod when one is on PATH. Plus the refusals: a mongod that defines malloc with a
preload request (a small C program built here), and a mongod path that is missing.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import textwrap
from pathlib import Path

import pytest

from servers.allocators import resolve
from servers.errors import AllocatorError, ServerError
from servers.ports import free_port
from suites.families.mongodb.server import MongoServer, find_mongod
from suites.workloads.iibench.run_level import run_level
from suites.workloads.iibench.schema import count_rows, index_keys, prepare
from suites.workloads.iibench.spec import SECONDARY_INDEXES, IIBenchSpec
from suites.workloads.level_result import ClientTarget
from tests.integration.standin import ensure_standin

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def standin():
    """The stand-in's mongod-like wrapper, its jar built on first use (what `make standin` does)."""
    return find_mongod(ensure_standin())


def builtin():
    return resolve(["builtin"])[0]


def _pids_alive(*pids: int) -> list[int]:
    return [p for p in pids if Path(f"/proc/{p}").exists()]


def test_standin_is_recognised_as_a_standin(standin):
    assert standin.standin is True
    assert standin.version.startswith("standin-")
    assert standin.allocator_builtin == "jvm"
    assert standin.flavor == "mongodb"


def test_mongodb_path_end_to_end(standin, short_tmp):
    spawned = []
    server = MongoServer(standin, short_tmp / "w", 0.25, builtin())
    with server:
        pid = server.start(on_spawn=spawned.append, timeout_s=120)
        assert spawned == [pid]
        assert server.alive
        # Like mongod, the stand-in wrote its pid where `mallocsweep doctor` looks (work/*/*.pid).
        assert server.pid_file.parent == short_tmp / "w"
        assert int(server.pid_file.read_text().split()[0]) == pid
        assert server.build_info()["allocator"] == "jvm"
        status = server.server_status()
        assert status["connections.current"] >= 1
        target = ClientTarget(kind="mongodb", **server.client_target(), database="iibench")
        spec = IIBenchSpec(clients=10, max_rows=5_000, batch_rows=100, report_interval_s=0.25)
        prepare(target, spec)
        res = run_level(target, spec, short_tmp / "ii.log")
        assert res.status == "ok", res.error
        assert res.events == 5_000 == count_rows(target, spec)
        assert index_keys(target, spec) == list(SECONDARY_INDEXES)
        assert sum(i["rows"] for i in res.intervals) == res.events
        assert res.threads == 10 and len(res.iibench.per_client) == 10
        exit_info = server.stop()
    # The shutdown command ended it cleanly; wait4 gave its whole-life rusage.
    assert exit_info.returncode == 0 and exit_info.signal is None
    assert exit_info.rusage["ru_utime"] > 0
    assert exit_info.rusage["ru_nvcsw"] + exit_info.rusage["ru_nivcsw"] > 0
    manifest = server.to_manifest()
    assert manifest["standin"] is True and "protocol" in manifest["note"]
    assert manifest["evidence"]["verdict"] == "standin"
    assert manifest["exit"]["returncode"] == 0
    assert _pids_alive(pid) == []
    assert not server.pid_file.exists()  # reaped: the stale pid must not point doctor anywhere


def test_unanswering_server_is_stopped_by_signals(standin, short_tmp):
    server = MongoServer(standin, short_tmp / "w", 0.25, builtin())
    with server:
        pid = server.start(timeout_s=120)
        server.child.signal_group(signal.SIGSTOP)  # it can no longer answer the shutdown command
        exit_info = server.stop(timeout_s=3)
    assert exit_info.signal == signal.SIGKILL
    assert _pids_alive(pid) == []


def test_port_in_use_is_one_line(standin, short_tmp):
    first = MongoServer(standin, short_tmp / "a", 0.25, builtin())
    with first:
        first.start(timeout_s=120)
        second = MongoServer(standin, short_tmp / "b", 0.25, builtin(), port=first.port)
        with pytest.raises(ServerError, match=rf"port {first.port} on 127.0.0.1 is already in use"):
            second.start()


def test_mongod_path_missing(short_tmp):
    with pytest.raises(ServerError) as e:
        find_mongod(short_tmp / "mongodb" / "bin" / "mongod")
    assert "does not exist" in str(e.value) and "\n" not in str(e.value)


SELF_ALLOCATING_C = textwrap.dedent(r"""
    /* Stands for the official mongod: an executable that defines malloc itself (as a statically
       linked tcmalloc does) and answers --version like mongod. */
    #include <stddef.h>
    #include <string.h>
    #include <unistd.h>
    static char arena[1 << 20];
    static size_t used;
    void *malloc(size_t n) {
        n = (n + 15) & ~(size_t)15;
        if (used + n > sizeof arena) return NULL;
        void *p = arena + used; used += n; return p;
    }
    void free(void *p) { (void)p; }
    void *calloc(size_t a, size_t b) { void *p = malloc(a * b); if (p) memset(p, 0, a * b); return p; }
    void *realloc(void *p, size_t n) {
        void *q = malloc(n); if (q && p) memcpy(q, p, n); return q;
    }
    int main(void) {
        static const char v[] =
            "db version v7.0.5\nBuild Info: {\n    \"version\": \"7.0.5\",\n"
            "    \"allocator\": \"tcmalloc\"\n}\n";
        return write(1, v, sizeof v - 1) == (ssize_t)(sizeof v - 1) ? 0 : 1;
    }
""")


@pytest.fixture(scope="module")
def self_allocating_mongod(tmp_path_factory) -> Path:
    if shutil.which("gcc") is None:
        pytest.skip("gcc is needed to build the test binary (`make setup` installs it)")
    d = tmp_path_factory.mktemp("fake-mongod")
    src = d / "mongod.c"
    src.write_text(SELF_ALLOCATING_C)
    out = d / "mongod"
    subprocess.run(["gcc", "-O1", "-rdynamic", "-o", str(out), str(src)], check=True)
    return out


@pytest.mark.parametrize("allocator", ["jemalloc", "glibc"])
def test_self_allocating_mongod_refuses_anything_but_builtin(
    self_allocating_mongod, short_tmp, allocator
):
    binary = find_mongod(self_allocating_mongod)
    assert (binary.version, binary.allocator_builtin, binary.standin) == (
        "7.0.5",
        "tcmalloc",
        False,
    )
    [alloc] = resolve([allocator])
    with pytest.raises(AllocatorError) as e:
        MongoServer(binary, short_tmp / "w", 1.0, alloc)
    msg = str(e.value)
    assert "defines" in msg and "malloc" in msg and "statically linked tcmalloc" in msg
    assert "mixed allocators corrupt the heap" in msg
    assert "'builtin'" in msg and "--allocator=system" in msg
    assert "\n" not in msg
    # Nothing was launched: the refusal comes before any process exists.
    assert not (short_tmp / "w" / "db").exists()


def test_self_allocating_mongod_is_accepted_as_builtin(self_allocating_mongod, short_tmp):
    binary = find_mongod(self_allocating_mongod)
    server = MongoServer(binary, short_tmp / "w", 1.0, builtin())
    assert "malloc" in server.to_manifest()["binary_malloc_definitions"]


REAL_MONGOD = shutil.which("mongod")


@pytest.mark.skipif(
    REAL_MONGOD is None, reason="no mongod installed (MongoDB is not packaged for Debian)"
)
def test_real_mongod_end_to_end(short_tmp):
    binary = find_mongod()
    assert not binary.standin
    server = MongoServer(binary, short_tmp / "w", 0.25, builtin(), port=free_port())
    with server:
        server.start(timeout_s=180)
        assert server.build_info()["allocator"] in ("tcmalloc", "tcmalloc-google", "system")
        target = ClientTarget(kind="mongodb", **server.client_target(), database="iibench")
        spec = IIBenchSpec(clients=10, max_rows=5_000, batch_rows=100)
        prepare(target, spec)
        res = run_level(target, spec, short_tmp / "ii.log")
        assert res.status == "ok", res.error
        assert res.events == count_rows(target, spec) == 5_000
        assert index_keys(target, spec) == list(SECONDARY_INDEXES)
        exit_info = server.stop()
    assert exit_info.returncode == 0
