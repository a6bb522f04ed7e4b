"""Progress and notes written into a log (no terminal) keep a line whole: at rich's default 80
columns a run directory's path broke over three lines of a bench log."""

from suites.runner.display import PIPE_WIDTH, Display, stderr_console


def test_a_note_into_a_log_is_one_line(capsys):
    path = "/work/runs/control/bench-control-20261128T235429/" + "q" * 100
    Display().note(f"run directory {path}")
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert path in err


def test_the_stderr_console_without_a_terminal_is_pipe_wide(capsys):
    assert stderr_console().width == PIPE_WIDTH
