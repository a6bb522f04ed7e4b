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


def pytest_itemcollected(item) -> None:
    # Marked as each test is collected, before any pytest_collection_modifyitems: xdist's worker
    # turns the marks into the node ids its scheduler groups by there.
    if item.get_closest_marker("xdist_group"):
        return
    system = item.get_closest_marker("system_settings") is not None
    group = SYSTEM_GROUP if system else item.nodeid.split("::", 1)[0]
    item.add_marker(pytest.mark.xdist_group(group))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items) -> None:
    """Refuse to run ungrouped. pytest-xdist's loadgroup groups by a suffix it writes into each
    node id; with a pytest whose node ids it cannot change (9.2 with xdist 3.8: pytest-xdist#1386)
    every group silently falls apart and the system_settings tests run beside each other, each
    changing THP under the other (seen in CI: THP left at always, and at never)."""
    if not getattr(config.option, "loadgroup", False):
        return
    ungrouped = [item.nodeid for item in items if "@" not in item.nodeid.rsplit("]", 1)[-1]]
    if ungrouped:
        raise pytest.UsageError(
            f"--dist loadgroup is not grouping here ({ungrouped[0]} has no @group in its node id: "
            f"pytest {pytest.__version__} with this pytest-xdist, see pytest-xdist#1386); pin the "
            "pytest of pyproject.toml"
        )


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
