"""`mallocsweep tune` without servers: the declared spaces, the space file's refusals (one line,
exit 2, before anything is written), the drop-in and env file, the front, the output directory."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from servers.allocators import Allocator
from suites.cli.main import main
from suites.errors import SuiteError
from suites.tune import dropin, front, tunedir
from suites.tune.objectives import Figure, TrialFigures
from suites.tune.space import declared_spaces, narrow, space_of

REPO = Path(__file__).resolve().parents[2]
SMOKE = REPO / "configs" / "suites" / "smoke.toml"


def test_each_core_allocator_declares_its_space():
    spaces = declared_spaces()
    assert set(spaces) >= {"glibc", "jemalloc", "tcmalloc", "tcmalloc-minimal", "mimalloc"}
    je = spaces["jemalloc"]
    assert je.writes == "MALLOC_CONF"
    assert set(je.knobs) == {
        "narenas", "dirty_decay_ms", "muzzy_decay_ms", "background_thread", "tcache_max",
        "percpu_arena", "thp", "metadata_thp",
    }  # fmt: skip
    assert set(spaces["glibc"].knobs) == {
        "arena_max", "trim_threshold", "mmap_threshold", "tcache_count",
    }  # fmt: skip
    assert {k.env for k in spaces["tcmalloc"].knobs.values()} == {
        "TCMALLOC_RELEASE_RATE",
        "TCMALLOC_MAX_TOTAL_THREAD_CACHE_BYTES",
        "TCMALLOC_AGGRESSIVE_DECOMMIT",
    }


def test_a_setting_becomes_the_allocators_environment():
    je = space_of("jemalloc")
    env, tun = je.env_of({"narenas": 4, "background_thread": "true", "dirty_decay_ms": 5000})
    assert env == {"MALLOC_CONF": "narenas:4,background_thread:true,dirty_decay_ms:5000"}
    assert tun == ()
    env, tun = space_of("glibc").env_of({"arena_max": 2, "tcache_count": 0})
    assert env == {} and tun == ("glibc.malloc.arena_max=2", "glibc.malloc.tcache_count=0")
    env, _ = space_of("tcmalloc").env_of({"release_rate": 2.5})
    assert env == {"TCMALLOC_RELEASE_RATE": "2.5"}


def _space_file(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "space.toml"
    p.write_text(text)
    return p


def test_a_space_file_narrows(tmp_path):
    f = _space_file(
        tmp_path,
        '[space.jemalloc]\ndirty_decay_ms = [0, 30000]\nthp = ["never"]\nnarenas = 8\n',
    )
    s = narrow(space_of("jemalloc"), f)
    assert (s.knobs["dirty_decay_ms"].low, s.knobs["dirty_decay_ms"].high) == (0, 30000)
    assert s.knobs["thp"].choices == ("never",)
    assert s.knobs["narenas"].kind == "choice" and s.knobs["narenas"].choices == ("8",)
    assert s.knobs["muzzy_decay_ms"] == space_of("jemalloc").knobs["muzzy_decay_ms"]


@pytest.mark.parametrize(
    "text, message",
    [
        ("[space.jemalloc]\nbogus = 1\n", r"space\.jemalloc\.bogus = 1: unknown knob"),
        (
            "[space.jemalloc]\ndirty_decay_ms = [0, 90000]\n",
            r"space\.jemalloc\.dirty_decay_ms = 90000: outside the allowed range \[0, 60000\]",
        ),
        (
            "[space.jemalloc]\narena_max = [1, 4]\n",
            r"space\.jemalloc\.arena_max = \[1, 4\]: a knob of glibc, not of jemalloc",
        ),
        (
            "[space.glibc]\narena_max = [1, 4]\n",
            r"space\.glibc: this tune is of jemalloc .*glibc's knobs do not apply",
        ),
        ('[space.jemalloc]\nthp = ["sometimes"]\n', r"thp = 'sometimes': expected one of"),
        ("[space.jemalloc]\nnarenas = 2.5\n", r"narenas = 2\.5: expected an integer"),
        ("[space.jemalloc]\nnarenas = [0, 4]\n", r"narenas = 0: outside the allowed range"),
        ("[nope]\n", r"nope: unknown table"),
    ],
)
def test_a_bad_space_file_is_refused_in_one_line(tmp_path, text, message):
    with pytest.raises(SuiteError, match=message) as e:
        narrow(space_of("jemalloc"), _space_file(tmp_path, text))
    assert str(tmp_path / "space.toml") in str(e.value)
    assert "\n" not in str(e.value)


def _cli(capsys, *argv) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().err


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--allocator", "tbbmalloc"], "--allocator tbbmalloc: no search space is declared"),
        (["--allocator", "jemalloc", "--budget", "30s"], "--budget 30s: too small for one trial"),
        (["--allocator", "jemalloc", "--rounds", "1"], "--rounds 1: at least 2"),
        (["--allocator", "jemalloc", "--budget", "soon"], "--budget soon: expected a duration"),
    ],
)
def test_the_cli_refuses_bad_input_before_anything_is_written(tmp_path, capsys, extra, message):
    out = tmp_path / "t"
    argv = ["tune", str(SMOKE), "--budget", "2h", "--out", str(out), *extra]
    code, err = _cli(capsys, *argv)
    assert code == 2
    assert message in err and err.count("\n") == 1 and "Traceback" not in err
    assert not out.exists()


def test_the_cli_refuses_a_bad_space_file_with_exit_2(tmp_path, capsys):
    f = _space_file(tmp_path, "[space.jemalloc]\nmuzzy_decay_ms = [0, -5]\n")
    out = tmp_path / "t"
    code, err = _cli(capsys, "tune", str(SMOKE), "--allocator", "jemalloc", "--budget", "2h",
                     "--out", str(out), "--space", str(f))  # fmt: skip
    assert code == 2 and "muzzy_decay_ms = -5: outside the allowed range" in err
    assert not out.exists()


def test_the_output_directory_is_never_another(tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("the user's")
    with pytest.raises(SuiteError, match="exists and is not a tune directory"):
        tunedir.prepare(mine, {"allocator": "jemalloc"}, resume=False)
    assert (mine / "notes.txt").read_text() == "the user's"
    with pytest.raises(SuiteError, match="not a tune directory"):
        tunedir.prepare(mine, {"allocator": "jemalloc"}, resume=True)
    new = tmp_path / "new"
    settings = {"allocator": "jemalloc", "seed": 1, "rounds": 3}
    tunedir.prepare(new, settings, resume=False)
    assert json.loads((new / tunedir.MARKER).read_text())["kind"] == tunedir.KIND
    with pytest.raises(SuiteError, match="holds a tune already; continue it with --resume"):
        tunedir.prepare(new, settings, resume=False)
    with pytest.raises(SuiteError, match="seed differs from the tune it holds"):
        tunedir.prepare(new, {**settings, "seed": 2}, resume=True)
    assert tunedir.prepare(new, settings, resume=True)["seed"] == 1


JE = Allocator(
    name="jemalloc",
    kind="preload",
    family="jemalloc",
    library="/usr/lib/x86_64-linux-gnu/libjemalloc.so.2",
)
GLIBC = Allocator(name="glibc", kind="system", family="glibc", library=None)


def test_the_dropin_carries_exactly_the_arms_environment(tmp_path):
    env = {"MALLOC_CONF": "narenas:4,dirty_decay_ms:5000"}
    text = dropin.dropin_text(JE, env, (), ["tuned"])
    assert "[Service]\n" in text
    assert f"Environment=LD_PRELOAD={JE.library}\n" in text
    assert "Environment=MALLOC_CONF=narenas:4,dirty_decay_ms:5000\n" in text
    p = tmp_path / dropin.DROPIN
    p.write_text(text)
    back = dropin.environment(p)
    assert back == {"LD_PRELOAD": JE.library, **env}
    assert dropin.setting_of(JE, back) == (env, ())
    envfile = dropin.env_file_text(JE, env, (), ["tuned"])
    assert [ln for ln in envfile.splitlines() if not ln.startswith("#")] == [
        f"LD_PRELOAD={JE.library}",
        "MALLOC_CONF=narenas:4,dirty_decay_ms:5000",
    ]


def test_a_glibc_dropin_preloads_nothing_and_sets_tunables(tmp_path):
    tun = ("glibc.malloc.arena_max=2", "glibc.malloc.trim_threshold=131072")
    text = dropin.dropin_text(GLIBC, {}, tun, ["tuned"])
    assert "LD_PRELOAD" not in text
    assert (
        "Environment=GLIBC_TUNABLES=glibc.malloc.arena_max=2:glibc.malloc.trim_threshold=131072"
        in text
    )
    p = tmp_path / "d.conf"
    p.write_text(text)
    assert dropin.setting_of(GLIBC, dropin.environment(p)) == ({}, tun)
    with pytest.raises(SuiteError, match="the drop-in preloads"):
        dropin.setting_of(JE, dropin.environment(p))


def _trial(n, mem, growth, slower=(), less=True):
    f = TrialFigures(
        Figure(mem, mem - 0.05, mem + 0.05, "less memory" if less else "none"),
        Figure(growth, growth - 0.1, growth + 0.1, "none"),
        Figure(0.98, 0.9, 1.06, "slower" if slower else "none"),
        list(slower),
        less,
        3,
    )
    return front.Trial(n, {"narenas": str(n)}, f, f"/runs/{n}")


def test_the_front_is_the_feasible_non_dominated_trials():
    trials = [
        _trial(0, 0.90, 1.0),
        _trial(1, 0.95, 0.8),
        _trial(2, 0.96, 1.1),  # dominated by 0 and 1
        _trial(3, 0.80, 0.7, slower=["oltp_ro@16"]),  # best, but slower: not feasible
    ]
    assert [t.number for t in front.front(trials)] == [0, 1]
    rows = list(csv.DictReader(io.StringIO(front.pareto_csv(trials, ["narenas"]))))
    assert [r["trial"] for r in rows[:2]] == ["0", "1"]
    assert rows[0]["on_front"] == "True" and rows[0]["memory_lo"] == "0.8500"
    bad = next(r for r in rows if r["trial"] == "3")
    assert bad["feasible"] == "False" and bad["slower_points"] == "oltp_ro@16"


def _cell_file(run: Path, arm: str, opt: dict | None, conf: str, n: int = 1) -> None:
    readings = [{"phase": "startup", "detail": {"stats": True, **({"opt": opt} if opt else {})}}]
    cell = {
        "id": f"mariadb__{arm}__r{n}",
        "status": "ok",
        "allocator": {"name": arm, "kind": "preload"},
        "verification": {"verdict": "verified", "process_env": {"MALLOC_CONF": conf}},
        "alloc_memory": {"readings": readings},
    }
    (run / "cells").mkdir(parents=True, exist_ok=True)
    (run / "cells" / f"{cell['id']}.json").write_text(json.dumps({"cell": cell, "rows": []}))


def test_the_setting_is_read_back_from_the_allocator_or_the_trial_fails(tmp_path):
    from suites.tune.proof import read_back

    setting = {"narenas": "2", "background_thread": "true"}
    conf = "narenas:2,background_thread:true"
    _cell_file(tmp_path, "jemalloc-t0001", {"read": True, **setting}, conf)
    _cell_file(tmp_path, "jemalloc", {"read": True, "narenas": "8"}, "")  # the defaults' life
    shown = read_back(tmp_path, "jemalloc-t0001", "MALLOC_CONF", setting)
    assert shown["cells"] == [
        {"cell": "mariadb__jemalloc-t0001__r1", "environ": {"MALLOC_CONF": conf},
         "allocator": setting}
    ]  # fmt: skip
    # jemalloc ran with another value than the one set: the trial is not measured as if it had
    _cell_file(tmp_path, "jemalloc-t0001", {"read": True, "narenas": "8"}, conf, n=2)
    with pytest.raises(SuiteError, match=r"runs with opt\.narenas='8', not '2'"):
        read_back(tmp_path, "jemalloc-t0001", "MALLOC_CONF", setting)
    with pytest.raises(SuiteError, match="no measured life of jemalloc-t0009"):
        read_back(tmp_path, "jemalloc-t0009", "MALLOC_CONF", setting)


def test_a_trial_killed_with_the_tune_is_failed_and_its_setting_queued_again(tmp_path):
    from optuna.trial import TrialState

    from suites.tune.study import _distributions, _requeue_killed, _study

    dists = _distributions(space_of("jemalloc"))
    running = _study(tmp_path, seed=5).ask(dists)  # the tune is killed here: never told
    study = _study(tmp_path, seed=5)  # the resumed tune, from the journal file
    assert _requeue_killed(study) == 1
    again = study.ask(dists)
    assert study.trials[running.number].state == TrialState.FAIL
    assert again.params == running.params
    assert again.user_attrs["requeued_from"] == running.number
    assert _requeue_killed(study) == 1  # `again` is running now; a second kill is handled alike


def test_the_generation_is_half_the_trials_the_budget_holds_so_the_search_evolves(tmp_path):
    """NSGA-II draws its whole first generation at random: optuna's 50 would leave a two-hour
    tune of ~8-minute trials a random search. Half the expected trials, 4..50; the sampler the
    study is made with has it."""
    from suites.tune.study import _study, population

    assert population(7200, 503) == 7  # 14 trials expected
    assert population(600, 300) == 4 and population(10 * 86400, 60) == 50
    study = _study(tmp_path, seed=3, generation=population(7200, 503))
    assert study.sampler._population_size == 7


def test_a_setting_jemalloc_would_not_take_is_failed_without_a_life(tmp_path, monkeypatch):
    """percpu_arena=percpu raises narenas to the CPU count (2 trials of a tune here ran a round
    of lives only to fail the read-back): such a trial is failed at once and runs nothing; a
    tune whose sampler only draws such settings stops instead of drawing forever."""
    from types import SimpleNamespace

    from suites.tune import study as st

    space = space_of("jemalloc")
    assert "percpu" in space.will_not_take({"narenas": 1, "percpu_arena": "percpu"}, cpus=2)
    assert space.will_not_take({"narenas": 2, "percpu_arena": "percpu"}, cpus=2) is None
    assert space.will_not_take({"narenas": 1, "percpu_arena": "phycpu"}, cpus=2) is None
    assert space.will_not_take({"narenas": 1}, cpus=2) is None
    assert space_of("glibc").will_not_take({"arena_max": 1}) is None

    ran = []
    monkeypatch.setattr(st, "run_arm", lambda *a, **k: ran.append(a) or (0, None))
    monkeypatch.setattr(space.__class__, "will_not_take", lambda self, s, cpus=None: "no")
    plan = SimpleNamespace(space=space, loaded=SimpleNamespace(suite=None), rounds=3,
                           trial_s=60.0)  # fmt: skip
    monkeypatch.setattr(st, "arm_suite", lambda *a: None)
    opts = SimpleNamespace(allocator="jemalloc", out=tmp_path, budget_s=3600.0, trials=None,
                           seed=0, resume=False, quiet=True)  # fmt: skip
    study = st._study(tmp_path, seed=1)
    assert st._run_trial(study, st._distributions(space), opts, plan, None) is False
    assert not ran and study.trials[0].state.name == "FAIL"
    assert (
        study.trials[0].user_attrs["error"] == "no" and "seconds" not in study.trials[0].user_attrs
    )


def test_presets_are_tried_first_and_a_narrowed_space_keeps_those_it_holds(tmp_path):
    """The registry's presets (settings DBAs deploy) are the first trials of a tune, one at a
    time, in order, each named; a space file that narrows a preset's value away drops that
    preset; a trial a killed tune left still runs first when it is resumed."""
    from suites.tune.study import (
        _applied,
        _distributions,
        _queue_next_preset,
        _requeue_killed,
        _study,
    )

    space = space_of("jemalloc")
    names = [n for n, _ in space.preset_params()]
    assert names[:2] == ["operator-1808", "short-decay"]
    assert dict(space.preset_params())["operator-1808"] == {
        "background_thread": "true", "dirty_decay_ms": 5000, "muzzy_decay_ms": 5000,
    }  # fmt: skip
    f = _space_file(tmp_path, "[space.jemalloc]\ndirty_decay_ms = [2000, 30000]\n")
    kept = [n for n, _ in narrow(space, f).preset_params()]
    assert "operator-1808" in kept and "short-decay" not in kept  # 1000 ms is narrowed away
    fixed = _space_file(tmp_path, '[space.jemalloc]\nbackground_thread = "false"\n')
    assert [n for n, _ in narrow(space, fixed).preset_params()] == ["one-arena"]

    study, dists = _study(tmp_path, seed=2), _distributions(space)
    _queue_next_preset(study, space)
    first = study.ask(dists)
    assert first.user_attrs["preset"] == "operator-1808"
    assert first.params["dirty_decay_ms"] == 5000 and first.params["background_thread"] == "true"
    # optuna draws the knobs a preset does not name; the trial sets the named ones only
    assert set(first.params) == set(space.knobs)
    assert _applied(first.params, space, "operator-1808") == {
        "background_thread": "true", "dirty_decay_ms": 5000, "muzzy_decay_ms": 5000,
    }  # fmt: skip
    assert _applied(first.params, space, None) == first.params  # a drawn trial sets them all
    # the tune is killed in it: resumed, the same preset runs first, then the next one
    assert _requeue_killed(study) == 1
    _queue_next_preset(study, space)  # something waits: nothing queued
    again = study.ask(dists)
    assert again.params == first.params and again.user_attrs["preset"] == "operator-1808"
    study.tell(again, [1.0, 1.0])
    _queue_next_preset(study, space)
    assert study.ask(dists).user_attrs["preset"] == "short-decay"


@pytest.mark.parametrize(
    "table, expected",
    [
        ('narenas = { int = [1, 64] }\n[allocator.x.tune.presets]\nbig = { narenas = 100 }\n',
         r"presets\.big\.narenas = 100: outside the allowed"),
        ('narenas = { int = [1, 8], optional = "yes" }\n',
         r"narenas\.optional: expected true or false, got 'yes'"),
    ],
)  # fmt: skip
def test_a_bad_preset_or_knob_in_the_registry_is_refused_in_one_line(tmp_path, table, expected):
    from suites.tune.space import declared_spaces

    reg = tmp_path / "allocators.toml"
    reg.write_text('[allocator.x.tune]\nwrites = "MALLOC_CONF"\n' + table)
    with pytest.raises(SuiteError, match=expected) as e:
        declared_spaces(reg)
    assert str(e.value).splitlines() == [str(e.value)]
    reg.write_text(
        '[allocator.x.tune]\nwrites = "MALLOC_CONF"\nnarenas = { int = [1, 64] }\n'
        "[allocator.x.tune.presets]\nodd = { arenas = 2 }\n"
    )
    with pytest.raises(SuiteError, match=r"presets\.odd\.arenas: not a knob of this space"):
        declared_spaces(reg)


def test_a_preset_trial_writes_its_named_knobs_only(tmp_path, monkeypatch):
    """The glibc preset arena-2 is MALLOC_ARENA_MAX=2 and nothing else: the other tunables stay
    glibc's own (before, the drawn tcache_count=0 and mmap threshold ran beside it)."""
    from types import SimpleNamespace

    from suites.errors import SuiteError
    from suites.tune import study as st

    space = space_of("glibc")
    seen = []

    def run_arm(loaded, suite, arm, env, tunables, what, display):
        seen.append((env, tunables, what))
        raise SuiteError("stop here: the environment is what this test reads")

    monkeypatch.setattr(st, "run_arm", run_arm)
    monkeypatch.setattr(st, "arm_suite", lambda *a: None)
    plan = SimpleNamespace(space=space, loaded=SimpleNamespace(suite=None), rounds=3,
                           trial_s=60.0)  # fmt: skip
    opts = SimpleNamespace(allocator="glibc", out=tmp_path, budget_s=3600.0, trials=None,
                           seed=0, resume=False, quiet=True)  # fmt: skip
    study = st._study(tmp_path, seed=1)
    assert st._run_trial(study, st._distributions(space), opts, plan, None) is True
    ((env, tunables, what),) = seen
    assert env == {} and tunables == ("glibc.malloc.arena_max=2",) and what == "arena_max=2"
    trial = study.trials[0]
    assert trial.user_attrs["preset"] == "arena-2" and trial.user_attrs["setting"] == {
        "arena_max": "2"
    }


