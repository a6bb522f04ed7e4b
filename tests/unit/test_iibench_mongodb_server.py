"""suites/families/mongodb/server.py without a server: version parsing, THP advice, status flattening, refusals."""

import os
import stat

import pytest

from servers.allocators import Allocator
from servers.errors import AllocatorError, ServerError
from suites.families.mongodb.server import (
    MongoBinary,
    MongoServer,
    check_allocator,
    check_allocators,
    find_mongod,
    flatten_numeric,
    parse_version_output,
    read_thp,
    thp_advice,
    thp_advice_text,
)

REAL_70 = """db version v7.0.5
Build Info: {
    "version": "7.0.5",
    "gitVersion": "7809d71e84e314b497f282ea8aa06d7ded3eb205",
    "openSSLVersion": "OpenSSL 3.0.2 15 Mar 2022",
    "modules": [],
    "allocator": "tcmalloc",
    "environment": {"distmod": "ubuntu2204", "distarch": "x86_64", "target_arch": "x86_64"}
}
"""

BUILTIN = Allocator(name="builtin", kind="builtin", family="builtin", library=None)
GLIBC = Allocator(name="glibc", kind="system", family="glibc", library=None)
# An ELF executable that defines no malloc itself: stands for a mongod whose symbols are hidden.
NO_MALLOC_SYMBOLS = "/bin/true"
JEMALLOC = Allocator(
    name="jemalloc", kind="preload", family="jemalloc",
    library="/usr/lib/x86_64-linux-gnu/libjemalloc.so.2",
)  # fmt: skip


def test_parse_real_version_output():
    version, build = parse_version_output(REAL_70)
    assert version == "7.0.5"
    assert build["allocator"] == "tcmalloc"


def test_parse_rejects_other_programs():
    assert parse_version_output("mysqld  Ver 10.11.6-MariaDB") is None
    assert parse_version_output("") is None


def test_parse_standin_output():
    version, build = parse_version_output(
        'db version standin-1.46.0\nBuild Info: {"allocator": "jvm", "mallocsweepStandIn": true}\n'
    )
    assert version == "standin-1.46.0"
    assert build["mallocsweepStandIn"] is True


@pytest.mark.parametrize(
    "version,enabled,defrag,disable,alloc,tunables,expect",
    [
        ("7.0.5", "always", "madvise", False, "tcmalloc", "", ["disabling"]),
        ("7.0.5", "always", "madvise", True, "tcmalloc", "", []),  # PR_SET_THP_DISABLE: never
        ("7.0.5", "madvise", "madvise", True, "tcmalloc", "", []),  # prctl counts as never
        ("7.0.5", None, None, True, "tcmalloc", "", []),  # prctl: never, even unread
        ("6.0.1", "never", "never", False, "tcmalloc", "", []),
        ("6.0.1", "madvise", "madvise", False, "tcmalloc", "", ["disabling"]),  # "disable" = never
        ("7.0.5", None, None, False, "tcmalloc", "", ["could not be read"]),
        ("8.0.3", None, None, False, "system", "", ["could not be read"]),
        ("8.0.3", "always", None, False, "system", "", ["defrag setting could not be read"]),
        ("8.0.3", "never", "never", True, "system", "", ["enabling"]),
        ("8.0.3", "never", "madvise", False, "tcmalloc-google", "glibc.pthread.rseq=0", ["enabling"]),
        ("8.0.3", "always", "madvise", False, "tcmalloc-google", "glibc.pthread.rseq=0", ["defer+madvise"]),
        ("8.0.3", "always", "defer+madvise", False, "tcmalloc-google", "", ["rseq=0"]),
        ("8.0.3", "always", "defer+madvise", False, "tcmalloc-google", "x=1:glibc.pthread.rseq=0", []),
        ("8.0.3", "always", "defer+madvise", False, "system", "", []),
        ("standin-1.46.0", "always", "always", False, "jvm", "", []),
    ],
)  # fmt: skip
def test_thp_advice_flips_at_8_0(version, enabled, defrag, disable, alloc, tunables, expect):
    warnings = thp_advice(version, enabled, defrag, disable, alloc, tunables)
    assert len(warnings) == len(expect)
    for w, word in zip(warnings, expect, strict=True):
        assert word in w
        assert "\n" not in w
        assert "None" not in w  # an unread mode is said in words, not as "THP None"


