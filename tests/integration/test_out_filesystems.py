"""--out on a filesystem of its own: a tiny tmpfs that fills up mid-run must be reported as "no
space left on device" naming the place (not a downstream symptom), and a run whose every cell
failed is recorded as failed, never as finished. The tmpfs is mounted and unmounted here."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.integration.runs_helpers import (
    REPO,
    kill_quietly,
    manifest,
    processes_mentioning,
    run_dir_of,
    scratch_dir,
    start_run,
)

pytestmark = pytest.mark.integration

SMOKE = str(REPO / "configs/suites/smoke.toml")


@pytest.fixture
def tiny_out():
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    with scratch_dir("ms-tiny-") as d:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=400m", "tmpfs", str(d)], check=True)
        try:
            yield d
        finally:
            subprocess.run(["umount", "-l", str(d)], check=False)
            assert str(d) not in Path("/proc/self/mounts").read_text(), "the tmpfs was left mounted"


def test_a_full_out_filesystem_is_named_and_the_run_is_not_finished(tiny_out):
    with scratch_dir("ms-cache-") as cache:  # on the big disk
        p = start_run(
            [SMOKE, "--allocators", "glibc", "--threads", "4", "--out", str(tiny_out / "runs")],
            cache,
        )
        try:
            # Preflight refuses a --out too small from the start; this one fills up mid-run:
            # once the run directory exists, all but 3 MB of the tmpfs is taken.
            run_dir = run_dir_of(tiny_out / "runs")
            st = os.statvfs(tiny_out)
            filler = st.f_bavail * st.f_frsize - (3 << 20)
            subprocess.run(["fallocate", "-l", str(filler), str(tiny_out / "filler")], check=True)
            out, err = p.communicate(timeout=600)
        finally:
            kill_quietly(p)
        m = manifest(run_dir)
        assert p.returncode in (2, 3), err
        assert "Traceback" not in err and "internal error" not in err, err
        cells = m["cells"]
        assert cells and all(c["status"] != "ok" for c in cells)
        assert m["status"] == "failed", m["status"]
        for c in cells:
            error = c.get("error") or ""
            assert error.startswith("no space left on device") and str(tiny_out) in error, error
        assert processes_mentioning(str(tiny_out)) == []