def test_an_interrupted_tune_says_how_to_resume_the_tune_not_its_trial(tmp_path, monkeypatch):
    """Ctrl-C inside a trial's run: the line names the tune's directory and the tune command with
    --resume (the runner had named the trial's own run and `mallocsweep run ... --resume`)."""
    import signal

    from suites.errors import Interrupted
    from suites.tune import study as st

    def trial_run(_opts):
        e = Interrupted(signal.SIGINT)
        e.run_dir, e.resume = tmp_path / "trials" / "0003" / "run", "mallocsweep run x --resume y"
        raise e

    monkeypatch.setattr(st, "_tune", trial_run)
    opts = st.TuneOptions(suite=Path("configs/suites/tune.toml"), allocator="glibc",
                          budget_s=7200.0, budget_text="2h", out=tmp_path / "my tune", seed=1)  # fmt: skip
    with pytest.raises(Interrupted) as got:
        st.tune(opts)
    assert got.value.run_dir == tmp_path / "my tune"
    assert got.value.resume == (
        f"mallocsweep tune configs/suites/tune.toml --allocator glibc --budget 2h "
        f"--out '{tmp_path / 'my tune'}' --seed 1 --resume"
    )


def test_an_optional_knob_may_stay_the_allocators_default(tmp_path):
    """glibc's thresholds are optional: fixing either turns the dynamic mmap threshold off, so a
    trial may leave them unset. The sampler draws a switch beside the value; an unset knob is not
    written; a preset that names one sets it; a space file may fix it unset (out of the search)
    or to one value (always set)."""
    from suites.tune.space import SET, UNSET, switch
    from suites.tune.study import _applied, _distributions, _queue_next_preset, _study

    space = space_of("glibc")
    assert space.knobs["mmap_threshold"].optional and space.knobs["trim_threshold"].optional
    assert not space.knobs["arena_max"].optional
    dists = _distributions(space)
    assert set(dists) == set(space.knobs) | {switch("mmap_threshold"), switch("trim_threshold")}
    drawn = {"arena_max": 2, "trim_threshold": 65536, "mmap_threshold": 262144,
             "tcache_count": 7, switch("trim_threshold"): SET, switch("mmap_threshold"): UNSET}  # fmt: skip
    assert _applied(drawn, space, None) == {
        "arena_max": 2,
        "trim_threshold": 65536,
        "tcache_count": 7,
    }
    env, tunables = space.env_of(_applied(drawn, space, None))
    assert not any("mmap_threshold" in t for t in tunables) and len(tunables) == 3
    # a preset naming an optional knob sets it (its switch is queued as set)
    assert dict(space.preset_params())["trim-128k"] == {
        switch("trim_threshold"): SET, "trim_threshold": 131072,
    }  # fmt: skip
    study = _study(tmp_path, seed=3)
    _queue_next_preset(study, space)
    _queue_next_preset(study, space)
    first = study.ask(dists)
    assert _applied(first.params, space, first.user_attrs["preset"]) == {"arena_max": 2}
    # a space file: unset takes the knob out; one value fixes it, always set
    f = _space_file(tmp_path, '[space.glibc]\nmmap_threshold = "unset"\ntrim_threshold = 131072\n')
    narrowed = narrow(space, f)
    assert "mmap_threshold" not in narrowed.knobs
    assert not narrowed.knobs["trim_threshold"].optional
    assert switch("trim_threshold") not in _distributions(narrowed)
    # a knob that is not optional cannot be unset
    with pytest.raises(SuiteError, match=r"arena_max = 'unset'"):
        narrow(space, _space_file(tmp_path, '[space.glibc]\narena_max = "unset"\n'))


