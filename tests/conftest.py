"""Shared test fixtures. Integration tests start real servers on private ports and sockets."""

from __future__ import annotations

import shutil
import signal
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


# Seconds of test time per group (setup + call + teardown of its tests, summed) in a quiet
# clean-clone `make test` (2026-11-29, 2 workers: 1,180 and 1,208 s of test time, 20m18s in
# all): its "test time by worker and group" summary prints them. pytest-xdist hands a worker one
# group at a time; by default the groups with the most tests go first, which puts the one-test
# integration modules of minutes last, where one worker ends the session alone on them while the
# other has nothing left. Here the longest groups go first (the Makefile's
# --no-loadscope-reorder keeps this order) and the many short ones fill in at the end. A group
# missing from the table keeps its place after these; refresh the table when the summary shows
# a worker idle for minutes at the end.
GROUP_SECONDS = {
    "system-settings": 180,
    "tests/integration/test_soak.py": 129,
    "tests/integration/test_resume_every_arm.py": 171,
    "tests/integration/test_client_host.py": 122,
    "tests/integration/test_server_root.py": 116,
    "tests/integration/test_reliability.py": 108,
    "tests/integration/test_alternate_design.py": 106,
    "tests/integration/test_alloc_accounting.py": 102,
    "tests/integration/test_tune_run.py": 77,
    "tests/integration/test_upgrade_inrun.py": 86,
    "tests/integration/test_fleet.py": 86,
    "tests/integration/test_servers_fetch.py": 76,
    "tests/integration/test_alternate_settle.py": 71,
    "tests/integration/test_fragmentation.py": 65,
}


def _group_of(item) -> str:
    marker = item.get_closest_marker("xdist_group")
    return marker.args[0] if marker and marker.args else item.nodeid.split("::", 1)[0]


class _TestTime:
    """Sums each finished test's setup, call and teardown time by group and by xdist worker, in
    the process that prints the session's summary (the controller under xdist)."""

    def __init__(self) -> None:
        self.by_group: dict[str, float] = {}
        self.by_worker: dict[str, float] = {}

    def pytest_runtest_logreport(self, report) -> None:
        # the controller sees the workers' reports with their node ids' "@group" suffix
        nodeid, _, group = report.nodeid.rpartition("@")
        group = group if nodeid and "::" not in group else report.nodeid.split("::", 1)[0]
        worker = getattr(report, "worker_id", None) or getattr(
            getattr(getattr(report, "node", None), "gateway", None), "id", "main"
        )
        self.by_group[group] = self.by_group.get(group, 0.0) + report.duration
        self.by_worker[worker] = self.by_worker.get(worker, 0.0) + report.duration

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if len(self.by_worker) < 2:
            return
        tr = terminalreporter
        tr.write_sep("=", "test time by worker and group (tests/conftest.py GROUP_SECONDS)")
        tr.write_line(
            "workers: " + ", ".join(f"{w} {s:.0f} s" for w, s in sorted(self.by_worker.items()))
        )
        longest = sorted(self.by_group.items(), key=lambda kv: -kv[1])[:30]
        for group, seconds in longest:
            tr.write_line(f"{seconds:8.1f} s  {group}")


def _signals_as_a_terminal_gives_them() -> None:
    """A session started as a background job of a script (`cmd &`: SIGINT ignored) or under
    nohup (SIGHUP ignored) passes the ignored signal on to every process it starts, the xdist
    workers and the runs and servers of the tests, and Python then installs no KeyboardInterrupt
    handler. The tests that send SIGINT or SIGHUP check how mallocsweep handles them, which an
    ignored signal never reaches (seen: four signal tests failed in a clean-clone make test
    started with `setsid nohup make test &`, and passed in CI). mallocsweep itself keeps an
    ignored SIGHUP ignored (servers/interrupts.py), as a user who starts it under nohup asks."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if signal.getsignal(signal.SIGHUP) is signal.SIG_IGN:
        signal.signal(signal.SIGHUP, signal.SIG_DFL)


def pytest_configure(config) -> None:
    _signals_as_a_terminal_gives_them()
    if not hasattr(config, "workerinput"):  # not inside an xdist worker
        config.pluginmanager.register(_TestTime(), "mallocsweep-test-time")
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
    changing THP under the other (seen in CI: THP left at always, and at never).

    And the longest groups first (GROUP_SECONDS); a stable sort keeps each group's own order."""
    items.sort(key=lambda item: -GROUP_SECONDS.get(_group_of(item), 0))
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
