"""Servers fetched from Debian's archive for the integration tests: `rooted_server(flavor)` and
`older_mariadb_patch()`, and their prefetch in the background.

`rooted_server(flavor)` returns the root directory of a real server of that flavor, made by
`mallocsweep servers fetch` (servers.acquire.fetch) the first time and cached in the repo's gitignored
.cache/servers, which the fetch tests share, so a root is built once per machine. The version is
the newest the archive offers today (archives move on: no version is hard-coded): MySQL from
Debian unstable, MariaDB from Debian 13. `older_mariadb_patch()` is the newest MariaDB of the
host's release older than the host's own (a basedir: the upgrade tests' old side).

Measured here: a sid root with MySQL took 119 s to fetch on a quiet machine (504 MB), a trixie
root with MariaDB 11.8 215-308 s under heavy load (262 MB); 197 s and 127 s at a load of ~20.
On a clean clone that is minutes of network and dpkg a test would wait for, so the session
starts the fetches the collected tests need (the session fixtures mysql_root, mariadb_root,
older_mariadb in tests/integration/conftest.py) in one background process as soon as the tests
are collected (`start_prefetch`), and a test that needs a server waits only for its own.
fetch's own lock keeps one fetch at a time; the process is our child through the exec helper
(it dies with the session) and is stopped at the session's end (`stop_prefetch`).

    python -m tests.integration.roots ANSWERS.json mysql mariadb mariadb-older
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import signal
import sys
import time
from pathlib import Path

import pytest

from servers.acquire import archive, fetch
from servers.errors import ServerError
from servers.launch import Child, spawn
from suites.families.mysql.server import find_mysql

REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / ".cache" / "servers"
# flavor -> (Debian release that carries the version we want, the server package there)
ROOTS = {
    "mysql": ("sid", "mysql-server-core"),
    "mariadb": ("trixie", "mariadb-server-core"),
}
OLDER = "mariadb-older"  # the prefetch's name for older_mariadb_patch()'s basedir

_prefetch: tuple[Child, Path] | None = None


def _servers_env() -> None:
    os.environ.setdefault("MALLOCSWEEP_SERVERS", str(CACHE))


def _index(release: str) -> archive.ReleaseIndex:
    ix = archive.ReleaseIndex(release, fetch.servers_dir() / ".archive" / release)
    ix.update()
    return ix


def _unreachable(e: ServerError) -> bool:
    return any(w in str(e) for w in ("resolve", "Failed to fetch", "download"))


@functools.cache
def rooted_server(flavor: str) -> Path:
    """A root with the newest `flavor` server of its release in it (fetched once, then cached)."""
    release, package = ROOTS[flavor]
    if os.geteuid() != 0:
        pytest.skip("a server root needs chroot and mount namespaces: run the tests as root")
    if shutil.which("debootstrap") is None:
        pytest.skip("debootstrap is not installed (make setup installs it)")
    _servers_env()
    done = _prefetched(flavor)
    if done is not None:
        return Path(done)
    try:
        newest = archive.newest_first(_index(release).show(package))
    except ServerError as e:
        if _unreachable(e):
            pytest.skip(f"Debian's archive is not reachable from here: {e}")
        raise
    assert newest, f"Debian {release} has no {package}"
    server = fetch.fetch(f"{flavor}-{newest[0].upstream}")
    assert server.kind == "root", f"{server.spec} was fetched as a {server.kind}, not a root"
    return Path(server.path)


@functools.cache
def older_mariadb_patch() -> str:
    """The newest MariaDB of the host's release older than the installed one, same major.minor."""
    host = find_mysql()
    if host.flavor != "mariadb":
        pytest.skip(f"the host's server is {host.flavor}, not Debian's MariaDB")
    release = archive.host_release()
    if release not in archive.RELEASES:
        pytest.skip(f"host release {release!r} is not one mallocsweep fetches from")
    _servers_env()
    done = _prefetched(OLDER)
    if done is not None:
        return done
    mm = host.version_tuple()[:2]
    ups = {p.upstream for p in _index(release).show("mariadb-server-core")}
    older = sorted(
        (tuple(int(x) for x in u.split(".")) for u in ups),
        reverse=True,
    )
    older = [v for v in older if v[:2] == mm and v < host.version_tuple()]
    if not older:
        pytest.skip(f"Debian {release} offers no MariaDB {mm[0]}.{mm[1]} older than {host.version}")
    return "mariadb-" + ".".join(map(str, older[0]))


# -- the prefetch ---------------------------------------------------------------------------------
def start_prefetch(wanted: list[str], workdir: Path) -> None:
    """Fetch `wanted` (flavors of ROOTS, or OLDER) in one background process of ours."""
    global _prefetch
    if not wanted or _prefetch is not None:
        return
    _servers_env()
    answers = workdir / "prefetch.json"
    child = spawn(
        [sys.executable, "-m", "tests.integration.roots", str(answers), *wanted],
        env=dict(os.environ),
        cwd=REPO,
        stdout=workdir / "prefetch.log",
        stderr=workdir / "prefetch.log",
    )
    _prefetch = (child, answers)


def stop_prefetch() -> None:
    """End the prefetch if it still runs (an interrupted session: fetch removes its partial
    directory on SIGTERM) and remove its work directory."""
    global _prefetch
    if _prefetch is not None:
        child, answers = _prefetch
        _prefetch = None
        child.terminate(term_timeout=60)
        shutil.rmtree(answers.parent, ignore_errors=True)


def wait_prefetch() -> None:
    """Until the background fetches are over (a test that looks at the servers directory as a
    whole must not see one of them half done)."""
    if _prefetch is not None:
        _prefetch[0].wait()


def _prefetched(what: str) -> str | None:
    """What the prefetch fetched for `what` (waiting for it), or None: no prefetch, or it could
    not (skipped, failed), and the caller then does it in place and says why."""
    if _prefetch is None:
        return None
    child, answers = _prefetch
    while True:
        try:
            got = json.loads(answers.read_text())
        except (OSError, ValueError):
            got = {}
        if what in got or not child.alive:
            return got.get(what)
        time.sleep(0.5)


def _interrupted(signum, frame):
    raise KeyboardInterrupt  # fetch removes its partial directory on the way out


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGTERM, _interrupted)
    answers, wanted = Path(argv[0]), argv[1:]
    got: dict[str, str | None] = {}
    for what in wanted:
        t0 = time.monotonic()
        try:
            if what == OLDER:
                got[what] = fetch.fetch(older_mariadb_patch()).spec
            else:
                got[what] = str(rooted_server(what))
            print(f"{what}: {got[what]} in {time.monotonic() - t0:.0f} s", flush=True)
        except (Exception, pytest.skip.Exception) as e:
            # The test does it in place and says why (skips, or fails with the same error).
            got[what] = None
            print(f"{what}: not prefetched: {type(e).__name__}: {e}", flush=True)
        tmp = answers.with_suffix(".tmp")
        tmp.write_text(json.dumps(got))
        os.replace(tmp, answers)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
