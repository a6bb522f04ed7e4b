"""Shared test fixtures. Integration tests start real servers on private ports and sockets."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


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
