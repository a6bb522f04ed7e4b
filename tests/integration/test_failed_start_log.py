"""A server that will not start (a bad setting): the one-line error names an error log that still
exists when the user reads it (work/ is removed as the cell ends; logs/ stays)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.integration.runs_helpers import REPO, processes_mentioning, scratch_dir, start_run

pytestmark = pytest.mark.integration


def test_the_named_error_log_exists(tmp_path):
    suite = tmp_path / "bad.toml"
    text = (REPO / "configs/suites/smoke.toml").read_text()
    suite.write_text(text.replace("[server]\n", "[server]\nsettings = { no_such_option_x = 1 }\n"))
    with scratch_dir("ms-cache-") as cache:
        p = start_run([str(suite), "--allocators", "glibc", "--out", str(tmp_path / "runs")], cache)
        _, err = p.communicate(timeout=300)
        assert p.returncode == 2, err
        line = err.strip().splitlines()[-1]
        assert "Traceback" not in err and "no_such_option_x" in line, line
        named = re.findall(r"(/\S+\.log)", line)
        assert named, line
        for log in named:
            assert Path(log.rstrip(":")).is_file(), f"the message names {log}, which is gone"
            assert "/logs/" in log
        assert processes_mentioning(str(tmp_path)) == []
