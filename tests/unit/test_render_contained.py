"""A report that cannot be rendered after a finished run leaves the run's exit code and data as
they were and says, in one line, how to render it again (issue 17 item 3)."""

from __future__ import annotations

import argparse

import pytest

import analysis.report
from suites.cli.commands import run as run_command
from tests.fixtures.make_runs import make_run


@pytest.mark.parametrize("code", [0, 3])
def test_render_failure_keeps_exit_code_and_data(tmp_path, monkeypatch, capsys, code):
    run_dir = make_run(tmp_path, "synthetic-render", seed=3, allocators=("glibc", "jemalloc"))
    before = {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}

    def broken(*a, **k):
        raise KeyError("a bug in a template")

    monkeypatch.setattr(analysis.report, "write_report", broken)
    got = run_command._finish(argparse.Namespace(no_report=False), code, run_dir)
    assert got == code
    err = capsys.readouterr().err
    line = next(x for x in err.splitlines() if "could not be rendered" in x)
    assert f"`mallocsweep report {run_dir}`" in line and "intact" in line
    assert {p: p.read_bytes() for p in before} == before  # nothing of the run was touched
