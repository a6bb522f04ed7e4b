"""Headless rendering of report.html: the page loads offline and paints (Debian chromium)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from fixtures.make_runs import make_run

from analysis.report import write_report

RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "runs"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.integration
@pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (Debian package 'chromium')"
)
@pytest.mark.parametrize(
    "fixture", ["synthetic", "real-thp-small", "real-regress-base-a", "real-smoke-windows"]
)
def test_report_renders_offline(tmp_path, fixture):
    if fixture == "synthetic":
        run = make_run(tmp_path, "synthetic-render", repeats=2)
    else:  # recorded real runs: the THP section, the per-cell THP table, intervals in cells,
        # measured windows and server start/stop memory (real-smoke-windows)
        run = shutil.copytree(RUNS / fixture, tmp_path / fixture)
    html, _ = write_report(run)
    shot = tmp_path / "report.png"
    subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-network-access",
            "--window-size=1200,4000",
            f"--screenshot={shot}",
            html.as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 50_000  # a blank page compresses to a few kB; plots and tables do not
