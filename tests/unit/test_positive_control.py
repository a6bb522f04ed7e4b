"""make bench's positive control (bench/positive_control.py, bench/slowmalloc.c): the strength
from a calibration, the suite it judges with, the tally of verdicts; and the library itself on a
program that makes a known number of calls (it must define the whole family and forward every
call)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bench.positive_control import build, judge_suite, spins_for, summarize
from suites.suite.model import load_suite

REPO_QUICK = "configs/suites/quick.toml"


def test_spins_for_a_cost_follow_the_linear_model():
    # a trial of 1000 spins cost 1/0.8 - 1 = 25% more time per query
    assert spins_for(0.10, 1000, 0.8) == round((1 / 0.9 - 1) / (0.25 / 1000))
    assert spins_for(0.05, 1000, 0.8) < spins_for(0.10, 1000, 0.8)
    assert spins_for(0.05, 1000, 1.02) is None  # no cost seen: nothing to aim at


def test_the_judge_suite_is_the_quick_suite_with_both_controls(tmp_path):
    lib = build()
    path = judge_suite(Path(REPO_QUICK), lib, {"slow5": 300, "slow10": 700}, tmp_path)
    suite = load_suite(path).suite
    assert suite.allocators.use == ["glibc", "slow5", "slow10"]
    assert suite.run.aa  # the A/A arm stays
    custom = {c.name: c for c in suite.allocators.custom}
    assert custom["slow10"].env == {"SLOWMALLOC_SPINS": "700"}
    assert custom["slow5"].library == str(lib)
    quick = load_suite(Path(REPO_QUICK)).suite
    assert suite.sysbench == quick.sysbench
    # the same design, with the rounds fixed by the bench instead of a time budget
    assert quick.run.budget_s > 0 and suite.run.budget_s == 0
    assert suite.run.model_copy(update={"budget_s": quick.run.budget_s}) == quick.run


def test_the_judge_suite_can_try_another_design(tmp_path):
    """A candidate default is judged by the same suite with only its design changed."""
    lib = build()
    # each design's suite goes to a directory of its own, made here (the bench's work dir has none)
    where = tmp_path / "solo"
    path = judge_suite(Path(REPO_QUICK), lib, {"slow5": 300, "slow10": 700}, where, "solo")
    assert path.parent == where
    suite = load_suite(path).suite
    quick = load_suite(Path(REPO_QUICK)).suite
    assert quick.run.design == "alternate" and suite.run.design == "solo"
    assert suite.sysbench == quick.sysbench
    back = {"design": "alternate", "budget_s": quick.run.budget_s}
    back["block_settle_cap_s"] = quick.run.block_settle_cap_s  # solo levels settle by their own
    assert suite.run.block_settle_cap_s == 0 and suite.run.model_copy(update=back) == quick.run


def test_a_candidate_design_carries_its_run_settings(tmp_path):
    """ "alternate:blocks=2:block_s=3" is the design and its block settings, nothing else changed."""
    lib = build()
    spec = "alternate:blocks=2:block_s=3:block_settle_cap_s=5"  # quick's own: blocks 1, cap 5
    path = judge_suite(Path(REPO_QUICK), lib, {"slow5": 300, "slow10": 700}, tmp_path, spec)
    run = load_suite(path).suite.run
    quick = load_suite(Path(REPO_QUICK)).suite.run
    assert (run.design, run.blocks, run.block_s, run.block_settle_cap_s) == ("alternate", 2, 3, 5)
    same = {"design": "alternate", "budget_s": quick.budget_s, "blocks": quick.blocks}
    same |= {"block_s": quick.block_s, "block_settle_cap_s": quick.block_settle_cap_s}
    assert run.model_copy(update=same) == quick


def test_summary_counts_verdicts_at_the_calibrated_level():
    def v(alloc, verdict, threads=8):
        return {"allocator": alloc, "workload": "oltp_ro", "threads": threads,
                "lo": 0.8, "hi": 0.9, "verdict": verdict}  # fmt: skip

    reps = [
        {"verdicts": [v("slow10", "slower"), v("glibc-aa", "none"), v("slow10", "none", 256)]},
        {"verdicts": [v("slow10", "undecided"), v("glibc-aa", "faster")]},
    ]
    s = summarize(reps)
    assert s["slow10"]["slower"] == 1 and s["slow10"]["n"] == 2
    # the judge's own words since the metric core: worse / better (a bench run counted none)
    judged = summarize(
        [{"verdicts": [v("slow10", "worse"), v("glibc-aa", "better"), v("slow5", "cannot matter")]}]
    )
    assert judged["slow10"]["slower"] == 1 and judged["glibc-aa"]["called"] == 1
    assert judged["slow5"]["called"] == 0
    assert s["glibc-aa"]["called"] == 1 and s["glibc-aa"]["slower"] == 0


@pytest.fixture(scope="module")
def counting_program(tmp_path_factory):
    """A program that makes 10000 malloc/free pairs and prints its time per pair (read only as
    proof that it ran to its end)."""
    return _program(
        tmp_path_factory.mktemp("slowmalloc") / "calls",
        "#include <stdio.h>\n#include <stdlib.h>\n#include <time.h>\n"
        "void * volatile sink;\n"
        "int main(void){struct timespec a,b;clock_gettime(CLOCK_MONOTONIC,&a);"
        "for(int i=0;i<10000;i++){sink=malloc(64);free(sink);}"
        "clock_gettime(CLOCK_MONOTONIC,&b);"
        'printf("%f\\n",((b.tv_sec-a.tv_sec)*1e9+(b.tv_nsec-a.tv_nsec))/1e4);return 0;}\n',
    )


def _program(exe, source: str):
    """`source` (C) compiled to the executable `exe`."""
    src = exe.with_suffix(".c")
    src.write_text(source)
    subprocess.run(["cc", "-O1", "-o", str(exe), str(src)], check=True)
    return exe


def _ns_per_pair(exe, spins=None) -> float:
    env = {"LD_PRELOAD": str(build()), "PATH": "/usr/bin:/bin"}
    if spins is not None:
        env["SLOWMALLOC_SPINS"] = str(spins)
    out = subprocess.run([str(exe)], env=env, capture_output=True, text=True, check=True)
    return float(out.stdout)


def test_the_library_defines_the_whole_family_and_forwards_every_call(counting_program):
    # Every malloc-family entry point is its own (so the binding proof sees it serving malloc),
    # and the program runs to its end under the preload at any strength: each call reached
    # glibc's. What a strength costs is measured by the bench's calibration, not asserted here.
    out = subprocess.run(["nm", "-D", "--defined-only", str(build())], capture_output=True,
                         text=True, check=True).stdout  # fmt: skip
    defined = {line.split()[-1] for line in out.splitlines()}
    family = {"malloc", "calloc", "realloc", "free", "memalign", "posix_memalign", "aligned_alloc"}
    assert family <= defined
    for spins in (None, 0, 50):
        assert _ns_per_pair(counting_program, spins) > 0


def test_the_bench_table_shows_each_judged_design():
    """make bench's rows: a calibration measured or given, and the judge of one design (the quick
    suite's own) or of several side by side."""
    from rich.table import Table

    from bench.table import control_rows

    def judged(verdict):
        v = {"workload": "oltp_ro", "threads": 8, "lo": 0.8, "hi": 0.9}
        reps = [{"load": [1.0, 2.0], "verdicts": [v | {"allocator": "slow10", "verdict": verdict}]}]
        return {"repetitions": reps, "summary": summarize(reps)}

    def cells(t):
        return [list(c.cells) for c in t.columns]

    t = Table(*"abcde")
    control_rows(
        t, {"calibration": {"spins": {"slow5": 3, "slow10": 7}}, "judge": judged("slower")}
    )
    rows = list(zip(*cells(t), strict=True))
    assert "given" in rows[0][1]
    assert rows[1][0].startswith("quick design, OLTP_RO@8: slow10") and rows[1][2] == "1 of 1"

    t = Table(*"abcde")
    both = {"designs": {"solo": judged("undecided"), "alternate": judged("slower")}}
    control_rows(t, {"calibration": {"spins": {"slow5": 3, "slow10": 7}}, "judge": both})
    rows = list(zip(*cells(t), strict=True))
    assert [r[0].split(",")[0] for r in rows[1:]] == [
        "quick design as solo",
        "quick design as alternate",
    ]
    assert [r[2] for r in rows[1:]] == ["0 of 1", "1 of 1"]


