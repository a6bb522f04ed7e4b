"""A run's subdirectory that is a symlink to a directory of the user's: the tool neither writes
into it (a --rederive once wrote its derived records there, overwriting a user's file of the same
name) nor reads its files as the run's."""

from __future__ import annotations

import shutil

from suites.cli.main import main
from tests.unit.test_bad_input_corpus import F3_CELLS, FIXTURES, RUNS


def _run_with_derived_linked(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(FIXTURES / RUNS["F3"], run, symlinks=True)
    mine = tmp_path / "mine"
    mine.mkdir()
    precious = mine / f"{F3_CELLS[0]}.json"
    precious.write_text("the user's own file\n")
    shutil.rmtree(run / "derived", ignore_errors=True)
    (run / "derived").symlink_to(mine)
    return run, mine, precious


def test_rederive_refuses_a_derived_dir_that_is_a_symlink(tmp_path, capsys):
    run, mine, precious = _run_with_derived_linked(tmp_path)
    code = main(["report", str(run), "--rederive"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "derived is a symlink" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert precious.read_text() == "the user's own file\n"
    assert [p.name for p in mine.iterdir()] == [precious.name]


def test_report_does_not_read_a_linked_derived_dir_as_the_runs(tmp_path, capsys):
    run, _mine, precious = _run_with_derived_linked(tmp_path)
    code = main(["report", str(run)])
    err = capsys.readouterr().err
    # the recorded rows are used, and the reader is told which derived record was not
    assert code == 0, err
    assert f"derived/{F3_CELLS[0]}.json is unreadable" in err
    assert "rows as recorded in cells/" in err
    assert precious.read_text() == "the user's own file\n"


def test_a_cells_logs_dir_that_is_a_symlink_is_refused(tmp_path):
    """logs/<cell>/ is the directory itself the tool writes into (server error logs, sysbench
    output): it is checked as a directory, not only the directories above it."""
    import pytest

    from rundir.errors import RunDirError
    from rundir.write import RunDir

    run = tmp_path / "run"
    shutil.copytree(FIXTURES / RUNS["F3"], run, symlinks=True)
    mine = tmp_path / "mine"
    mine.mkdir()
    (run / "logs").mkdir(exist_ok=True)
    (run / "logs" / F3_CELLS[0]).symlink_to(mine)
    with pytest.raises(RunDirError, match=f"logs/{F3_CELLS[0]} is a symlink"):
        RunDir(run).logs_dir(F3_CELLS[0])
    assert RunDir(run).logs_dir(F3_CELLS[1]).is_dir()
    assert list(mine.iterdir()) == []
