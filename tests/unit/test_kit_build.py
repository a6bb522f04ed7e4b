"""The kit (issue 37) without building one: what `kit build` refuses (one line, exit 2, nothing
written or replaced), the kit's manifest (kit.json) and its record in a run's manifest, and the
launcher's own argument handling on a stand-in kit (a directory whose root/ has the host's
loader: every case here is refused or answered before anything is mounted).
The real build and a run on a bare target: tests/integration/test_kit.py (make test-kit)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from rundir.errors import RunDirError
from rundir.records import check_manifest
from suites.cli.main import main
from suites.errors import SuiteError
from suites.kit import manifest as km
from suites.kit.request import compression_for, parse_request, parse_server

LAUNCHER = Path(__file__).resolve().parents[2] / "suites" / "kit" / "launcher.sh"
HOST_LOADER = Path("/lib64/ld-linux-x86-64.so.2")


def _build(capsys, *argv) -> tuple[int, str]:
    code = main(["kit", "build", *argv])
    return code, capsys.readouterr().err.strip()


# -- kit build: refusals ---------------------------------------------------------------------
@pytest.mark.parametrize(
    "server, expected",
    [
        ("mariadb", "--server 'mariadb': expected 'host'"),
        ("fetched:mysql", "--server 'fetched:mysql': server spec 'mysql'"),
        ("fetched:percona-8.0.40", "Percona Server is not in Debian's archive"),
        ("Host", "--server 'Host'"),
    ],
)
def test_unknown_server_is_one_line(capsys, tmp_path, server, expected):
    code, err = _build(capsys, "--out", str(tmp_path / "k.tar.zst"), "--server", server)
    assert code == 2
    assert err.startswith("mallocsweep: error: ") and expected in err, err
    assert "\n" not in err and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []


def test_existing_out_is_never_overwritten(capsys, tmp_path):
    out = tmp_path / "kit.tar.zst"
    out.write_bytes(b"the user's file")
    code, err = _build(capsys, "--out", str(out))
    assert code == 2
    assert err == (
        f"mallocsweep: error: --out {out}: exists; a kit is never written over a file: give a "
        "new name or move it"
    )
    assert out.read_bytes() == b"the user's file"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kit.tar.zst"]


def test_existing_out_dangling_link_is_refused(capsys, tmp_path):
    out = tmp_path / "kit.tar.gz"
    out.symlink_to(tmp_path / "nowhere")
    code, err = _build(capsys, "--out", str(out))
    assert code == 2 and "exists" in err
    assert out.is_symlink() and not (tmp_path / "nowhere").exists()


@pytest.mark.parametrize("where", ["file", "missing", "proc"])
def test_unwritable_out_is_one_line(capsys, tmp_path, where):
    if where == "file":
        (tmp_path / "f").write_text("x")
        out, expected = tmp_path / "f" / "kit.tar.zst", "is not a directory"
    elif where == "missing":
        out, expected = tmp_path / "no" / "kit.tar.zst", "is not a directory"
    else:  # a directory nobody can create files in (root included)
        out, expected = Path("/proc/1/kit.tar.zst"), "cannot write in /proc/1"
    code, err = _build(capsys, "--out", str(out))
    assert code == 2, err
    assert err.startswith(f"mallocsweep: error: --out {out}: ") and expected in err, err
    assert "\n" not in err


def test_duplicate_server_is_refused(tmp_path):
    with pytest.raises(SuiteError, match="given twice"):
        parse_request(str(tmp_path / "k.tar.gz"), ["host", "host"])


def test_servers_are_canonical_and_default_to_host(tmp_path):
    req = parse_request(str(tmp_path / "k.tar.gz"), None)
    assert req.servers == ("host",) and req.compression == "gzip"
    assert parse_server(" fetched:mysql-9.7.4 ") == "fetched:mysql-9.7.4"
    req = parse_request(str(tmp_path / "a.tar.gz"), ["host", "fetched:mariadb-11.8.9"])
    assert req.fetched_specs == ["mariadb-11.8.9"]


@pytest.mark.parametrize(
    "name, available, expected, dirname",
    [
        ("kit.tar.zst", {"zstd", "gzip"}, "zstd", "kit"),
        ("kit.tar.gz", {"zstd", "gzip"}, "gzip", "kit"),
        ("kit.tgz", {"gzip"}, "gzip", "kit"),
        ("mallocsweep-kit", {"zstd", "gzip"}, "zstd", "mallocsweep-kit"),
        ("mallocsweep-kit.tar", {"gzip"}, "gzip", "mallocsweep-kit"),
    ],
)
def test_compression_and_directory_from_the_name(tmp_path, name, available, expected, dirname):
    def which(cmd):
        return f"/usr/bin/{cmd}" if cmd in available else None

    assert compression_for(tmp_path / name, which) == expected
    req = parse_request(str(tmp_path / name), ["host"], which)
    assert req.dirname == dirname and req.compression == expected


def test_zstd_name_without_zstd_says_so(tmp_path):
    with pytest.raises(SuiteError, match=r"zstd is not installed here \(name it .tar.gz\)"):
        compression_for(tmp_path / "kit.tar.zst", lambda cmd: None)


# -- the kit's manifest ------------------------------------------------------------------------
def _kit_with_two_files(tmp_path: Path) -> tuple[Path, km.KitManifest]:
    kit = tmp_path / "kit"
    (kit / "root/usr/lib").mkdir(parents=True)
    lib = kit / "root/usr/lib/libjemalloc.so.2"
    lib.write_bytes(b"\x7fELF jemalloc")
    wheel = kit / "root/mallocsweep-0.1.0-py3-none-any.whl"
    wheel.write_bytes(b"PK wheel")
    man = km.KitManifest(
        name="kit",
        tool_version="0.1.0",
        release="bookworm",
        built_at="2026-11-28T00:00:00Z",
        servers=["host"],
        components=[
            km.component(kit, "tool", "mallocsweep", wheel, version="0.1.0"),
            km.component(kit, "allocator", "jemalloc", lib, "5.3.0-1", "libjemalloc2"),
        ],
    )
    return kit, man


def test_components_carry_sha256_and_relative_paths(tmp_path):
    kit, man = _kit_with_two_files(tmp_path)
    alloc = man.components[1]
    assert alloc.path == "root/usr/lib/libjemalloc.so.2"
    assert alloc.sha256 == hashlib.sha256(b"\x7fELF jemalloc").hexdigest()
    assert (alloc.version, alloc.package) == ("5.3.0-1", "libjemalloc2")
    with pytest.raises(ValueError, match="relative to the kit"):
        km.Component("tool", "x", "/abs/path", "0" * 64)
    with pytest.raises(ValueError, match="component kind 'firmware'"):
        km.Component("firmware", "x", "a", "0" * 64)


def test_manifest_round_trips_and_verify_finds_a_changed_file(tmp_path):
    kit, man = _kit_with_two_files(tmp_path)
    path = man.write(kit)
    back = km.load(path)
    assert back == man
    assert km.verify(kit, back) == []
    (kit / "root/usr/lib/libjemalloc.so.2").write_bytes(b"tampered")
    (kit / "root/mallocsweep-0.1.0-py3-none-any.whl").unlink()
    assert km.verify(kit, back) == [
        "tool mallocsweep: root/mallocsweep-0.1.0-py3-none-any.whl is missing",
        "allocator jemalloc: root/usr/lib/libjemalloc.so.2 does not match its sha256",
    ]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("{not json", "not JSON"),
        ("[]", "a JSON object is expected"),
        ('{"kit_version": 99}', "kit_version 99, this mallocsweep reads 1"),
        ('{"kit_version": 1, "name": "k"}', "not a kit manifest"),
    ],
)
def test_bad_kit_manifest_is_one_line(tmp_path, text, expected):
    p = tmp_path / "kit.json"
    p.write_text(text)
    with pytest.raises(SuiteError) as e:
        km.load(p)
    assert str(e.value).startswith(f"{p}: ") and expected in str(e.value)
    assert "\n" not in str(e.value)


def test_a_run_records_the_kit_only_inside_one(tmp_path):
    kit, man = _kit_with_two_files(tmp_path)
    path = man.write(kit)
    assert km.run_record({}) is None
    rec = km.run_record({km.ENV: str(path)})
    assert rec["name"] == "kit" and rec["components"][1]["name"] == "jemalloc"
    # The run's manifest validates with the record and without it (readers never require it).
    base = {"format_version": 6, "cells": [], "servers": []}
    check_manifest(base, "manifest.json")
    check_manifest({**base, "kit": rec}, "manifest.json")
    with pytest.raises(RunDirError, match="field kit"):
        check_manifest({**base, "kit": {"components": []}}, "manifest.json")


# -- the launcher ------------------------------------------------------------------------------
@pytest.fixture
def standin_kit():
    """A kit directory with the launcher and a root holding only the host's loader and a suite:
    enough for every path of the launcher that ends before mounting. In a directory of its own
    under /tmp that another user can reach (pytest's tmp_path is root's alone)."""
    if not HOST_LOADER.exists():
        pytest.skip("no x86_64 loader on this host")
    top = Path(tempfile.mkdtemp(prefix="ms-kit-unit-", dir="/tmp"))
    top.chmod(0o755)
    kit = top / "kit"
    suites = kit / "root/opt/mallocsweep/suites"
    suites.mkdir(parents=True)
    (suites / "smoke.toml").write_text('[suite]\nname = "smoke"\ndescription = "tiny"\n')
    (kit / "root/lib64").mkdir()
    (kit / "root/lib64/ld-linux-x86-64.so.2").symlink_to(HOST_LOADER)
    shutil.copyfile(LAUNCHER, kit / "mallocsweep")
    (kit / "mallocsweep").chmod(0o755)
    try:
        yield kit
    finally:
        shutil.rmtree(top)


def _launch(kit: Path, *args: str, cwd: Path | None = None, user: str | None = None):
    argv = [str(kit / "mallocsweep"), *args]
    if user is not None:
        argv = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *argv]
    return subprocess.run(
        argv,
        capture_output=True,
        text=True,
        cwd=cwd or kit.parent,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def _nothing_mounted(kit: Path) -> bool:
    return str(kit) not in Path("/proc/self/mountinfo").read_text()


def test_launcher_help_and_no_arguments(standin_kit):
    p = _launch(standin_kit, "--help")
    assert p.returncode == 0 and "run smoke" in p.stdout and "doctor" in p.stdout
    p = _launch(standin_kit)
    assert p.returncode == 2 and p.stdout == "" and p.stderr.startswith("usage: ")


def test_launcher_lists_the_shipped_suites(standin_kit):
    p = _launch(standin_kit, "suites")
    assert p.returncode == 0
    assert p.stdout.split() == ["smoke", "tiny"]


def test_launcher_refuses_an_unknown_suite_name(standin_kit):
    p = _launch(standin_kit, "run", "smok")
    assert p.returncode == 2
    assert p.stderr.strip() == (
        "mallocsweep: error: no suite smok: neither a file here nor a shipped suite (see: "
        f"{standin_kit}/mallocsweep suites)"
    )
    assert _nothing_mounted(standin_kit) and not (standin_kit / ".launcher.pid").exists()


@pytest.mark.parametrize("cwd", ["/usr", "/etc", "/"])
def test_launcher_refuses_to_bind_a_system_directory(standin_kit, cwd):
    p = _launch(standin_kit, "run", "smoke", cwd=Path(cwd))
    assert p.returncode == 2
    line = p.stderr.strip()
    assert line.startswith(f"mallocsweep: error: {cwd}: cannot be seen inside the kit's root")
    assert "\n" not in line and _nothing_mounted(standin_kit)


def test_launcher_refuses_a_second_launcher_of_the_same_kit(standin_kit, tmp_path):
    holder = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", "mallocsweep-holder"],
        stdin=subprocess.DEVNULL,
    )
    try:
        # the pid file names a live process whose command line says mallocsweep
        (standin_kit / ".launcher.pid").write_text(f"{holder.pid}\n")
        p = _launch(standin_kit, "run", "smoke")
        assert p.returncode == 2
        assert f"another run of this kit is active (pid {holder.pid})" in p.stderr
        assert _nothing_mounted(standin_kit)
    finally:
        holder.kill()
        holder.wait()


def test_launcher_needs_root_and_doctor_says_so(standin_kit):
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to run the launcher as another user")
    p = _launch(standin_kit, "run", "smoke", user="65534")
    assert p.returncode == 2
    assert "error: the kit runs as root" in p.stderr and p.stderr.count("\n") == 1
    p = _launch(standin_kit, "doctor", user="65534")
    assert p.returncode == 2
    assert "lacks: root (the kit chroots and mounts: run it with sudo)" in p.stdout


def test_launcher_without_its_root_says_unpack_it(tmp_path):
    kit = tmp_path / "kit"
    kit.mkdir()
    shutil.copyfile(LAUNCHER, kit / "mallocsweep")
    (kit / "mallocsweep").chmod(0o755)
    p = _launch(kit, "run", "smoke")
    assert p.returncode == 2
    assert "is missing: unpack the whole kit" in p.stderr
    p = _launch(kit, "doctor")
    assert p.returncode == 2 and "lacks: a complete kit" in p.stdout
    json.dumps(p.stdout)  # printable text only