def test_a_slowed_custom_arm_is_in_the_call_cost_bound(tmp_path, monkeypatch):
    """ "cannot matter here" is a claim about the run's arms: a custom arm is measured with the
    installed allocators (suites/runner/matrix.py cost_arms), and a library whose calls cost more
    sets the bound (the real microbenchmark on the slowed glibc against glibc)."""
    from types import SimpleNamespace

    from servers import callcost
    from servers.allocators import Allocator
    from suites.runner.matrix import cost_arms

    monkeypatch.setenv("MALLOCSWEEP_CACHE", str(tmp_path))
    glibc = Allocator(name="glibc", kind="system", family="glibc", library=None, core=True)
    slow = Allocator(name="slow", kind="preload", family="glibc", library=str(build()),
                     env={"SLOWMALLOC_SPINS": "300"}, custom=True)  # fmt: skip
    aa = Allocator(name="glibc-aa", kind="system", family="glibc", library=None)
    rooted = Allocator(name="jemalloc-root", kind="preload", family="jemalloc",
                       library="/usr/lib/libjemalloc.so.2", root="/srv/root")  # fmt: skip
    not_core = Allocator(name="mimalloc", kind="preload", family="mimalloc", library="/x.so")
    server = SimpleNamespace(allocators=[glibc, aa, slow, rooted])
    arms = cost_arms([glibc, not_core], [server], "glibc")
    assert [a.name for a in arms] == ["glibc", "slow"]

    table = callcost.installed_table(arms)
    small = table["bound"]["small"]
    assert (small["dearest"], small["cheapest"]) == ("slow", "glibc")
    ns = {row["allocator"]: row["ns_per_call"]["small"]["1"] for row in table["table"]}
    assert ns["slow"] > ns["glibc"] + 20  # 300 spins a call are far dearer than glibc's call


