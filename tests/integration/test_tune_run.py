"""A short real tune on the smoke suite cut to one level (jemalloc, 1 trial of 2 paired rounds of
OLTP_RO at 4 threads), killed with SIGKILL during its first trial and resumed: the study continues
with its own trials, no server outlives the killed tune, and the tune ends with pareto.csv, the
plot, the recommendation and the drop-in, every trial's setting read back from the live servers."""

from __future__ import annotations

import csv
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from servers.allocators import resolve
from suites.cli.main import main
from suites.tune import dropin
from suites.tune.space import space_of
from suites.tune.study import JOURNAL, STUDY_NAME
from tests.integration.runs_helpers import processes_mentioning, scratch_dir

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
SMOKE = REPO / "configs" / "suites" / "smoke.toml"


# The growth objective's run: the dump scenario, as configs/suites/tune.toml names it, cut to the
# fewest cycles a life's slope is fitted on (analysis/growth_rate.py MIN_CYCLES)
GROWTH = """
[fragmentation]
scenarios = ["dump"]
cycles = 3
cycle_s = 1

[dump]
background_threads = 1
"""


def _smoke_one_level() -> str:
    """The smoke suite with one level, OLTP_RO at 4 threads (the workload the allocator is
    exposed to: configs/suites/tune.toml says why), and a growth run of the dump scenario: what
    is checked here is the tune's machinery, and each level more is seconds more in every life
    (four levels took this module 206 s)."""
    text = SMOKE.read_text()
    for old, new in (('["oltp_ro", "point_select"]', '["oltp_ro"]'), ("[4, 16]", "[4]")):
        assert old in text, f"{SMOKE} changed: {old} is not in it"
        text = text.replace(old, new)
    return text + GROWTH


def _argv(out: Path, *extra: str) -> list[str]:
    suite = out.parent / "suite.toml"
    return ["tune", str(suite), "--allocator", "jemalloc", "--budget", "3h", "--trials", "1",
            "--rounds", "2", "--seed", "3", "--out", str(out), "--quiet", *extra]  # fmt: skip


def _wait(what, timeout_s: float, step_s: float = 1.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = what()
        if got:
            return got
        time.sleep(step_s)
    return what()


@pytest.fixture(scope="module")
def tune():
    with scratch_dir("ms-tune-") as d:
        out = d / "tune"
        (d / "suite.toml").write_text(_smoke_one_level())
        log = (d / "first.log").open("w")
        first = subprocess.Popen(
            [sys.executable, "-m", "suites.cli.main", *_argv(out)],
            cwd=REPO,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            # killed once its first trial has measured a life: a trial in the middle of its run
            cell = _wait(lambda: list(out.glob("trials/0000/*/cells/*.json")), 1200)
            assert cell, (d / "first.log").read_text()[-2000:]
        finally:
            first.send_signal(signal.SIGKILL)
            first.wait()
            log.close()
        # the parent-death signal ends the killed tune's server and clients
        _wait(lambda: not processes_mentioning(str(out)), 60)
        left = processes_mentioning(str(out))
        code = main(_argv(out, "--resume"))
        yield out, code, left


def _study(out: Path):
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    storage = JournalStorage(JournalFileBackend(str(out / JOURNAL)))
    return optuna.load_study(study_name=STUDY_NAME, storage=storage)


def test_no_process_outlives_the_killed_tune(tune):
    _out, _code, left = tune
    assert left == []


def test_the_resumed_study_continues_with_its_trials(tune):
    from optuna.trial import TrialState

    out, code, _ = tune
    assert code == 0
    trials = _study(out).trials
    killed = trials[0]
    assert killed.state == TrialState.FAIL  # was running when killed
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    assert len(complete) == 1  # --trials 1: the killed trial, tried again
    # the killed trial's setting is tried again, first
    assert complete[0].params == killed.params
    assert complete[0].user_attrs["requeued_from"] == killed.number
    for t in complete:
        # RSS at stop as a ratio; growth per hour as a difference in MB/h (either sign)
        assert len(t.values) == 2 and t.values[0] > 0 and math.isfinite(t.values[1])
        figures = t.user_attrs["figures"]
        assert figures["growth"]["unit"] == "MB/h"
        assert figures["growth"]["lo"] <= figures["growth"]["ratio"] <= figures["growth"]["hi"]
        assert (
            Path(t.user_attrs["growth_run_dir"]).parent
            == out / "trials" / f"{t.number:04d}" / "growth"
        )


def test_every_trial_has_its_setting_read_back_from_the_live_server(tune):
    from optuna.trial import TrialState

    out, _code, _ = tune
    space = space_of("jemalloc")
    for t in _study(out).trials:
        if t.state != TrialState.COMPLETE:
            continue
        setting = t.user_attrs["setting"]
        # what the trial set: every knob, or a preset's named ones (the first trials here)
        assert set(setting) == (
            set(space.presets[t.user_attrs["preset"]]) if "preset" in t.user_attrs
            else set(space.knobs)
        )  # fmt: skip
        conf = space.env_of({k: v for k, v in t.params.items() if k in setting})[0]["MALLOC_CONF"]
        for record in ("read_back", "growth_read_back"):  # the throughput run's, the growth run's
            shown = t.user_attrs[record]["cells"]
            assert len(shown) == 2, record  # both rounds' lives of the setting
            for c in shown:
                assert c["environ"]["MALLOC_CONF"] == conf
                assert c["allocator"] == setting  # jemalloc's own opt.* readings


def test_the_tune_ends_with_pareto_plot_recommendation_and_dropin(tune):
    out, _code, _ = tune
    with (out / "pareto.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 1
    for r in rows:
        for p, value in (("memory", "ratio"), ("growth", "mb_per_hour"), ("throughput", "ratio")):
            lo, v, hi = (float(r[f"{p}_{k}"]) for k in ("lo", value, "hi"))
            assert lo <= v <= hi
        assert set(space_of("jemalloc").knobs) <= set(r)
    assert (out / "pareto.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = (out / "recommendation.txt").read_text()
    variables = dropin.environment(out / dropin.DROPIN)
    (je,) = resolve(["jemalloc"])
    assert variables["LD_PRELOAD"] == je.library
    if "Recommended:" in text:
        assert (out / "confirm.json").is_file()
        assert "MALLOC_CONF" in variables
    else:
        # nothing beat the defaults: said, and the drop-in pretends nothing
        assert "No setting beats the defaults" in text
        assert set(variables) == {"LD_PRELOAD"}
    env_lines = [
        ln for ln in (out / dropin.ENV_FILE).read_text().splitlines() if not ln.startswith("#")
    ]
    assert env_lines == [f"{k}={v}" for k, v in variables.items()]
    assert os.path.isfile(out / "tune.json")
