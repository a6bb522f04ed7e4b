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
