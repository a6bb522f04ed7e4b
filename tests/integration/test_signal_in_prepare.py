"""A signal while the dataset's datadir is being made (mariadb-install-db running its bootstrap
server) leaves nothing behind in the dataset cache.

Found by the CI fault campaign of 2026-11-29: a SIGHUP landed there. The install script dies at
once on SIGTERM, but its bootstrap server writes on for most of a second; the runner removed its
.prepare-* directory meanwhile, and what the server wrote after the owner marker had gone stayed
behind, unmarked. Every later run then refused the cache ("holds '.prepare-...', which mallocsweep
did not create"). Measured by hand: SIGTERM 0.4 s into the script left 11 files of 10 tries.
Now terminate() returns only when the whole process group is gone, and the directory's marker is
removed last."""

from __future__ import annotations

import shutil
import subprocess
import time

import pytest

from rundir.format import OWNER_MARKER
from rundir.write import make_owned_dir, remove_owned_dir
from servers.launch import spawn

pytestmark = pytest.mark.integration

INSTALL_DB = shutil.which("mariadb-install-db")


def _live_members(pgid: int) -> list[str]:
    ps = subprocess.run(["ps", "-eo", "pgid=,stat=,comm="], capture_output=True, text=True).stdout
    return [ln for ln in ps.splitlines() if ln.split()[0] == str(pgid) and "Z" not in ln.split()[1]]


@pytest.mark.skipif(INSTALL_DB is None, reason="mariadb-install-db is not installed")
def test_install_db_stopped_early_leaves_no_writer_and_no_files(tmp_path):
    bootstrap_outlived_its_script = 0
    for delay in (0.3, 0.4, 0.5, 0.6):
        work = make_owned_dir(tmp_path / f"prepare-{delay}")
        log = work / "initialize.log"
        argv = [
            INSTALL_DB,
            "--no-defaults",
            f"--datadir={work / 'datadir'}",
            "--auth-root-authentication-method=normal",
            "--skip-test-db",
            "--skip-name-resolve",
            "--user=root",
        ]
        child = spawn(argv, env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}, stdout=log, stderr=log)
        time.sleep(delay)
        if len(_live_members(child.pid)) > 1:
            bootstrap_outlived_its_script += 1  # the script and its server: the racy case
        child.terminate(term_timeout=30)
        assert _live_members(child.pid) == [], f"SIGTERM at {delay} s"
        assert remove_owned_dir(work) and not work.exists()
        assert not (tmp_path / f"prepare-{delay}" / OWNER_MARKER).exists()
    assert bootstrap_outlived_its_script > 0  # else this test proved nothing