def test_the_growth_control_grows_resident_memory_at_its_rate(tmp_path):
    """SLOWMALLOC_LEAK_MB_PER_H: resident memory grows by the rate times the time the program ran
    (the program's own clock), to within a 64 KiB chunk each side; without it, no growth. The
    growth verdicts' positive control (docs/measurements) relies on the rate being the truth."""
    exe = _program(
        tmp_path / "grow",
        "#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n#include <time.h>\n"
        'static long rss(void){FILE*f=fopen("/proc/self/status","r");char l[256];long v=-1;'
        'while(fgets(l,sizeof l,f))if(!strncmp(l,"VmRSS:",6))v=atol(l+6);fclose(f);return v;}\n'
        "void * volatile sink;\n"
        "int main(void){struct timespec a,b;double t;sink=malloc(64);free(sink);rss();"
        'printf("");long r0=rss();clock_gettime(CLOCK_MONOTONIC,&a);'
        "do{sink=malloc(64);free(sink);clock_gettime(CLOCK_MONOTONIC,&b);"
        "t=(b.tv_sec-a.tv_sec)+(b.tv_nsec-a.tv_nsec)/1e9;}while(t<1.5);"
        'sink=malloc(64);free(sink);printf("%ld %f\\n",rss()-r0,t);return 0;}\n',
    )

    def grown(rate=None) -> tuple[float, float]:
        env = {"LD_PRELOAD": str(build()), "PATH": "/usr/bin:/bin"}
        if rate is not None:
            env["SLOWMALLOC_LEAK_MB_PER_H"] = str(rate)
        out = subprocess.run([str(exe)], env=env, capture_output=True, text=True, check=True)
        kb, secs = out.stdout.split()
        return float(kb), float(secs)

    # the program's own first calls (stdio, /proc) are made before its first reading
    base, _ = grown()
    assert base <= 2 * 64, base  # no leak asked for: nothing grows
    rate = 7200.0  # MB/h: 2 MB/s, 32 chunks a second
    kb, secs = grown(rate)
    want = rate * 1024 / 3600 * secs
    assert want - 2 * 64 <= kb <= want + 2 * 64, (kb, want)