# --- the recommendation: a resolved memory gain (RSS at stop, or growth per hour) at no cost ---


def _figs(mem=(1.0, 0.97, 1.03, "none"), growth=None, slower=()):
    return TrialFigures(
        Figure(*mem),
        Figure(*growth) if growth else None,
        Figure(0.99, 0.95, 1.03, "slower" if slower else "none"),
        list(slower),
        mem[3] == "less memory",
        4,
    )


def _t(n, figs):
    return front.Trial(n, {"narenas": str(n)}, figs, f"/runs/{n}")


def test_a_resolved_growth_per_hour_gain_is_recommended_when_no_rss_gain_is():
    from suites.tune.study import candidates

    trials = [
        _t(0, _figs(growth=(-40.0, -70.0, -12.0, "grows less", "MB/h"))),
        _t(1, _figs(growth=(-90.0, -150.0, -30.0, "grows less", "MB/h"))),  # guarantees 30 MB/h
        _t(2, _figs(growth=(-300.0, -900.0, 200.0, "undecided", "MB/h"))),  # larger, unresolved
        _t(3, _figs(growth=(-200.0, -300.0, -100.0, "grows less", "MB/h"), slower=["oltp_ro@8"])),
        # less growth but more memory at stop: a cost, not a gain
        _t(
            4,
            _figs(
                mem=(1.09, 1.06, 1.12, "more memory"),
                growth=(-500.0, -600.0, -400.0, "grows less", "MB/h"),
            ),
        ),  # fmt: skip
    ]
    assert [t.number for t in candidates(trials)] == [1, 0]


