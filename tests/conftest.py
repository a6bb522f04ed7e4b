"""Shared test fixtures. Integration tests start real servers on private ports and sockets."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

# `make test` runs the tests in two pytest-xdist workers (--dist loadgroup). Each test module is
# one group, so its module-scoped fixtures (a run shared by its tests) live in one worker. Tests
# that change what the whole machine shares (the THP sysfs settings, vm.nr_hugepages) or check
# that it is unchanged carry the `system_settings` mark: they form one group and so never overlap
# each other. Everything else may run beside them: servers on private ports, sockets and
# directories, fetched roots shared read-only (their archive index and fetches are locked).
SYSTEM_GROUP = "system-settings"


def pytest_configure(config) -> None:
    config.addinivalue_line(
        "markers",
        "system_settings: changes or checks machine-wide settings (THP, huge pages); runs in one "
        "xdist group so that no two such tests overlap",
    )


def pytest_collection_modifyitems(config, items) -> None:
    for item in items:
        if item.get_closest_marker("xdist_group"):
            continue
        system = item.get_closest_marker("system_settings") is not None
        group = SYSTEM_GROUP if system else item.nodeid.split("::", 1)[0]
        item.add_marker(pytest.mark.xdist_group(group))


@pytest.fixture
def short_tmp():
    """A short temporary directory: unix socket paths must stay under 108 bytes."""
    d = Path(tempfile.mkdtemp(prefix="ms-", dir="/tmp"))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(autouse=True, scope="session")
def private_state_dir():
    """Runs started by tests record themselves (run registry, THP pending records) in a state
    directory of the test session, never in the user's ~/.local/state/mallocsweep."""
    import os

    if os.environ.get("MALLOCSWEEP_STATE"):
        yield
        return
    d = Path(tempfile.mkdtemp(prefix="ms-state-", dir="/tmp"))
    os.environ["MALLOCSWEEP_STATE"] = str(d)
    try:
        yield
    finally:
        os.environ.pop("MALLOCSWEEP_STATE", None)
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(autouse=True, scope="session")
def session_cache(private_state_dir):
    """MALLOCSWEEP_CACHE for the session (the user's own if set, as MALLOCSWEEP_STATE): shims
    built and ELF tables read once for every run of the session, datasets shared by the runs
    given tests/integration/conftest.py's dataset_cache, and nothing written to the user's
    ~/.cache/mallocsweep."""
    import os

    if os.environ.get("MALLOCSWEEP_CACHE"):
        yield Path(os.environ["MALLOCSWEEP_CACHE"])
        return
    d = Path(tempfile.mkdtemp(prefix="ms-cache-", dir="/tmp"))
    os.environ["MALLOCSWEEP_CACHE"] = str(d)
    try:
        yield d
    finally:
        os.environ.pop("MALLOCSWEEP_CACHE", None)
        shutil.rmtree(d, ignore_errors=True)
