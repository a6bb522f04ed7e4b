"""Issue 35's checks where a one-line corpus case cannot show them: outputs replaced all or
nothing (a failure after the first file), our files in UTF-8 under an ASCII locale (a real
process: the locale is fixed at interpreter start), `--rederive` naming the cells it could not
derive again, a resume naming the setting that differs, and the server's error-log warnings in
summary.md."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rundir.atomic import atomic_replace_all
from suites.errors import SuiteError
from suites.runner.resume import check_resumable

REPO = Path(__file__).resolve().parents[2]
F3 = REPO / "tests/fixtures/runs/real-smoke-format3"
ASCII = {"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "PYTHONIOENCODING": ""}


def cli(*argv: str, env: dict | None = None, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "suites.cli.main", *argv],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
        capture_output=True,
        timeout=600,
    )


# -- all or nothing --------------------------------------------------------------------------------
def test_a_failing_later_move_puts_the_earlier_files_back(tmp_path, monkeypatch):
    a, b = tmp_path / "a.html", tmp_path / "b.md"
    a.write_text("old a")
    b.write_text("old b")
    real = os.replace
    calls = []

    def replace(src, dst):
        calls.append(Path(dst))
        if Path(dst) == b and str(src).endswith(".tmp"):
            raise OSError(28, "No space left on device", str(dst))
        return real(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(OSError, match="No space left"):
        atomic_replace_all([(a, "new a"), (b, "new b")])
    assert (a.read_text(), b.read_text()) == ("old a", "old b")
    assert a in calls  # a was replaced, then put back
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.html", "b.md"]  # no temp, no backup


def test_a_directory_in_the_way_is_refused_before_anything_is_replaced(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_text("old")
    b.mkdir()
    with pytest.raises(IsADirectoryError):
        atomic_replace_all([(a, "new"), (b, "new")])
    assert a.read_text() == "old" and b.is_dir()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b"]


def test_new_files_are_written_and_text_is_utf8(tmp_path):
    a = tmp_path / "a.md"
    atomic_replace_all([(a, "é × —")])
    assert a.read_bytes() == "é × —".encode()


# -- UTF-8 whatever the locale ------------------------------------------------------------------
def test_report_under_an_ascii_locale_writes_utf8(tmp_path):
    run = tmp_path / "F3"
    shutil.copytree(F3, run)
    done = cli("report", str(run), env=ASCII)
    assert done.returncode == 0, done.stderr.decode()
    assert b"Traceback" not in done.stderr and b"internal error" not in done.stderr
    text = (run / "summary.md").read_bytes().decode("utf-8")
    assert any(ord(ch) > 127 for ch in text)  # it holds what ASCII cannot (e.g. "—")
    assert "mallocsweep report" in (run / "report.html").read_bytes().decode("utf-8")


def test_a_suite_with_accents_reads_under_an_ascii_locale(tmp_path):
    suite = tmp_path / "café.toml"
    suite.write_text(
        "# café\n"
        + (REPO / "configs/suites/smoke.toml")
        .read_text()
        .replace("smoke test: tiny dataset", "smoke test: café × tiny dataset"),
        encoding="utf-8",
    )
    done = cli("run", str(suite), "--threads", "0", env=ASCII)
    err = done.stderr.decode("utf-8", "replace")
    assert done.returncode == 2, err
    assert "--threads 0: sysbench.threads" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


# -- --rederive names the cells it could not derive again ---------------------------------------
def test_rederive_names_a_cell_whose_raw_record_is_truncated(tmp_path):
    run = tmp_path / "F3"
    shutil.copytree(F3, run)
    raw = sorted((run / "raw").glob("*.json"))[0]
    raw.write_text(raw.read_text()[: raw.stat().st_size // 2])
    done = cli("report", str(run), "--rederive")
    err = done.stderr.decode()
    assert done.returncode == 0, err
    warning = [x for x in err.splitlines() if "--rederive could not derive" in x]
    assert warning and raw.stem in warning[0] and "recorded ones" in warning[0], err


# -- resume names the setting that differs --------------------------------------------------------
def test_resume_names_the_setting_that_differs():
    m = json.loads((F3 / "manifest.json").read_text())
    m["format_version"] = 6
    suite = json.loads(json.dumps(m["suite"]))
    suite["sysbench"]["threads"] = [8]
    suite["server"]["buffer_pool_mb"] = 128
    with pytest.raises(SuiteError) as e:
        check_resumable(m, suite, "mariadb-10.11.19", m["host"])
    msg = str(e.value)
    assert "server.buffer_pool_mb is 128, the run has 64; sysbench.threads is [8]" in msg, msg


# -- the server's warnings about its settings -----------------------------------------------------
def test_error_log_warnings_about_settings_reach_summary_and_report(tmp_path):
    run = tmp_path / "F3"
    shutil.copytree(F3, run)
    m = json.loads((run / "manifest.json").read_text())
    cid = m["cells"][0]["id"]
    logs = run / "logs" / cid
    logs.mkdir(parents=True)
    (logs / "error.log").write_text(
        "2026-11-28 14:35:21 0 [Note] Starting MariaDB\n"
        "2026-11-28 14:35:21 0 [Warning] option 'performance_schema': boolean value 'maybe' "
        "wasn't recognized. Set to OFF.\n"
        "2026-11-28 14:35:24 0 [Warning] 'user' entry 'root@vm' ignored in --skip-name-resolve "
        "mode.\n"
        "2026-11-28 14:35:28 9 [Warning] Aborted connection 9 to db: 'sbtest'\n"
    )
    done = cli("report", str(run))
    assert done.returncode == 0, done.stderr.decode()
    summary = (run / "summary.md").read_text(encoding="utf-8")
    html = (run / "report.html").read_text(encoding="utf-8")
    want = "boolean value 'maybe' wasn't recognized. Set to OFF."
    assert f"The server warned about its settings (cell {cid})" in summary
    assert want in summary
    assert "wasn&#39;t recognized. Set to OFF." in html or want in html
    assert "skip-name-resolve" not in summary and "Aborted connection" not in summary