def test_a_resolved_rss_gain_ranks_before_a_growth_gain_by_what_its_interval_guarantees():
    from suites.tune.study import candidates

    trials = [
        _t(0, _figs(growth=(-500.0, -600.0, -400.0, "grows less", "MB/h"))),
        _t(1, _figs(mem=(0.90, 0.88, 0.94, "less memory"))),
        _t(2, _figs(mem=(0.85, 0.70, 0.945, "less memory"))),  # larger, but guarantees less
        # grows more per hour: a cost that less memory at stop does not buy
        _t(
            3,
            _figs(
                mem=(0.80, 0.78, 0.82, "less memory"),
                growth=(60.0, 20.0, 100.0, "grows more", "MB/h"),
            ),
        ),  # fmt: skip
    ]
    assert [t.number for t in candidates(trials)] == [1, 2, 0]


def test_the_lifes_growth_ratio_of_an_older_tune_is_shown_but_never_recommended_on():
    """Without a growth run the growth figure is the life's ratio, which compares where two
    settings started as much as how they grew: the jemalloc tune of 2026-11-29 had thp:always
    settings "grow less" 12-15% with RSS at stop undecided."""
    from suites.tune.study import candidates

    old = _figs(mem=(0.95, 0.87, 1.04, "undecided"), growth=(0.88, 0.81, 0.96, "grows less"))
    assert candidates([_t(22, old)]) == []


