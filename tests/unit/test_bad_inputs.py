"""Bad inputs that need more than one line of the corpus (tests/unit/test_bad_input_corpus.py):
stdout going away mid-output, a resume of a complete run changing nothing, the user's OS errors,
and refusals that reach the preflight (a real server binary)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from suites.cli.main import main
from tests.fixtures.make_runs import make_run

REPO = Path(__file__).resolve().parents[2]
SMOKE = str(REPO / "configs/suites/smoke.toml")


# The one-line refusals of bad suite files and options (empty list items, a suite without its
# workload, --warmup naming the option, argparse's own errors) are cases of the bad-input corpus,
# tests/unit/test_bad_input_corpus.py, one line each.


# -- stdout that goes away ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def slow_pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("pipes")
    base = make_run(root, "synthetic-pipe-a", seed=21, repeats=3)
    new = make_run(root, "synthetic-pipe-b", seed=23, repeats=3, speed=0.85)
    ref, _ = _compare_through(">/dev/null", base, new, root / "ref")
    assert ref == 1  # a 15% slowdown over 3 repeats: the regression code CI reads
    return base, new, ref


def _compare_through(stdout_spec: str, base: Path, new: Path, out: Path) -> tuple[int, str]:
    """compare, with its stdout given to the shell redirection `stdout_spec`; (exit code, stderr)."""
    cmd = (
        f"{sys.executable} -m suites.cli.main compare '{base}' '{new}' --out '{out}' {stdout_spec}; "
        "echo $? >&2"
    )
    done = subprocess.run(
        ["bash", "-c", f"set -o pipefail; {cmd}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, MALLOCSWEEP_DEBUG=""),
    )
    *err, code = done.stderr.strip().splitlines()
    return int(code.strip()), "\n".join(err)


@pytest.mark.parametrize("stdout_spec", ["| head -c 1 >/dev/null", ">&-", ">/dev/full"])
def test_a_closed_stdout_keeps_the_exit_code_a_full_one_is_exit_2(slow_pair, tmp_path, stdout_spec):
    """The reader leaving (`| head`) or a stdout closed from the start keeps the verdict's exit
    code; a stdout that fails (/dev/full: no space) lost the verdict nobody chose to drop: exit 2,
    one line saying so. The comparison's files are written whole either way."""
    base, new, ref = slow_pair
    # `head` exits after one byte: the pipe closes while compare still prints; pipefail makes the
    # pipeline's status compare's own
    spec = stdout_spec.replace("| head", "| (head") + (")" if "head" in stdout_spec else "")
    code, err = _compare_through(spec, base, new, tmp_path / "out")
    assert "Traceback" not in err and "internal error" not in err
    if stdout_spec == ">/dev/full":
        assert code == 2 and err.splitlines() == [err] and "stdout: cannot write" in err, err
    else:
        assert code == ref, err
    assert sorted(p.suffix for p in (tmp_path / "out").iterdir()) == [".html", ".md"]


def test_resume_of_a_complete_run_changes_nothing(tmp_path, capsys):
    run_dir = make_run(tmp_path, "synthetic-complete", seed=4, allocators=("glibc", "jemalloc"))
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in run_dir.rglob("*") if p.is_file()}
    assert main(["run", SMOKE, "--resume", str(run_dir), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "the run is complete (2 cells ok" in out and "nothing changed" in out
    after = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in run_dir.rglob("*") if p.is_file()}
    assert after == before


@pytest.mark.parametrize("err, code", [(28, 2), (30, 2), (36, 2), (5, 4)])
def test_os_errors_of_the_users_machine_are_exit_2_naming_the_file(monkeypatch, capsys, err, code):
    import suites.cli.commands.report as report_command

    def fails(args):
        raise OSError(err, os.strerror(err), "/runs/r1/report.html")

    monkeypatch.setattr(report_command, "run", fails)
    monkeypatch.delenv("MALLOCSWEEP_DEBUG", raising=False)
    assert main(["report", "/runs/r1"]) == code
    line = capsys.readouterr().err.strip()
    assert line.splitlines() == [line] and "/runs/r1/report.html" in line or code == 4


needs_server = pytest.mark.skipif(
    not Path("/usr/sbin/mariadbd").exists(),
    reason="these reach the preflight, which needs Debian's MariaDB (mariadb-server)",
)


@needs_server
def test_an_out_component_over_255_bytes_is_exit_2_naming_it(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("MALLOCSWEEP_CACHE", str(tmp_path / "cache"))
    out = tmp_path / ("a" * 300)
    assert main(["run", SMOKE, "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.splitlines() == [err] and "a" * 300 in err and "too long" in err


@needs_server
def test_an_unusable_cache_is_exit_2_before_anything_is_written(capsys, tmp_path, monkeypatch):
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("MALLOCSWEEP_CACHE", str(tmp_path / "a-file" / "cache"))
    assert main(["run", SMOKE, "--out", str(tmp_path / "runs"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.splitlines() == [err] and f"dataset cache {tmp_path / 'a-file'}" in err
    assert not (tmp_path / "runs").exists()