def test_read_thp_takes_the_bracketed_mode(tmp_path):
    (tmp_path / "enabled").write_text("always [madvise] never\n")
    (tmp_path / "defrag").write_text("always defer [defer+madvise] madvise never\n")
    assert read_thp(str(tmp_path)) == {"enabled": "madvise", "defrag": "defer+madvise"}
    assert read_thp(str(tmp_path / "missing")) == {"enabled": None, "defrag": None}


def test_flatten_numeric_keeps_numbers_only():
    doc = {
        "ok": 1.0,
        "host": "x",
        "mem": {"resident": 120, "virtual": 900, "supported": True},
        "wiredTiger": {"cache": {"bytes currently in the cache": 12345}},
        "opcounters": {"insert": 10},
    }
    flat = flatten_numeric(doc)
    assert flat == {
        "ok": 1.0,
        "mem.resident": 120.0,
        "mem.virtual": 900.0,
        "wiredTiger.cache.bytes currently in the cache": 12345.0,
        "opcounters.insert": 10.0,
    }


def test_find_mongod_missing_path_is_one_line(tmp_path):
    with pytest.raises(ServerError) as e:
        find_mongod(tmp_path / "nope" / "mongod")
    msg = str(e.value)
    assert "does not exist" in msg and "server.binary" in msg and "\n" not in msg


def test_find_mongod_not_on_path(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ServerError, match=r"no mongod on PATH; MongoDB is not packaged for Debian"):
        find_mongod(None)