def test_the_confirming_run_must_resolve_the_same_gain_again_at_no_cost():
    from suites.tune.study import _confirms

    by_growth = _t(1, _figs(growth=(-90.0, -150.0, -30.0, "grows less", "MB/h")))
    by_memory = _t(2, _figs(mem=(0.90, 0.88, 0.94, "less memory")))
    again = _figs(growth=(-80.0, -120.0, -40.0, "grows less", "MB/h"))
    assert _confirms(again, by_growth)
    assert not _confirms(again, by_memory)  # chosen on RSS at stop, which did not resolve again
    assert not _confirms(_figs(growth=(-80.0, -200.0, 40.0, "undecided", "MB/h")), by_growth)
    assert not _confirms(
        _figs(growth=(-80.0, -120.0, -40.0, "grows less", "MB/h"), slower=["oltp_ro@256"]),
        by_growth,
    )
    assert _confirms(_figs(mem=(0.91, 0.89, 0.93, "less memory")), by_memory)


def test_growth_per_hour_has_its_own_columns_and_survives_the_trials_record():
    trials = [
        _t(0, _figs(growth=(-90.0, -150.0, -30.0, "grows less", "MB/h"))),
        _t(
            1,
            _figs(
                mem=(0.90, 0.88, 0.94, "less memory"),
                growth=(5.0, -20.0, 30.0, "undecided", "MB/h"),
            ),
        ),
    ]
    rows = list(csv.DictReader(io.StringIO(front.pareto_csv(trials, ["narenas"]))))
    assert "growth_ratio" not in rows[0] and "memory_ratio" in rows[0]
    got = {r["trial"]: r for r in rows}
    assert (
        got["0"]["growth_mb_per_hour"] == "-90.0000" and got["0"]["growth_verdict"] == "grows less"
    )
    f = trials[0].figures
    assert TrialFigures.from_json(json.loads(json.dumps(f.to_json()))) == f
    # a trial recorded before growth runs had no unit: its growth reads as the life's ratio
    older = f.to_json()
    older["growth"].pop("unit")
    assert TrialFigures.from_json(older).growth.unit == ""


