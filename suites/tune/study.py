"""The search: a seeded multi-objective optuna study (NSGA-II with the throughput constraint),
stored as optuna's journal file in the output directory, so a killed tune resumes where it was.

Each trial is one run of the suite with the allocator's defaults and the trial's setting as two
arms, paired round by round (arms.py), and, when the suite names fragmentation scenarios, a growth
run of them with the same two arms; its objectives are the setting's RSS at stop (a ratio to the
defaults) and its growth (MB/h above the defaults' in the growth run; objectives.py), its
constraint that no throughput point is resolved as slower. The budget covers the trials and the
final paired run on fresh lives that confirms the recommendation (`candidates`: the largest
resolved memory gain at no resolved throughput cost); a trial is started only if it and that run
still fit.

A trial killed with the tune (SIGKILL: its journal entry still says running) is marked failed on
--resume and its setting queued again, so the study continues with its own trials.
"""

from __future__ import annotations

import json
import math
import shlex
import time
from dataclasses import dataclass
from pathlib import Path

from analysis.growth_rate import UNIT as GROWTH_UNIT
from rundir.atomic import atomic_write
from servers.allocators import Allocator, resolve
from suites.errors import Interrupted, SuiteError
from suites.runner.display import Display
from suites.suite.model import load_suite
from suites.tune import dropin, front, objectives, proof, tunedir
from suites.tune.arms import arm_suite, growth_suite, named_scenarios, run_arm, trial_seconds
from suites.tune.space import SET, UNSET, Space, narrow, space_of, switch

JOURNAL = "study.journal"
CONFIRM_JSON = "confirm.json"
RECOMMENDATION = "recommendation.txt"
STUDY_NAME = "tune"
# Settings in a row that would not take (Space.will_not_take) before the tune stops drawing
MAX_SKIPPED = 50


@dataclass(frozen=True)
class TuneOptions:
    suite: Path
    allocator: str
    budget_s: float
    budget_text: str
    out: Path
    space: Path | None = None
    seed: int = 0
    resume: bool = False
    rounds: int | None = None
    trials: int | None = None  # at most this many trials (the budget still decides first)
    quiet: bool = False


@dataclass(frozen=True)
class Plan:
    """Everything checked before anything starts."""

    loaded: object  # suites.suite.model.LoadedSuite
    space: Space
    defaults: Allocator
    rounds: int
    trial_s: float
    # the growth run's suite (before arm_suite), when the suite names fragmentation scenarios
    growth: object | None = None  # suites.suite.model.Suite
    scenarios: tuple[str, ...] = ()


def check(opts: TuneOptions) -> Plan:
    """Every input checked, nothing written: the suite, the allocator and its space, the space
    file, the rounds and the budget (one trial and the confirming run must fit)."""
    loaded = load_suite(opts.suite)
    space = space_of(opts.allocator)
    if opts.space is not None:
        space = narrow(space, opts.space)
    if opts.rounds is not None and opts.rounds < 2:
        raise SuiteError(
            f"--rounds {opts.rounds}: at least 2 (a paired verdict needs two lives per arm)"
        )
    if opts.trials is not None and opts.trials < 1:
        raise SuiteError(f"--trials {opts.trials}: expected at least 1")
    rounds = opts.rounds or max(loaded.suite.run.repeat, 3)
    suite = arm_suite(loaded.suite, opts.allocator, rounds, opts.out / "trials")
    # The host's build: what the drop-in preloads (a suite whose server runs in a root is
    # checked by the runner against the root's own build).
    (defaults,) = resolve([opts.allocator])
    server = suite.as_dict().get("server") or {}
    if not defaults.usable and not server.get("root"):
        raise SuiteError(f"--allocator {opts.allocator}: not usable here: {defaults.why_not}")
    scenarios = tuple(named_scenarios(loaded))
    growth = growth_suite(loaded.suite, list(scenarios)) if scenarios else None
    trial_s = trial_seconds(suite, rounds, growth)
    if opts.budget_s < 2 * trial_s:
        raise SuiteError(
            f"--budget {opts.budget_text}: too small for one trial and the run that confirms it "
            f"(~{trial_s:.0f} s each: 2 arms x {rounds} rounds of {loaded.path}"
            f"{' and of its growth run' if growth else ''}); give at least "
            f"{math.ceil(2 * trial_s / 60)}m"
        )
    return Plan(loaded, space, defaults, rounds, trial_s, growth, scenarios)


