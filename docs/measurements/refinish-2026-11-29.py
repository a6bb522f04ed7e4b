"""Re-finish a tune recorded before the current recommendation rule: each finished trial's
figures are derived again from its own run directory with the current objectives (a throughput
point resolved as slower at any size; growth as the tune recorded it), the recommendation is
chosen by the current rule and confirmed on fresh lives. Nothing of the study is changed: only
finish() runs, on a copy of the tune's directory. (The resume check would refuse the glibc tune:
glibc's space gained optional knobs after it ran.)

    cd a checkout whose configs/suites/tune.toml is the tune's own (sha256 in its tune.json)
    python docs/measurements/refinish-2026-11-29.py ALLOCATOR DIR
"""

import sys
from pathlib import Path

from suites.runner.display import Display
from suites.tune import front, objectives
from suites.tune import study as st

allocator, out = sys.argv[1], Path(sys.argv[2])
opts = st.TuneOptions(
    Path("configs/suites/tune.toml"), allocator, 7200.0, "2h", out, seed=1, resume=True
)
plan = st.check(opts)
study = st._study(out, opts.seed, st.population(opts.budget_s, plan.trial_s))
recorded = st.finished_trials


def again(s):
    out = []
    for t in recorded(s):
        figs = objectives.figures(Path(t.run_dir), allocator, f"{allocator}-t{t.number:04d}")
        if figs.slower_points != t.figures.slower_points:
            print(
                f"trial {t.number}: slower at {figs.slower_points} (recorded: {t.figures.slower_points})"
            )
        out.append(front.Trial(t.number, t.setting, figs, t.run_dir))
    return out


st.finished_trials = again
raise SystemExit(st.finish(study, opts, plan, Display(enabled=True)))