def test_the_tune_suite_names_its_growth_scenario_and_a_suite_without_one_has_none(tmp_path):
    from suites.suite.model import load_suite
    from suites.tune.arms import arm_suite, growth_suite, named_scenarios

    tune = load_suite(REPO / "configs" / "suites" / "tune.toml")
    assert named_scenarios(tune) == ["dump"]
    g = arm_suite(growth_suite(tune.suite, ["dump"]), "jemalloc", 3, tmp_path)
    assert g.suite.kind == "fragmentation" and g.fragmentation.scenarios == ["dump"]
    assert g.run.design == "solo" and g.run.repeat == 3 and g.allocators.use == ["jemalloc"]
    assert g.fragmentation.cycles == tune.suite.fragmentation.cycles
    assert named_scenarios(load_suite(SMOKE)) == []


def test_resolved_means_the_interval_is_wholly_on_one_side_at_any_size():
    """The jemalloc short-decay preset's RSS at stop, 0.953 [0.925-0.981], is at least 1.9% less:
    its verdict word says "undecided" (0.001 short of the 5% minimum effect), but a tune asks for
    a real gain, so it is one; and a real throughput cost of 1-5% is a cost, though the word
    "slower" (which needs 5%) would let it through."""
    from suites.tune.study import candidates

    short_decay = _figs(mem=(0.953, 0.925, 0.981, "undecided"))
    assert short_decay.memory.resolved_less and not short_decay.memory.resolved_more
    costly = TrialFigures(
        Figure(0.90, 0.88, 0.92, "less memory"),
        None,
        Figure(0.97, 0.95, 0.99, "undecided"),  # recorded before the rule: no slower_points
        [],
        True,
        4,
    )
    assert [t.number for t in candidates([_t(1, short_decay), _t(2, costly)])] == [1]
    assert Figure(-50.0, -90.0, -10.0, "undecided", "MB/h").resolved_less
    assert not Figure(-50.0, -90.0, 10.0, "undecided", "MB/h").resolved_less
    assert Figure(30.0, 5.0, 55.0, "undecided", "MB/h").resolved_more