def test_find_mongod_rejects_a_program_that_is_not_mongod(tmp_path):
    fake = tmp_path / "mongod"
    fake.write_text("#!/bin/sh\necho 'hello, I am not a database'\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    with pytest.raises(ServerError, match=r"is not a mongod: .*hello, I am not a database"):
        find_mongod(fake)


def test_find_mongod_reads_version_and_allocator(tmp_path):
    fake = tmp_path / "bin" / "mongod"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\ncat <<'EOF'\n" + REAL_70 + "EOF\n")
    fake.chmod(0o755)
    b = find_mongod(tmp_path)  # a directory holding bin/mongod
    assert (b.version, b.allocator_builtin, b.standin) == ("7.0.5", "tcmalloc", False)
    assert b.path == os.fspath(fake)


def test_standin_refuses_any_preload(tmp_path):
    standin = MongoBinary(str(tmp_path / "mongod-standin"), "standin-1.46.0", "jvm", True)
    with pytest.raises(AllocatorError, match=r"stand-in, a JVM process: only allocator 'builtin'"):
        MongoServer(standin, tmp_path, 0.25, JEMALLOC)
    server = MongoServer(standin, tmp_path, 0.25, BUILTIN)
    m = server.to_manifest()
    assert m["standin"] is True and "no allocator conclusions" in m["note"]
    assert server.stop() is None  # never started: nothing to stop


def test_cache_size_must_be_positive(tmp_path):
    standin = MongoBinary(str(tmp_path / "x"), "standin-1", "jvm", True)
    with pytest.raises(ServerError, match=r"server.cache_gb = 0"):
        MongoServer(standin, tmp_path, 0, BUILTIN)


def test_thp_advice_text_flips_at_8_0():
    assert "THP 'never'" in thp_advice_text("7.0.5")
    assert "defer+madvise" in thp_advice_text("8.0.3")
    assert thp_advice_text("standin-1.46.0") is None


@pytest.mark.parametrize("builtin_allocator", ["tcmalloc", "tcmalloc-google"])
@pytest.mark.parametrize("allocator", [JEMALLOC, GLIBC], ids=["jemalloc", "glibc"])
def test_static_allocator_in_build_info_refuses_preload_without_symbols(
    builtin_allocator, allocator
):
    """Hidden or stripped symbols: the ELF check sees nothing, the build info still says it."""
    b = MongoBinary(NO_MALLOC_SYMBOLS, "7.0.5", builtin_allocator, False)
    with pytest.raises(AllocatorError) as e:
        check_allocator(b, allocator)
    msg = str(e.value)
    assert f"links {builtin_allocator} statically" in msg and "hidden or stripped" in msg
    assert f"allocator {allocator.name!r} is refused" in msg and "--allocator=system" in msg
    assert "\n" not in msg
    assert check_allocator(b, BUILTIN) == []


def test_system_build_accepts_a_preload():
    b = MongoBinary(NO_MALLOC_SYMBOLS, "7.0.5", "system", False)
    assert check_allocator(b, GLIBC) == []


def test_check_allocators_refuses_the_whole_list_in_one_line():
    b = MongoBinary(NO_MALLOC_SYMBOLS, "7.0.5", "tcmalloc", False)
    with pytest.raises(ServerError) as e:  # AllocatorError is a ServerError: the CLI's one line
        check_allocators(b, [BUILTIN, GLIBC, JEMALLOC])
    msg = str(e.value)
    assert "asks for glibc, jemalloc" in msg and "--allocators builtin" in msg
    assert "\n" not in msg
    check_allocators(b, [BUILTIN])  # nothing to refuse
    check_allocators(MongoBinary(NO_MALLOC_SYMBOLS, "7.0.5", "system", False), [GLIBC, BUILTIN])


def test_check_allocators_standin():
    standin = MongoBinary("/x/mongod-standin", "standin-1.46.0", "jvm", True)
    with pytest.raises(
        AllocatorError, match=r"stand-in .*asks for glibc; use --allocators builtin"
    ):
        check_allocators(standin, [BUILTIN, GLIBC])
    check_allocators(standin, [BUILTIN])


def _server_after_start(tmp_path, binary, allocator, running_allocator):
    """A MongoServer as start() leaves it just after reading buildInfo (no process needed)."""
    server = MongoServer(binary, tmp_path, 0.25, allocator)
    server._build_info = {"allocator": running_allocator, "version": "7.0.5"}
    return server


def test_running_server_must_report_the_allocator_version_said(tmp_path):
    b = MongoBinary(NO_MALLOC_SYMBOLS, "7.0.5", "system", False)
    server = _server_after_start(tmp_path, b, BUILTIN, "tcmalloc")
    with pytest.raises(AllocatorError) as e:
        server._check_build_info()
    msg = str(e.value)
    assert "reported allocator 'system'" in msg and "buildInfo.allocator 'tcmalloc'" in msg
    assert "\n" not in msg
    _server_after_start(tmp_path, b, BUILTIN, "system")._check_build_info()  # agreeing: fine


def test_running_static_allocator_refuses_a_preload_even_when_version_said_nothing(tmp_path):
    b = MongoBinary(NO_MALLOC_SYMBOLS, "7.0.5", None, False)  # --version had no build info
    server = _server_after_start(tmp_path, b, JEMALLOC, "tcmalloc-google")
    with pytest.raises(
        AllocatorError, match=r"'tcmalloc-google' \(statically linked\).*'jemalloc'"
    ):
        server._check_build_info()
    _server_after_start(tmp_path, b, BUILTIN, "tcmalloc-google")._check_build_info()


def test_argv_writes_a_pid_file_in_the_work_dir(tmp_path):
    standin = MongoBinary(str(tmp_path / "mongod-standin"), "standin-1.46.0", "jvm", True)
    server = MongoServer(standin, tmp_path / "w", 0.25, BUILTIN, port=12345)
    argv = server.argv()
    assert argv[argv.index("--pidfilepath") + 1] == str(tmp_path / "w" / "mongod.pid")
    assert argv[argv.index("--bind_ip") + 1] == "127.0.0.1"


def test_manifest_carries_the_thp_advice(tmp_path):
    b = MongoBinary(NO_MALLOC_SYMBOLS, "7.0.5", "tcmalloc", False)
    m = MongoServer(b, tmp_path, 0.25, BUILTIN).to_manifest()
    assert "disable transparent hugepages" in m["thp_advice"]
    assert m["warnings"] == [] and m["thp_effective"] is None  # not started: nothing judged yet
