"""mallocsweep as `pip install .` leaves it (not editable), run from a directory outside the checkout:
`doctor --json` and `allocators --json` work, with every shipped file (configs/, the report's
templates, the Lua wrapper, the C sources) found in the installed package and the exec helper
built from its shipped source on first use.

Cheap by design: the wheel is built from a copy of the checkout's files (those git would commit)
without build isolation, and the new venv borrows this venv's third-party packages (a .pth line)
instead of downloading them; that every import is declared is tests/unit/test_declared_imports.py's
job. `make check-install` does the whole thing from a clean clone with pip's own downloads.
"""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest

from servers.allocators import load_registry
from tests.integration.runs_helpers import REPO

pytestmark = pytest.mark.integration


def _files_of_the_checkout() -> list[str]:
    """What a clean clone would hold: tracked files and new ones not ignored (an uncommitted
    file is in; .venv, .cache and build output are out)."""
    r = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=True,
    )
    return [f for f in r.stdout.decode().split("\0") if f and (REPO / f).is_file()]


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(venv, a working directory outside the checkout, the environment to run in)."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed: no way to tell the checkout's files")
    tmp = tmp_path_factory.mktemp("install")
    src = tmp / "src"
    for f in _files_of_the_checkout():
        (src / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / f, src / f)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run(
        [*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp / "wheel"), str(src)],
        check=True,
        capture_output=True,
    )
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    (wheel,) = (tmp / "wheel").glob("mallocsweep-*.whl")
    subprocess.run(
        [*pip, "--python", str(venv / "bin" / "python"), "install", "--no-deps", "--no-index",
         str(wheel)],
        check=True,
        capture_output=True,
    )  # fmt: skip
    (purelib,) = (venv / "lib").glob("python3*/site-packages")
    # Third-party packages from this venv: a path line only (its .pth files, among them the
    # editable install's finder, are not run for a directory added this way).
    (purelib / "borrowed-deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    work = tmp / "elsewhere"
    work.mkdir()
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "MALLOCSWEEP_MSEXEC", "VIRTUAL_ENV", "MALLOCSWEEP_SERVERS")
    }
    # A user's own cache and state: not the test session's (whose fetched servers are kept in the
    # checkout's .cache/servers, tests/integration/roots.py).
    env |= {
        "MALLOCSWEEP_CACHE": str(tmp / "cache"),
        "MALLOCSWEEP_STATE": str(tmp / "state"),
        "PATH": f"{venv / 'bin'}:{env['PATH']}",
    }
    return venv, work, env


def _run(installed, *args: str) -> subprocess.CompletedProcess:
    venv, work, env = installed
    return subprocess.run(
        [str(venv / "bin" / args[0]), *args[1:]],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_installed_package_is_not_the_checkout(installed):
    venv, _, _ = installed
    r = _run(
        installed,
        "python",
        "-c",
        "import analysis, configs, rundir, servers, suites, collectors; "
        "print('\\n'.join(m.__file__ for m in (analysis, configs, rundir, servers, suites, "
        "collectors)))",
    )
    assert r.returncode == 0, r.stderr
    for f in r.stdout.split():
        assert Path(f).is_relative_to(venv), f


def test_doctor_json_from_outside_the_checkout(installed):
    _, _, env = installed
    r = _run(installed, "mallocsweep", "doctor", "--json")
    assert r.returncode == 0, r.stderr
    checks = {c["name"]: c for c in json.loads(r.stdout)}
    assert checks["mysql-family server"]["ok"], checks["mysql-family server"]
    assert checks["allocator glibc (core)"]["ok"]
    # Built from the shipped msexec.c into the cache on first use (no make setup here).
    helper = checks["exec helper"]
    assert helper["ok"], helper
    assert Path(helper["detail"]).is_relative_to(env["MALLOCSWEEP_CACHE"]), helper
    assert os.access(helper["detail"], os.X_OK)
    assert str(REPO) not in r.stdout  # nothing was read from the checkout


def test_allocators_json_from_outside_the_checkout(installed):
    r = _run(installed, "mallocsweep", "allocators", "--json")
    assert r.returncode == 0, r.stderr
    found = json.loads(r.stdout)
    # The registry the installed package read is the shipped configs/allocators.toml.
    assert [a["name"] for a in found] == list(load_registry())
    glibc = next(a for a in found if a["name"] == "glibc")
    assert glibc["usable"] and glibc["core"]
