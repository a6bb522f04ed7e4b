"""The servers cache without the network: where it lives, what counts as fetched, what a killed
fetch leaves, the preflight errors, and a root's dpkg status (recorded from a sid root)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from collectors.procfs import ProcFS
from servers.acquire import fetch
from servers.acquire.archive import Package
from servers.errors import ServerError
from suites.cli.main import main
from suites.errors import SuiteError

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "archive"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    d = tmp_path / "servers"
    monkeypatch.setenv("MALLOCSWEEP_SERVERS", str(d))
    return d


def _fake(cache: Path, spec: str = "mysql-9.7.4") -> fetch.FetchedServer:
    s = fetch.FetchedServer(
        spec=spec,
        flavor="mysql",
        version="9.7.4",
        debian_version="9.7.4-2",
        release="sid",
        kind="root",
        path=str(cache / spec / "root"),
        binary="/usr/sbin/mysqld",
        glibc="2.43",
        allocators={"jemalloc": {"package": "libjemalloc2", "version": "5.3.1-2"}},
    )
    (cache / spec / "root").mkdir(parents=True)
    # the binary it names is there: a fetched server without it is damaged (fetch.damage)
    (cache / spec / "root/usr/sbin").mkdir(parents=True)
    (cache / spec / "root/usr/sbin/mysqld").write_text("")
    (cache / spec / fetch.META).write_text(json.dumps(s.to_json()))
    return s


def test_servers_dir_override_and_state_default(tmp_path, monkeypatch):
    monkeypatch.delenv("MALLOCSWEEP_SERVERS", raising=False)
    monkeypatch.setenv("MALLOCSWEEP_STATE", str(tmp_path / "state"))
    assert fetch.servers_dir() == tmp_path / "state" / "servers"
    monkeypatch.setenv("MALLOCSWEEP_SERVERS", str(tmp_path / "mine"))
    assert fetch.servers_dir() == tmp_path / "mine"


def test_lookup_not_fetched_says_how(cache):
    with pytest.raises(
        ServerError, match=r"not fetched: run `mallocsweep servers fetch mysql-9.7.4`"
    ):
        fetch.lookup("mysql-9.7.4")
    with pytest.raises(ServerError, match="is not FLAVOR-X.Y.Z"):
        fetch.lookup("mysql")


def test_lookup_and_list_read_only_complete_fetches(cache):
    s = _fake(cache)
    # a killed fetch's build directory, and a directory without metadata, are not servers
    (cache / ".mariadb-11.8.9.partial-999999").mkdir()
    (cache / "mariadb-11.8.9").mkdir()
    got = fetch.lookup("mysql-9.7.4")
    assert got == s
    assert got.host_binary == cache / "mysql-9.7.4" / "root" / "usr" / "sbin" / "mysqld"
    assert [x.spec for x in fetch.list_fetched()] == ["mysql-9.7.4"]
    # ... but one named like a server is said to be damaged, with the command that repairs it
    # (issue 35: it once read as "not fetched")
    with pytest.raises(
        ServerError, match="mariadb-11.8.9 is fetched but damaged .*no fetched.json"
    ):
        fetch.lookup("mariadb-11.8.9")
    assert [d[0] for d in fetch.list_damaged()] == ["mariadb-11.8.9"]
    with pytest.raises(ServerError, match="mariadb-10.11.18 is not fetched"):
        fetch.lookup("mariadb-10.11.18")


def test_fetch_of_a_fetched_spec_touches_nothing(cache):
    s = _fake(cache)
    said = []
    assert fetch.fetch("mysql-9.7.4", said.append) == s
    assert said == [f"mysql-9.7.4 is already fetched in {cache / 'mysql-9.7.4'}"]
    assert not (cache / ".archive").exists()  # no index was read or downloaded


def test_fetch_refuses_a_directory_it_did_not_finish(cache):
    (cache / "mysql-9.7.4").mkdir(parents=True)
    (cache / "mysql-9.7.4" / "keep.txt").write_text("user data")
    with pytest.raises(ServerError, match="holds no fetched.json"):
        fetch.fetch("mysql-9.7.4")
    assert (cache / "mysql-9.7.4" / "keep.txt").read_text() == "user data"


def test_killed_fetch_leftover_is_removed_only_when_its_builder_is_gone(cache):
    cache.mkdir()
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    dead_pid = int(dead.stdout)
    gone = cache / f".mysql-9.7.4.partial-{dead_pid}"
    (gone / "root" / "etc").mkdir(parents=True)
    alive = cache / ".mariadb-11.8.9.partial-1"  # pid 1 is alive
    alive.mkdir()
    assert fetch.clean_leftovers(cache) == [gone]
    assert not gone.exists() and alive.exists()


def test_mounts_under_reads_mountinfo(tmp_path):
    info = tmp_path / "mountinfo"
    root = tmp_path / "b"
    info.write_text(
        f"22 1 0:21 / /proc rw - proc proc rw\n"
        f"90 22 0:21 / {root}/root/proc rw - proc proc rw\n"
        f"91 22 0:5 / {root}x/proc rw - proc proc rw\n"
    )
    assert fetch.mounts_under(root, info) == [f"{root}/root/proc"]


def test_disk_preflight_says_needed_and_free(tmp_path):
    with pytest.raises(ServerError) as e:
        fetch.check_disk(tmp_path, needed_mb=1500, free_mb=900)
    assert "about 1500 MB needed, 900 MB free" in str(e.value)
    fetch.check_disk(tmp_path, needed_mb=10, free_mb=900)
    pkg = Package("mysql-server-core", "9.7.4-2", "mysql-9.7", installed_size_kb=100 * 1024)
    assert fetch.need_mb("root", [pkg]) == fetch.ROOT_BASE_MB + 3 * 100 + fetch.MARGIN_MB
    assert fetch.need_mb("basedir", [pkg]) == 140 + fetch.MARGIN_MB


def test_a_root_needs_root():
    with pytest.raises(ServerError, match="run as root"):
        fetch.check_root_tools(euid=1000)


def test_root_dpkg_status_gives_versions_and_glibc():
    installed = fetch.parse_dpkg_status((FIX / "sid-root.status").read_text())
    assert installed["libc6"] == "2.43-7"
    assert installed["libjemalloc2"] == "5.3.1-2"
    assert installed["mysql-server-core"] == "9.7.4-2"
    assert "libmimalloc2.0" not in installed  # removed, only its config files left
    assert fetch.glibc_of(installed) == "2.43"
    assert fetch.glibc_of({}) == ""


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["servers", "fetch", "mysql-9.7"], "'mysql-9.7' is not FLAVOR-X.Y.Z"),
        (["servers", "fetch", "percona-8.0.35"], "Percona Server is not in Debian's archive"),
    ],
)
def test_cli_spec_errors_are_one_line_exit_2(capsys, cache, argv, expected):
    code = main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1 and expected in err
    assert not cache.exists()  # nothing made


def test_cli_list_empty_and_json(capsys, cache):
    assert main(["servers", "list"]) == 0
    assert "nothing fetched" in capsys.readouterr().out
    _fake(cache)
    assert main(["servers", "list", "--json"]) == 0
    [row] = json.loads(capsys.readouterr().out)
    assert (row["spec"], row["release"], row["glibc"]) == ("mysql-9.7.4", "sid", "2.43")


def test_suite_names_a_fetched_server(cache):
    from suites.suite.model import parse_suite
    from suites.suite.overrides import apply_overrides

    s = parse_suite('[server]\nfetched = "mariadb-10.11.18"\n', "s.toml")
    assert s.server.fetched == "mariadb-10.11.18"
    with pytest.raises(SuiteError, match=r"server.fetched.*is not FLAVOR-X.Y.Z"):
        parse_suite('[server]\nfetched = "mariadb-10.11"\n', "s.toml")
    with pytest.raises(SuiteError, match="either fetched or binary/basedir"):
        parse_suite('[server]\nfetched = "mysql-9.7.4"\nbinary = "mysqld"\n', "s.toml")
    # --server fetched:SPEC replaces the file's binary; a plain --server replaces its fetched
    t = apply_overrides(
        parse_suite('[server]\nbinary = "mysqld"\n', "s.toml"), server="fetched:mysql-9.7.4"
    )
    assert (t.server.fetched, t.server.binary) == ("mysql-9.7.4", "")
    assert apply_overrides(s, server="mariadbd").server.fetched == ""


def test_runner_resolves_a_fetched_root_through_the_root_support(cache):
    from suites.runner.matrix import Matrix
    from suites.suite.model import parse_suite

    suite = parse_suite('[server]\nfetched = "mysql-9.7.4"\n', "s.toml")
    m = Matrix.__new__(Matrix)
    m.suite = suite
    with pytest.raises(
        ServerError, match=r"mysql-9.7.4 is not fetched: run `mallocsweep servers fetch"
    ):
        m.resolve_server()
    _fake(cache)
    # A fetched root goes to the root support, which checks the (fake, empty) root it was given.
    with pytest.raises(ServerError, match=r"server root .*mysql-9\.7\.4/root has no /usr/bin/env"):
        m.resolve_server()


def test_basedir_takes_the_same_source_packages_at_the_same_version():
    from servers.acquire.archive import parse_packages

    [_new, old] = parse_packages((FIX / "bookworm-servers.Packages").read_text())
    deps = parse_packages((FIX / "bookworm-server-deps.Packages").read_text())
    got = fetch.same_source_set(old, deps)
    assert [(p.name, p.version) for p in got] == [
        ("mariadb-server-core", "1:10.11.18-0+deb12u1"),
        ("mariadb-common", "1:10.11.18-0+deb12u1"),
        ("mariadb-client-core", "1:10.11.18-0+deb12u1"),
    ]  # not libaio1 (the host's), not the 10.11.19 builds


def _state(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def test_a_build_step_past_its_time_is_killed_with_its_children(tmp_path):
    log = tmp_path / "fetch.log"
    pidfile = tmp_path / "child.pid"
    with pytest.raises(ServerError, match="sleeper did not finish in 1s"):
        fetch._run(["sh", "-c", f"sleep 60 & echo $! > {pidfile}; wait"], log, "sleeper", timeout=1)
    child = int(pidfile.read_text())
    # SIGKILL went to the whole group; a killed process may still be on its way out ('R' in its
    # exit path on a loaded machine) for a moment: it must be gone or a zombie soon after.
    deadline = time.monotonic() + 10
    while ProcFS().alive(child) and _state(child) not in ("Z", None):
        assert time.monotonic() < deadline, f"the step's child {child} outlived the kill"
        time.sleep(0.05)
    seen = []
    fetch._run(["sh", "-c", "echo I: unpacking; sleep 1.2"], log, "step", watch=seen.append)
    assert seen == ["I: unpacking"]
    with pytest.raises(ServerError, match=r"step failed \(status 3\): I: broken"):
        fetch._run(["sh", "-c", "echo I: broken; exit 3"], log, "step")


def test_a_failed_build_is_removed_and_its_log_kept(cache, monkeypatch):
    from servers.acquire.archive import Located, parse_spec

    spec = parse_spec("mariadb-10.11.18")
    pkg = Package("mariadb-server-core", "1:10.11.18-0+deb12u1", "mariadb")
    monkeypatch.setattr(
        fetch, "locate", lambda s, c, say: (Located(s, "bookworm", pkg), {"bookworm": None})
    )
    monkeypatch.setattr(fetch, "_same_source_set", lambda ix, located: [pkg])

    def broken(located, ix, pkgs, tmp, final, say):
        (tmp / "fetch.log").write_text("E: something broke\n")
        raise ServerError(
            f"apt-get download failed (status 100): E: something broke; see {tmp / 'fetch.log'}"
        )

    monkeypatch.setattr(fetch, "_make_basedir", broken)
    with pytest.raises(ServerError) as e:
        fetch.fetch(str(spec), host_release="bookworm")
    kept = cache / "mariadb-10.11.18.failed.log"
    assert str(e.value).endswith(f"see {kept}")
    assert kept.read_text() == "E: something broke\n"
    assert [p.name for p in cache.iterdir() if ".partial-" in p.name] == []
    assert fetch.list_fetched() == []


@pytest.mark.parametrize(
    "line, expected",
    [
        # recorded: `chroot ROOT /usr/sbin/mariadbd --version` in a trixie root, and in a sid root
        (
            "/usr/sbin/mariadbd  Ver 11.8.9-MariaDB-0+deb13u1 from Debian for debian-linux-gnu on "
            "x86_64 (-- Please help get to 10k stars at https://github.com/MariaDB/Server)",
            ("mariadb", "11.8.9", "11.8.9-MariaDB-0+deb13u1"),
        ),
        (
            "/usr/sbin/mysqld  Ver 9.7.4-2 for Linux on x86_64 ((Debian))",
            ("mysql", "9.7.4", "9.7.4-2"),
        ),
    ],
)
def test_version_lines_of_the_fetched_servers(line, expected):
    from suites.families.mysql.flavor import parse_version_output

    assert parse_version_output(line) == expected


def test_a_root_is_fetched_with_the_dump_client_of_its_server():
    """The shipped fragmentation suites dump with the server's own client inside the root: a
    root gets it pinned to the server's version when built from the same source, apt's choice
    when not, and a release without it is named (the whole install would fail on it)."""
    mysql = Package("mysql-server-core", "9.7.4-1", "mysql-9.7")
    same = [Package("mysql-client-core", "9.7.4-1", "mysql-9.7")]
    assert fetch.client_pins(mysql, "mysql", same) == (["mysql-client-core=9.7.4-1"], [])
    other = [Package("mysql-client-core", "9.6.0-1", "mysql-9.6")]
    assert fetch.client_pins(mysql, "mysql", other) == (["mysql-client-core"], [])
    assert fetch.client_pins(mysql, "mysql", []) == ([], ["mysql-client-core"])
    maria = Package("mariadb-server-core", "1:11.8.3-1", "mariadb")
    client = [Package("mariadb-client", "1:11.8.3-1", "mariadb")]
    assert fetch.client_pins(maria, "mariadb", client) == (["mariadb-client=1:11.8.3-1"], [])
