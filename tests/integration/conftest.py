"""Fixtures shared by the integration tests (helpers that are plain functions: runs_helpers.py)."""

from __future__ import annotations

import pytest

from tests.integration.runs_helpers import scratch_dir


@pytest.fixture(scope="module")
def dataset_cache():
    """A dataset cache (MALLOCSWEEP_CACHE) for the runs of one test module: datasets prepared by
    its first run are restored by the next ones."""
    with scratch_dir("ms-cache-") as d:
        yield d


@pytest.fixture
def out():
    """A directory for one test's run directories and files, removed afterwards."""
    with scratch_dir("ms-run-") as d:
        yield d