def settings_record(opts: TuneOptions, plan: Plan) -> dict:
    return {
        "suite": str(plan.loaded.path),
        "suite_sha256": plan.loaded.sha256,
        "allocator": opts.allocator,
        "space": plan.space.to_json(),
        "space_source": plan.space.source,
        # tried first on a new tune (not part of the space: a tune recorded before presets
        # resumes as it was)
        "presets": dict(plan.space.preset_params()),
        "rounds": plan.rounds,
        "seed": opts.seed,
        "server": plan.loaded.suite.as_dict().get("server"),
        "budget_s": opts.budget_s,
        # only when there is a growth run: a tune recorded before them resumes as it was
        **({"growth_scenarios": list(plan.scenarios)} if plan.scenarios else {}),
    }


def population(budget_s: float, trial_s: float) -> int:
    """NSGA-II's generation size for a budget: half the trials the budget is expected to hold
    (between 4 and optuna's 50). The sampler draws its whole first generation at random, so with
    optuna's 50 a two-hour tune here (~13 trials of ~8 minutes) would never evolve; with half,
    the second half of the budget breeds from the first. Fixed by the plan, so a resumed tune
    keeps it."""
    expected = int(budget_s // max(trial_s, 1.0))
    return max(4, min(50, expected // 2))


def _study(out: Path, seed: int, generation: int = 50):
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = JournalStorage(JournalFileBackend(str(out / JOURNAL)))
    # A resumed study draws on from another seed: the same seed would replay the first draws.
    existing = 0
    try:
        existing = len(optuna.load_study(study_name=STUDY_NAME, storage=storage).trials)
    except KeyError:
        pass
    # The constraint is each trial's own (Trial.set_constraint: resolved slower points <= 0).
    sampler = optuna.samplers.NSGAIISampler(seed=seed + existing, population_size=generation)
    return optuna.create_study(
        study_name=STUDY_NAME,
        storage=storage,
        directions=["minimize", "minimize"],
        sampler=sampler,
        load_if_exists=True,
    )


def _distributions(space: Space) -> dict:
    from optuna.distributions import (
        CategoricalDistribution,
        FloatDistribution,
        IntDistribution,
    )

    out = {}
    for name, k in space.knobs.items():
        if k.optional:
            out[switch(name)] = CategoricalDistribution([SET, UNSET])
        if k.kind == "choice":
            out[name] = CategoricalDistribution(list(k.choices))
        elif k.kind == "int":
            out[name] = IntDistribution(int(k.low), int(k.high), log=k.log)
        else:
            out[name] = FloatDistribution(k.low, k.high, step=k.step)
    return out


def _queue_next_preset(study, space: Space) -> None:
    """The next preset not tried yet, queued when nothing else waits: presets are a tune's first
    trials, one at a time, so that a trial a killed tune left is still the first of the resumed
    one (_requeue_killed)."""
    from optuna.trial import TrialState

    trials = study.get_trials(deepcopy=False)
    if any(t.state == TrialState.WAITING for t in trials):
        return
    tried = {t.user_attrs.get("preset") for t in trials}
    for name, params in space.preset_params():
        if name not in tried:
            study.enqueue_trial(params, user_attrs={"preset": name})
            return


def _requeue_killed(study) -> int:
    """Trials a killed tune left running: failed now, their settings queued again."""
    from optuna.trial import TrialState

    killed = [t for t in study.get_trials(deepcopy=False) if t.state == TrialState.RUNNING]
    for t in killed:
        study.tell(t.number, state=TrialState.FAIL)
        study.enqueue_trial(
            dict(t.params), user_attrs={**_kept(t.user_attrs), "requeued_from": t.number}
        )
    return len(killed)


def _kept(attrs: dict) -> dict:
    """What a queued-again trial keeps of the one it repeats: its preset (a preset applies its
    named knobs only, _applied)."""
    return {"preset": attrs["preset"]} if attrs.get("preset") else {}


def _applied(params: dict, space: Space, preset: str | None) -> dict:
    """The knobs a trial sets: every knob but an optional one drawn unset (space.py SET/UNSET).
    A preset is the setting DBAs deploy, its named knobs and nothing else: the others stay the
    allocator's own defaults (unset), not the values the sampler had to draw for them (optuna
    asks every distribution of a trial; a queued trial fixes only the named ones). Measured
    before this: the glibc preset arena-2 ran with tcache_count=0 and a 2.7 MB mmap threshold
    drawn beside it, 0.71x the defaults' throughput."""
    knobs = {k: v for k, v in params.items() if k in space.knobs}  # not the switches
    if preset and preset in space.presets:
        named = space.presets[preset]
        return {k: v for k, v in knobs.items() if k in named}
    # an optional knob whose switch the sampler drew as unset stays the allocator's default
    return {k: v for k, v in knobs.items() if params.get(switch(k), SET) != UNSET}


def _say(text: str) -> None:
    print(text, flush=True)


def _spent(study) -> tuple[float, list[float]]:
    """Seconds the finished trials took (over every session of the tune), and each one."""
    each = [
        float(t.user_attrs["seconds"])
        for t in study.get_trials(deepcopy=False)
        if "seconds" in t.user_attrs
    ]
    return sum(each), each


def tune(opts: TuneOptions) -> int:
    try:
        return _tune(opts)
    except Interrupted as e:
        # what to finish is the tune, not the run of the trial it was in
        e.run_dir, e.resume = opts.out, resume_command(opts)
        raise


def resume_command(opts: TuneOptions) -> str:
    """The command that continues this tune (the same settings, which --resume checks)."""
    q = shlex.quote
    parts = ["mallocsweep tune", q(str(opts.suite)), "--allocator", q(opts.allocator),
             "--budget", q(opts.budget_text), "--out", q(str(opts.out)), "--seed", str(opts.seed)]  # fmt: skip
    if opts.space is not None:
        parts += ["--space", q(str(opts.space))]
    if opts.rounds is not None:
        parts += ["--rounds", str(opts.rounds)]
    return " ".join([*parts, "--resume"])


def _tune(opts: TuneOptions) -> int:
    plan = check(opts)
    tunedir.prepare(opts.out, settings_record(opts, plan), opts.resume)
    study = _study(opts.out, opts.seed, population(opts.budget_s, plan.trial_s))
    again = _requeue_killed(study) if opts.resume else 0
    if again:
        _say(f"resume: {again} trial(s) killed with the tune are queued again")
    display = Display(enabled=not opts.quiet)
    dists = _distributions(plan.space)
    skipped = 0
    while True:
        spent, each = _spent(study)
        # a trial must fit whole: the slowest measured so far, the runner's estimate before any
        # (the estimate errs long: it left a jemalloc tune 17 minutes unspent at 4.3-minute trials)
        per_trial = max(each) if each else plan.trial_s
        done = sum(1 for t in study.get_trials(deepcopy=False) if "seconds" in t.user_attrs)
        if opts.trials is not None and done >= opts.trials:
            break
        if spent + 2 * per_trial > opts.budget_s:  # the trial, then the confirming run
            _say(f"budget: {spent:.0f} s of {opts.budget_s:.0f} s spent; no further trial fits")
            break
        if _run_trial(study, dists, opts, plan, display):
            skipped = 0
            continue
        skipped += 1
        if skipped >= MAX_SKIPPED:
            _say(f"the sampler drew {skipped} settings in a row that would not take; stopping "
                 "(is the space narrowed to such settings?)")  # fmt: skip
            break
    return finish(study, opts, plan, display)


def _run_trial(study, dists: dict, opts: TuneOptions, plan: Plan, display: Display) -> bool:
    """One trial: False when its setting would not take and it was not run (Space.will_not_take),
    else True (measured or failed)."""
    from optuna.trial import TrialState

    _queue_next_preset(study, plan.space)
    trial = study.ask(dists)
    preset = trial.user_attrs.get("preset")
    params = _applied(trial.params, plan.space, preset)
    setting = {k: plan.space.knobs[k].text(v) for k, v in params.items()}
    env, tunables = plan.space.env_of(params)
    what = ", ".join(f"{k}={v}" for k, v in setting.items())
    arm = f"{opts.allocator}-t{trial.number:04d}"
    _say(f"trial {trial.number}{f' (preset {preset})' if preset else ''}: {what}")
    trial.set_user_attr("setting", setting)
    why = plan.space.will_not_take(setting) if setting else "every knob drawn unset: the defaults"
    if why is not None:
        # failed at once, no life spent on it: the sampler learns the combination fails
        trial.set_user_attr("error", why)
        study.tell(trial, state=TrialState.FAIL)
        _say(f"trial {trial.number}: not run: {why}")
        return False
    where = opts.out / "trials" / f"{trial.number:04d}"
    t0 = time.monotonic()
    try:
        run_dir, growth_dir, shown = _paired_runs(plan, opts, where, arm, env, tunables, what,
                                                  setting, display, trial.set_user_attr)  # fmt: skip
        trial.set_user_attr("read_back", shown)
        figs = objectives.figures(run_dir, opts.allocator, arm, growth_dir)
    except Interrupted:
        # The same setting is tried again when the tune is resumed.
        trial.set_user_attr("error", "interrupted")
        study.tell(trial, state=TrialState.FAIL)
        study.enqueue_trial(dict(trial.params), user_attrs=_kept(trial.user_attrs))
        raise
    except SuiteError as e:
        trial.set_user_attr("seconds", time.monotonic() - t0)
        trial.set_user_attr("error", str(e).splitlines()[0])
        study.tell(trial, state=TrialState.FAIL)
        _say(f"trial {trial.number}: failed: {str(e).splitlines()[0]}")
        return True
    trial.set_user_attr("seconds", time.monotonic() - t0)
    trial.set_user_attr("figures", figs.to_json())
    trial.set_constraint("slower_points", float(len(figs.slower_points)))
    growth = figs.growth.ratio if figs.growth else figs.memory.ratio
    study.tell(trial, [figs.memory.ratio, growth])
    _say(f"trial {trial.number}: {_summary(figs)}")
    return True


def _paired_runs(plan: Plan, opts, where: Path, arm: str, env: dict, tunables: tuple, what: str,
                 setting: dict, display: Display, note=lambda _k, _v: None):  # fmt: skip
    """The setting against the defaults: the suite's run, then its growth run when there is one,
    each under `where`, the setting read back from both runs' live servers.
    (run directory, growth run directory or None, what was read back)."""
    suite = arm_suite(plan.loaded.suite, opts.allocator, plan.rounds, where)
    _code, run_dir = run_arm(plan.loaded, suite, arm, env, tunables, what, display)
    note("run_dir", str(run_dir))
    shown = proof.read_back(run_dir, arm, plan.space.writes, setting)
    if plan.growth is None:
        return run_dir, None, shown
    gsuite = arm_suite(plan.growth, opts.allocator, plan.rounds, where / "growth")
    _code, growth_dir = run_arm(plan.loaded, gsuite, arm, env, tunables, what, display)
    note("growth_run_dir", str(growth_dir))
    note("growth_read_back", proof.read_back(growth_dir, arm, plan.space.writes, setting))
    return run_dir, growth_dir, shown


def _summary(f: objectives.TrialFigures) -> str:
    parts = [f"RSS at stop {f.memory.text()}"]
    if f.growth:
        parts.append(f"growth {f.growth.text()}")
    parts.append(f"throughput (worst point) {f.throughput.text()}")
    if f.slower_points:
        parts.append("slower at " + ", ".join(f.slower_points))
    return "; ".join(parts)


def finished_trials(study) -> list[front.Trial]:
    from optuna.trial import TrialState

    return [
        front.Trial(
            t.number,
            dict(t.user_attrs["setting"]),
            objectives.TrialFigures.from_json(t.user_attrs["figures"]),
            t.user_attrs.get("run_dir", ""),
        )
        for t in study.get_trials(deepcopy=False)
        if t.state == TrialState.COMPLETE and "figures" in t.user_attrs
    ]


def finish(study, opts: TuneOptions, plan: Plan, display: Display) -> int:
    trials = finished_trials(study)
    knobs = list(plan.space.knobs)
    atomic_write(opts.out / front.PARETO_CSV, front.pareto_csv(trials, knobs))
    if trials:
        front.write_plot(trials, opts.out / front.PARETO_PNG,
                         f"{opts.allocator}: {len(trials)} trials, {plan.rounds} rounds each")  # fmt: skip
    best = next(iter(candidates(trials)), None)
    confirmed = None
    if best is not None:
        confirmed = _confirm(best, opts, plan, display)
    lines = _recommendation(trials, best, confirmed, opts, plan)
    atomic_write(opts.out / RECOMMENDATION, "\n".join(lines) + "\n")
    use = best if confirmed is not None and _confirms(confirmed, best) else None
    env, tunables = plan.space.env_of(_params(use.setting, plan.space)) if use else ({}, ())
    header = lines[:3]
    atomic_write(opts.out / dropin.DROPIN,
                 dropin.dropin_text(plan.defaults, env, tunables, header))  # fmt: skip
    atomic_write(opts.out / dropin.ENV_FILE,
                 dropin.env_file_text(plan.defaults, env, tunables, header))  # fmt: skip
    for line in lines:
        _say(line)
    _say(f"pareto: {opts.out / front.PARETO_CSV}")
    _say(f"drop-in: {opts.out / dropin.DROPIN}; container env: {opts.out / dropin.ENV_FILE}")
    return 0


def _params(setting: dict, space: Space) -> dict:
    """A recorded setting (texts) as values of the space's knobs."""
    out = {}
    for k, text in setting.items():
        knob = space.knobs[k]
        out[k] = int(text) if knob.kind == "int" else float(text) if knob.kind == "float" else text
    return out


def _rate(f: objectives.TrialFigures):
    """The growth a recommendation may rest on: a growth run's MB/h. The life's growth ratio of a
    tune without a growth run is shown, never used: over a life of minutes it compares where two
    settings started as much as how they grew (objectives.py)."""
    return f.growth if f.growth is not None and f.growth.unit == GROWTH_UNIT else None


def _gain(f: objectives.TrialFigures):
    """The memory objective a setting is recommended on: RSS at stop when it is resolved as
    less (its interval wholly below the defaults'), else growth per hour when that is; None
    when neither is."""
    if f.memory.resolved_less:
        return "memory"
    rate = _rate(f)
    return "growth" if rate is not None and rate.resolved_less else None


def _harmless(f: objectives.TrialFigures) -> bool:
    """No throughput point resolved as slower (the worst point's interval is checked too: a
    trial recorded before this rule counted only points beyond the 5% minimum effect), and
    neither memory objective resolved as more."""
    rate = _rate(f)
    return (
        f.feasible
        and not f.throughput.resolved_less
        and not f.memory.resolved_more
        and not (rate is not None and rate.resolved_more)
    )


def candidates(trials: list[front.Trial]) -> list[front.Trial]:
    """The settings that may be recommended, best first: a resolved memory gain (RSS at stop, or
    growth) at no resolved cost (throughput, or the other memory objective). Ranked by the gain
    the interval guarantees (its bound nearest the defaults): a resolved RSS-at-stop gain first
    (what a DBA sizes the host by), then a resolved growth gain. Chosen from every finished trial,
    not the front alone: the front is drawn from point estimates, the recommendation from
    intervals."""

    def key(t: front.Trial):
        f = t.figures
        if _gain(f) == "memory":
            return (0, f.memory.hi, f.memory.ratio)
        return (1, f.growth.hi, f.growth.ratio)

    return sorted((t for t in trials if _gain(t.figures) and _harmless(t.figures)), key=key)


def _confirms(f: objectives.TrialFigures, best: front.Trial) -> bool:
    """The confirming run resolves again the gain `best` was chosen on, with no resolved cost."""
    if not _harmless(f):
        return False
    if _gain(best.figures) == "growth":
        rate = _rate(f)
        return rate is not None and rate.resolved_less
    return _gain(f) == "memory"


def _confirm(best: front.Trial, opts: TuneOptions, plan: Plan, display: Display):
    """The recommendation against the defaults on fresh lives (not the search's own): the
    result is kept (confirm.json), so a resumed tune does not run it twice for the same trial."""
    record = opts.out / CONFIRM_JSON
    if record.is_file():
        kept = json.loads(record.read_text())
        if kept.get("trial") == best.number:
            return objectives.TrialFigures.from_json(kept["figures"])
    env, tunables = plan.space.env_of(_params(best.setting, plan.space))
    what = ", ".join(f"{k}={v}" for k, v in best.setting.items())
    arm = f"{opts.allocator}-tuned"
    _say(f"confirming trial {best.number} ({what}) against the defaults on fresh lives")
    try:
        run_dir, growth_dir, shown = _paired_runs(plan, opts, opts.out / "confirm", arm, env,
                                                  tunables, what, best.setting, display)  # fmt: skip
        figs = objectives.figures(run_dir, opts.allocator, arm, growth_dir)
    except SuiteError as e:
        _say(f"the confirming run gave no verdict: {str(e).splitlines()[0]}")
        return None
    atomic_write(record, json.dumps({"trial": best.number, "run_dir": str(run_dir),
                                     "growth_run_dir": str(growth_dir) if growth_dir else None,
                                     "figures": figs.to_json(), "read_back": shown},
                                    indent=2) + "\n")  # fmt: skip
    return figs


def _defaults_only(plan: Plan) -> str:
    if plan.defaults.kind == "preload":
        return f"the drop-in only preloads {plan.defaults.name}."
    return f"the drop-in sets nothing ({plan.defaults.name}'s defaults need nothing)."


def _recommendation(trials, best, confirmed, opts: TuneOptions, plan: Plan) -> list[str]:
    n = len(trials)
    head = f"mallocsweep tune of {opts.allocator} on {plan.loaded.path}: {n} trial(s), " \
           f"{plan.rounds} paired rounds each"  # fmt: skip
    if best is None:
        return [
            head,
            "No setting beats the defaults: none was resolved as using less memory (RSS at stop)"
            f"{' or growing less per hour' if plan.growth is not None else ''} without a resolved"
            f" cost (throughput, or the other memory figure). Keep the defaults; "
            f"{_defaults_only(plan)}",
            "(More rounds resolve smaller differences: --rounds, and a longer --budget.)",
        ]
    what = ", ".join(f"{k}={v}" for k, v in best.setting.items())
    gain = "used less memory" if _gain(best.figures) == "memory" else "grew less per hour"
    if confirmed is None or not _confirms(confirmed, best):
        why = "gave no verdict" if confirmed is None else _summary(confirmed)
        return [
            head,
            f"No setting beats the defaults: trial {best.number} ({what}) {gain} in the "
            f"search, but the final paired run on fresh lives did not confirm it ({why}).",
            f"Keep the defaults; {_defaults_only(plan)}",
        ]
    return [
        head,
        f"Recommended: {what} (trial {best.number}; {_guaranteed(confirmed, best)} on fresh "
        f"lives), confirmed: {_summary(confirmed)}.",
        f"In the search: {_summary(best.figures)}.",
    ]


def _guaranteed(confirmed: objectives.TrialFigures, best: front.Trial) -> str:
    """The gain the confirming run's interval guarantees, in words."""
    if _gain(best.figures) == "memory":
        return f"at least {(1 - confirmed.memory.hi) * 100:.1f}% less RSS at stop"
    return f"RSS growth at least {-confirmed.growth.hi:.0f} MB/h below the defaults'"
