"""Through the CLI, a bad suite file or option is one line on stderr and exit 2 — never a traceback
or exit 4 — and nothing is started or written. No server is needed: the matrix is stopped at its
first step (Matrix.run), which comes right after validation."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import suites.runner.matrix
from suites.cli.main import main
from tests.unit.suite_fuzz import STRINGS, suite_docs, toml_text

REPO = Path(__file__).resolve().parents[2]


class Validated(BaseException):
    """Raised where the run would start its first server: the suite passed validation."""


@pytest.fixture
def stop_at_matrix(monkeypatch):
    def run(self):
        raise Validated(self.suite)

    monkeypatch.setattr(suites.runner.matrix.Matrix, "run", run)


def _cli(capsys, out: Path, suite: Path | str, *opts: str):
    """(exit code or "validated", stderr)."""
    try:
        code = main(["run", str(suite), "--no-report", "--quiet", "--out", str(out), *opts])
    except Validated:
        code = "validated"
    return code, capsys.readouterr().err.strip()


def _assert_one_line_user_error(code, err, out: Path, *expected: str):
    assert code == 2, (code, err)
    assert err.startswith("mallocsweep: error: "), err
    assert err.splitlines() == [err], err
    assert "Traceback" not in err and "internal error" not in err
    for word in expected:
        assert word in err, (word, err)
    assert not out.exists() or not any(out.iterdir())


def test_a_valid_suite_reaches_the_matrix_and_stops_there(capsys, tmp_path, stop_at_matrix):
    code, err = _cli(capsys, tmp_path / "runs", REPO / "configs/suites/smoke.toml")
    assert code == "validated", err
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    "body, expected",
    [
        (
            '[sysbench]\nduration_s = "30"\n',
            ["s.toml:2", "sysbench.duration_s", "expected a number"],
        ),
        ("[sysbench]\nthreads = [true, 8]\n", ["s.toml:2", "sysbench.threads[0]", "whole number"]),
        ('[collect]\nperf = "yes"\n', ["s.toml:2", "collect.perf", "true or false"]),
        ("[server]\nbuffer_pool_mb = true\n", ["s.toml:2", "server.buffer_pool_mb"]),
        ("[sysbench]\nduration_s = 1.5\n", ["s.toml:2", "sysbench.duration_s", "whole seconds"]),
        (
            "[sysbench]\nreport_interval_s = 0.5\n",
            ["s.toml:2", "report_interval_s", "whole seconds"],
        ),
        ("[sysbench]\nduration_s = inf\n", ["s.toml:2", "sysbench.duration_s", "finite"]),
        ("[warmup]\ncap_s = inf\n", ["s.toml:2", "warmup.cap_s", "finite"]),
        ('[server]\nsettings = { "bad key" = 1 }\n', ["s.toml:2", "server.settings", "'bad key'"]),
        ("[server]\nsettings = { socket = '/tmp/x' }\n", ["s.toml:2", "server.settings", "socket"]),
        (
            '[server]\nsettings = { max_connections = "100" }\n[sysbench]\nthreads = [8, 512]\n',
            ["s.toml:4", "sysbench.threads", "connection limit"],
        ),
        ("[iibench]\ndata_length = 100000\n", ["s.toml:2", "iibench.data_length", "at most"]),
        (
            "[iibench]\nsecondary_indexes = 0\nquery_clients = 1\n",
            ["s.toml:3", "iibench.query_clients", "secondary_indexes >= 1"],
        ),
        ("[iibench]\nmax_rows = 0\nmax_seconds = 10\n", ["s.toml:2", "iibench.max_rows"]),
        ("[iibench]\nsecondary_indexes = 5\n", ["s.toml:2", "iibench.secondary_indexes", "0..3"]),
        ("[server]\nflavor = 'mongodb'\n", ["s.toml:2", "server.flavor", 'kind = "iibench"']),
        ("[server]\nbinary = 'bin/mysqld'\n", ["s.toml:2", "server.binary", "no such file"]),
        ("[server]\nbasedir = 'mysql'\n", ["s.toml:2", "server.basedir", "no such directory"]),
        (
            "[[allocators.custom]]\nname = 'x'\nlibrary = 'libx.so'\n",
            ["s.toml:3", "allocators.custom[0].library", "no such file"],
        ),
        (
            "[collect]\nsample_interval_s = 1e-9\n",
            ["s.toml:2", "collect.sample_interval_s", ">= 0.1"],
        ),
        ("[sysbench]\nthrads = [8]\n", ["s.toml:2", "unknown setting", "did you mean 'threads'"]),
        ("[allocators]\nuse = ['jemallok']\n", ["s.toml:2", "allocators.use", "'jemallok'"]),
    ],
)
def test_bad_suite_files_are_one_line_exit_2(capsys, tmp_path, stop_at_matrix, body, expected):
    suite = tmp_path / "s.toml"
    suite.write_text(body)
    code, err = _cli(capsys, tmp_path / "runs", suite)
    _assert_one_line_user_error(code, err, tmp_path / "runs", str(suite), *expected)


@pytest.mark.parametrize(
    "opts, expected",
    [
        (["--duration", "2.5"], ["--duration 2.5", "sysbench.duration_s", "whole seconds"]),
        (["--duration", "inf"], ["--duration inf", "finite"]),
        (["--duration", "nan"], ["--duration nan", "finite"]),
        (["--warmup", "inf"], ["--warmup inf", "finite"]),
        (["--threads", "8,100001"], ["--threads 8,100001", "out of range"]),
        (["--repeat", "5000"], ["--repeat 5000", "run.repeat"]),
        (["--server", "no/such/mysqld"], ["--server no/such/mysqld", "no such file"]),
        (["--baseline", "glibcc"], ["--baseline glibcc", "run.baseline", "glibc"]),
        (["--min-effect", "0"], ["--min-effect 0", "run.min_effect_pct"]),
        (["--budget", "20x"], ["--budget", "20m"]),
        (["--budget", "0m"], ["--budget 0m", "positive"]),
    ],
)
def test_bad_options_name_the_option(capsys, tmp_path, stop_at_matrix, opts, expected):
    code, err = _cli(capsys, tmp_path / "runs", REPO / "configs/suites/smoke.toml", *opts)
    _assert_one_line_user_error(code, err, tmp_path / "runs", *expected)


def test_budget_and_baseline_options_reach_the_suite(capsys, tmp_path, stop_at_matrix):
    with pytest.raises(Validated) as got:
        main(
            ["run", str(REPO / "configs/suites/smoke.toml"), "--budget", "20m", "--baseline",
             "jemalloc", "--min-effect", "10", "--quiet", "--out", str(tmp_path)]
        )  # fmt: skip
    run = got.value.args[0].run
    assert (run.budget_s, run.baseline, run.min_effect_pct) == (1200, "jemalloc", 10)


def test_relative_server_option_is_taken_from_the_cwd(
    capsys, tmp_path, monkeypatch, stop_at_matrix
):
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "mysqld").write_text("")
    monkeypatch.chdir(tmp_path)
    smoke = REPO / "configs/suites/smoke.toml"
    with pytest.raises(Validated) as e:
        main(
            [
                "run",
                str(smoke),
                "--quiet",
                "--out",
                str(tmp_path / "runs"),
                "--server",
                "bin/mysqld",
            ]
        )
    assert e.value.args[0].server.binary == str(tmp_path / "bin" / "mysqld")


# -- fuzzing the whole CLI path: file and options -----------------------------------------------

NUMBER_TEXT = st.sampled_from(["0", "1", "2", "2.5", "-1", "inf", "nan", "1e9", "30", "0.1"])
OPTIONS = st.lists(
    st.one_of(
        st.tuples(st.just("--duration"), NUMBER_TEXT),
        st.tuples(st.just("--warmup"), NUMBER_TEXT),
        st.tuples(st.just("--threads"), st.sampled_from(["8", "0", "8,8", "4,16", "1536", "-3"])),
        st.tuples(st.just("--repeat"), st.sampled_from(["0", "1", "2", "-1", "100000"])),
        st.tuples(st.just("--thp"), st.sampled_from(["never", "system,never", "sometimes"])),
        st.tuples(st.just("--allocators"), st.sampled_from(["glibc", "all", "glibc,glibc"])),
        st.tuples(st.just("--server"), st.one_of(STRINGS.filter(lambda s: s and s[0] != "-"))),
    ),
    max_size=3,
    unique_by=lambda t: t[0],
)


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(doc=suite_docs(), opts=OPTIONS)
def test_fuzzed_suite_files_and_options_never_traceback(capsys, stop_at_matrix, doc, opts):
    with tempfile.TemporaryDirectory(prefix="ms-fuzz-") as d:
        suite = Path(d) / "fuzz.toml"
        suite.write_text(toml_text(doc))
        argv = [x for pair in opts for x in pair]
        code, err = _cli(capsys, Path(d) / "runs", suite, *argv)
        if code == "validated":
            return
        _assert_one_line_user_error(code, err, Path(d) / "runs")
        if not opts:
            assert str(suite) in err, err  # a file error names the file
