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
