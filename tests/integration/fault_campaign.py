"""A randomized, seeded fault campaign against real `mallocsweep run` processes (issue 17).

Each fault is one of: SIGINT, SIGTERM, SIGHUP or SIGKILL to the runner at a random moment (the
phase it landed in is noted: prepare, server start, warmup, level, stop), kill -9 of the server or
of sysbench in a level, or a server that cannot start (a bad setting). Besides the sysbench suite,
two client suites (iibench, read-while-writing) run as chains of their own: a fault there is
kill -9 of one client process mid-level, or a signal (SIGKILL included) to the runner while its
clients run. After each, from the system itself and not from the runner's bookkeeping:
- no process of ours alive: /proc scanned for processes whose cmdline, cwd or environ point into
  the campaign's directories;
- THP as before (system enabled/defrag);
- no mount left (/proc/mounts);
- the manifest valid and truthful about each cell (a cell "ok" has its record and its rows; a cell
  whose client was killed mid-load is failed, naming the signal);
- for signals other than SIGKILL, no datadir copy left in work/ and the manifest not "running".
Faults are chained on one run directory: after each, `--resume` goes on (and may be faulted
again); a run that completes is checked for every cell exactly once, and the next fault starts
a new run. At the end a clean `--resume` must complete whatever was left.

`python -m tests.integration.fault_campaign` (make stress) runs MALLOCSWEEP_STRESS_FAULTS faults
(default 50) with MALLOCSWEEP_STRESS_SEED (default: random, printed).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.integration.runs_helpers import (
    REPO,
    kill_quietly,
    manifest,
    results,
    scratch_dir,
    server_pid,
    start_run,
)

SMOKE = str(REPO / "configs/suites/smoke.toml")
THP = Path("/sys/kernel/mm/transparent_hugepage")
RUNNER_SIGNALS = {
    "SIGINT": (signal.SIGINT, 130),
    "SIGTERM": (signal.SIGTERM, 143),
    "SIGHUP": (signal.SIGHUP, 129),
    "SIGKILL": (signal.SIGKILL, -9),
}
KINDS = [*RUNNER_SIGNALS, "kill-server", "kill-sysbench"]
# Faults in the client suites' chains: kill -9 of one client, or a signal to the runner, both
# while the clients run.
CLIENT_SUITES = ("iibench", "rww")
CLIENT_KINDS = ["kill-client", *RUNNER_SIGNALS]
CLIENT_SHARE = 0.2  # of the random draws, the share that goes to a client suite


def draw(rng: random.Random) -> str:
    """The next random fault: a sysbench-chain kind, or "suite:kind" in a client suite."""
    if rng.random() < CLIENT_SHARE:
        return f"{rng.choice(CLIENT_SUITES)}:{rng.choice(CLIENT_KINDS)}"
    return rng.choice(KINDS)


# Client suites small enough for seconds-long cells: one allocator, one repeat; an iibench level
# of a few seconds (time-capped), a read-while-writing run a reader finishes in a second or two.
CLIENT_TOML = {
    "iibench": """[suite]
name = "campaign-iibench"
kind = "iibench"
[server]
buffer_pool_mb = 64
[allocators]
use = ["glibc"]
[iibench]
clients = 3
max_rows = 1000000
max_seconds = 4.0
batch_rows = 100
secondary_indexes = 1
""",
    "rww": """[suite]
name = "campaign-rww"
kind = "rww"
[server]
buffer_pool_mb = 64
[allocators]
use = ["glibc"]
[rww]
records = 20000
value_bytes = 200
batch_rows = 100
readers = 2
max_seconds = 30
load_max_seconds = 30
report_interval_s = 0.25
""",
}
CLIENT_MODULE = {"iibench": "suites.workloads.iibench.client", "rww": "suites.workloads.rww.client"}
# iibench reports once a second: at 4 s, the reports at 1 s and 2 s are both far from the end.
IIBENCH_MAX_S, RWW_READERS, RWW_RECORDS = 4.0, 2, 20000


@dataclass
class Counts:
    faults: int = 0
    orphans: int = 0
    thp_changed: int = 0
    mounts_left: int = 0
    manifests_invalid: int = 0
    resumes_incomplete: int = 0
    problems: list[str] = field(default_factory=list)
    log: list[str] = field(default_factory=list)

    def summary(self) -> str:
        return (
            f"faults injected {self.faults}, orphans found {self.orphans}, THP left changed "
            f"{self.thp_changed}, mounts left {self.mounts_left}, manifests invalid "
            f"{self.manifests_invalid}, resumes not completed {self.resumes_incomplete}"
        )


def thp_state() -> tuple[str, str] | None:
    try:
        return ((THP / "enabled").read_text().strip(), (THP / "defrag").read_text().strip())
    except OSError:
        return None


def ours(dirs: list[Path]) -> list[tuple[int, str]]:
    """Live processes (not zombies) whose cmdline, cwd or environ point into `dirs`."""
    keys = [str(d).encode() for d in dirs]
    found = []
    me = os.getpid()
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == me:
            continue
        try:
            state = (d / "stat").read_text().rsplit(")", 1)[1].split()[0]
            if state == "Z":
                continue
            cmd = (d / "cmdline").read_bytes()
            try:
                cwd = os.readlink(d / "cwd").encode()
            except OSError:
                cwd = b""
            try:
                env = (d / "environ").read_bytes()
            except OSError:
                env = b""
        except OSError:
            continue
        if any(k in blob for k in keys for blob in (cmd, cwd, env)):
            found.append((int(d.name), cmd.replace(b"\0", b" ").decode(errors="replace")[:140]))
    return found


def mounts_under(dirs: list[Path]) -> list[str]:
    text = Path("/proc/mounts").read_text()
    return [ln for ln in text.splitlines() if any(str(d) in ln for d in dirs)]


def run_dir_in(out: Path) -> Path | None:
    dirs = (
        sorted(d for d in out.iterdir() if (d / "manifest.json").exists()) if out.exists() else []
    )
    return dirs[-1] if dirs else None


def phase_of(run_dir: Path | None, cache: Path) -> str:
    """Where the run is right now, seen from outside."""
    if any(cache.glob("datasets/.prepare-*")):
        return "prepare"
    if run_dir is None:
        return "before the run directory"
    try:
        m = json.loads((run_dir / "manifest.json").read_text())
    except (OSError, ValueError):
        return "unknown"
    running = [c for c in m.get("cells", []) if c.get("status") == "running"]
    if not running:
        return "between cells"
    cell = running[0]["id"]
    if not any((run_dir / "work" / cell).glob("*.pid")):
        return "server start/stop"
    if any((run_dir / "logs" / cell).glob("*@*.log")):
        return "level"
    return "warmup"


def sysbench_of(run_dir: Path) -> list[int]:
    return [
        pid for pid, cmd in ours([run_dir]) if cmd.startswith(("/usr/bin/sysbench", "sysbench"))
    ]


def clients_of(run_dir: Path, suite: str) -> list[int]:
    """Live client processes of `suite` working for the run in `run_dir` (seen from /proc)."""
    module = CLIENT_MODULE[suite]
    return [
        pid for pid, cmd in ours([run_dir]) if f" -m suites.workloads.client_procs {module} " in cmd
    ]


def _until(pred, timeout_s: float, step: float = 0.05):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(step)
    return None


def check_manifest(run_dir: Path, how: str, c: Counts, finished_expected: bool = False) -> dict:
    """Valid, and truthful about each cell."""

    def bad(why: str) -> None:
        c.manifests_invalid += 1
        c.problems.append(f"{run_dir.name} after {how}: {why}")

    try:
        m = json.loads((run_dir / "manifest.json").read_text())
    except (OSError, ValueError) as e:
        bad(f"manifest unreadable: {e}")
        return {}
    status = m.get("status")
    allowed = {"finished", "interrupted", "failed"} | ({"running"} if how == "SIGKILL" else set())
    if status not in allowed:
        bad(f"run status {status!r}")
    if finished_expected and status != "finished":
        bad(f"run status {status!r}, expected finished")
    rows = results(run_dir) if (run_dir / "results.csv").exists() else []
    for cell in m.get("cells", []):
        st = cell.get("status")
        rec_path = run_dir / "cells" / f"{cell['id']}.json"
        if st == "ok":
            if not rec_path.exists():
                bad(f"cell {cell['id']} ok without its record")
            elif json.loads(rec_path.read_text())["cell"].get("status") != "ok":
                bad(f"cell {cell['id']} ok in the manifest, not in its record")
            if not [r for r in rows if r["cell"] == cell["id"]]:
                bad(f"cell {cell['id']} ok without rows in results.csv")
        elif st == "running" and how != "SIGKILL":
            bad(f"cell {cell['id']} left 'running' after {how}")
        elif st not in ("ok", "failed", "interrupted", "pending", "running", "skipped"):
            bad(f"cell {cell['id']} status {st!r}")
        if st in ("failed", "interrupted") and not cell.get("error"):
            bad(f"cell {cell['id']} {st} without an error")
    if how != "SIGKILL" and [p for p in (run_dir / "work").glob("*/") if p.is_dir()]:
        bad(f"datadir copy left in work/ after {how}")
    return m


def check_once(run_dir: Path, m: dict, c: Counts) -> None:
    """A finished run: every cell ok, exactly once in results.csv."""
    rows = results(run_dir)
    keys = [(r["cell"], r["workload"], r["threads"]) for r in rows]
    ids = {cell["id"] for cell in m["cells"]}
    if len(keys) != len(set(keys)) or {r["cell"] for r in rows} != ids:
        c.resumes_incomplete += 1
        c.problems.append(f"{run_dir.name}: cells not exactly once in results.csv")
    if any(cell["status"] != "ok" for cell in m["cells"]):
        c.resumes_incomplete += 1
        c.problems.append(f"{run_dir.name}: finished with cells not ok")


def settle(dirs: list[Path], c: Counts, how: str) -> None:
    # A SIGKILLed runner's server gets SIGTERM from the kernel and shuts down cleanly: give it time.
    left = _until(lambda: not ours(dirs), 60 if how == "SIGKILL" else 15)
    if left is None:
        procs = ours(dirs)
        c.orphans += len(procs)
        c.problems.append(f"after {how}: processes left: {procs}")
        for pid, _ in procs:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    m = mounts_under(dirs)
    if m:
        c.mounts_left += len(m)
        c.problems.append(f"after {how}: mounts left: {m}")


def _refusal(proc, err: str) -> str:
    """A run refused before any fault could land (exit 2: bad input or a failed preflight, e.g.
    memory taken by other work on a shared machine): its one-line reason, for the log."""
    lines = err.strip().splitlines()
    return f" ({lines[-1][:200]})" if proc.returncode == 2 and lines else ""


def _record_end(c: Counts, proc, label: str, landed: str) -> None:
    """After a fault's run has ended: a traceback is a problem; count the fault and log its
    outcome (with the refusal's reason when the run was refused)."""
    err = proc.stderr.read()
    if "Traceback" in err:
        c.problems.append(f"{label}: traceback: {err[-400:]}")
    c.faults += 1
    c.log.append(f"{label} at {landed}: exit {proc.returncode}{_refusal(proc, err)}")


def one_fault(
    rng, kind, args, out, cache, c: Counts, max_delay_s: float
) -> tuple[int, Path | None]:
    """Start the run (or resume), inject `kind`, wait for the end; (exit code, run dir)."""
    proc = start_run(args, cache)
    landed = "never (the run ended first)"
    try:
        if kind in RUNNER_SIGNALS:
            delay = rng.uniform(0.2, max_delay_s)
            try:
                proc.wait(delay)
            except subprocess.TimeoutExpired:
                landed = phase_of(run_dir_in(out), cache)
                proc.send_signal(RUNNER_SIGNALS[kind][0])
        else:

            def target():
                rd = run_dir_in(out)
                if rd is None or phase_of(rd, cache) != "level":
                    return None
                pids = sysbench_of(rd) if kind == "kill-sysbench" else [server_pid(rd)]
                running = [x["id"] for x in manifest(rd)["cells"] if x["status"] == "running"]
                pids = [p for p in pids if p]
                return (rd, running[0], pids) if pids and running else None

            time.sleep(rng.uniform(0.0, 1.0))
            # A run that ends before its level is reached (a fast cell, a refusal) ends the wait:
            # waiting out the 300 s for a level that will never come cost CI five minutes.
            found = _until(lambda: target() if proc.poll() is None else "ended", 300)
            if found and found != "ended":
                rd, cell, pids = found
                landed = "level"
                for p in pids:
                    os.kill(p, signal.SIGKILL)
                # The killed cell is recorded; then end the run (a second fault, SIGTERM between
                # cells or in the next one) rather than wait for the whole matrix.
                record = rd / "cells" / f"{cell}.json"
                _until(lambda: proc.poll() is not None or record.exists(), 120)
                if proc.poll() is None:
                    time.sleep(rng.uniform(0.0, 3.0))
                    if proc.poll() is None:
                        proc.send_signal(signal.SIGTERM)
                        landed += f", then SIGTERM at {phase_of(rd, cache)}"
                        c.faults += 1
        proc.wait(300)
    finally:
        kill_quietly(proc)
    _record_end(c, proc, kind, landed)
    return proc.returncode, run_dir_in(out)


def mid_load(run_dir: Path, suite: str) -> tuple[str, list[int]] | None:
    """(cell, client pids) while the clients of `suite` are surely mid-load, seen from outside:
    the level's log has an interval report and no summary yet, and the load is far from done
    (iibench: well before its max_seconds; rww: the run level, its readers under half their
    reads). The pids are the clients still loading then: inserters, or readers."""
    try:
        m = manifest(run_dir)
    except (OSError, ValueError):
        return None
    cells = [x["id"] for x in m.get("cells", []) if x.get("status") == "running"]
    if not cells:
        return None
    prefix = "iibench@" if suite == "iibench" else "rww_run@"
    for log in (run_dir / "logs" / cells[0]).glob(f"{prefix}*.log"):
        try:
            events = [json.loads(x) for x in log.read_text().splitlines() if x.endswith("}")]
        except (OSError, ValueError):
            return None
        if any(e["event"] == "summary" for e in events):
            continue
        intervals = [e for e in events if e["event"] == "interval"]
        if not intervals:
            return None
        if suite == "iibench":
            far = intervals[-1]["t_s"] < IIBENCH_MAX_S - 1.5
            role = " insert "
        else:
            far = sum(e["reads"] for e in intervals) < RWW_READERS * RWW_RECORDS / 2
            role = " reader "
        pids = [p for p, cmd in ours([run_dir]) if CLIENT_MODULE[suite] + role in cmd]
        return (cells[0], pids) if far and pids else None
    return None


def client_fault(
    rng, suite: str, kind: str, args, out: Path, cache: Path, c: Counts
) -> tuple[int, Path | None]:
    """A fault in a client suite's run while its clients run: kill -9 of one client mid-load, or
    a signal to the runner; (exit code, run dir)."""
    proc = start_run(args, cache)
    landed = "never (the run ended first)"
    killed_in: tuple[Path, str] | None = None
    try:
        if kind == "kill-client":

            def moment():
                rd = run_dir_in(out)
                found = mid_load(rd, suite) if rd is not None else None
                return (rd, *found) if found else None

            found = _until(lambda: moment() or proc.poll() is not None, 300, step=0.02)
            if isinstance(found, tuple):
                rd, cell, pids = found
                os.kill(rng.choice(pids), signal.SIGKILL)
                landed = f"{suite} client mid-load"
                killed_in = (rd, cell)
        else:

            def running():
                rd = run_dir_in(out)
                return bool(clients_of(rd, suite)) if rd is not None else False

            _until(lambda: running() or proc.poll() is not None, 300, step=0.02)
            if proc.poll() is None:
                time.sleep(rng.uniform(0.0, 1.5))  # anywhere in the clients' life
                if proc.poll() is None:
                    rd = run_dir_in(out)
                    landed = f"{suite} level, clients " + ("running" if running() else "gone")
                    proc.send_signal(RUNNER_SIGNALS[kind][0])
        proc.wait(300)
    finally:
        kill_quietly(proc)
    _record_end(c, proc, f"{suite}:{kind}", landed)
    if killed_in is not None:
        rd, cell = killed_in
        rec = rd / "cells" / f"{cell}.json"
        levels = json.loads(rec.read_text())["cell"].get("levels", []) if rec.exists() else []
        if not any(lv["status"] == "failed" and "signal 9" in (lv["error"] or "") for lv in levels):
            c.manifests_invalid += 1
            c.problems.append(
                f"{suite}: cell {cell} whose client was killed mid-load does not say so: {levels}"
            )
    return proc.returncode, run_dir_in(out)


@dataclass
class Chain:
    """A client suite's chain of runs: faulted, then resumed, until one completes."""

    suite: Path
    out: Path
    run_dir: Path | None = None


def _next_run_dir(rd: Path, how: str, code: int, c: Counts) -> Path | None:
    """Check the run after a fault; the run to --resume next, or None when it is complete (the
    next fault then starts a new run)."""
    m = check_manifest(rd, how, c)
    all_ok = bool(m.get("cells")) and all(x.get("status") == "ok" for x in m["cells"])
    if m.get("status") == "finished" and code in (0, 3) and all_ok:
        # Complete (exit 3: a level failed under a killed sysbench or client; its cell is recorded
        # once, with the failure, and --resume does not re-run it).
        check_once(rd, m, c)
        return None
    return rd  # interrupted, or failed cells (a killed server): --resume goes on


def campaign(seed: int, faults: int, work: Path, budget_s: float, say=None) -> Counts:
    say = say or (lambda line: print(line, flush=True))
    rng = random.Random(seed)
    c = Counts()
    cache = work / "cache"
    out = work / "runs"
    bad_out = work / "bad"
    # The client suites' chains: their suite file, output directory and run to --resume.
    chains = {s: Chain(work / f"{s}.toml", work / f"runs-{s}") for s in CLIENT_SUITES}
    for ch in chains.values():
        ch.suite.write_text(CLIENT_TOML[ch.suite.stem])
    for d in (cache, out, bad_out, *(ch.out for ch in chains.values())):
        d.mkdir(parents=True, exist_ok=True)
    dirs = [cache, out, bad_out, *(ch.out for ch in chains.values())]
    thp_before = thp_state()
    base = [SMOKE, "--threads", "4", "--duration", "3"]
    started = time.monotonic()
    run_dir: Path | None = None
    # A dataset prepared for the first run; the first fault may land in its preparation.
    bad_done = False
    # Every campaign, however short, has one kill of each kind of client and one SIGKILL of the
    # runner while clients run, early (a loaded machine fits only 5-7 faults in make test's
    # budget); the random draw adds more.
    forced = [
        (1, "iibench:kill-client"),
        (max(2, faults // 4), "rww:kill-client"),
        (max(3, faults // 3 + 1), f"{CLIENT_SUITES[seed % 2]}:SIGKILL"),
    ]
    while c.faults < faults and time.monotonic() - started < budget_s:
        due = [f for f in forced if c.faults >= f[0]]
        bad_due = not bad_done and c.faults >= faults // 2
        fault = None
        if due:
            fault = due[0][1]
            forced.remove(due[0])
        elif not bad_due:
            fault = draw(rng)
        if fault is not None and ":" in fault:
            suite, kind = fault.split(":")
            ch = chains[suite]
            args = [str(ch.suite), "--out", str(ch.out)] if ch.run_dir is None else [
                str(ch.suite), "--resume", str(ch.run_dir)
            ]  # fmt: skip
            code, rd = client_fault(rng, suite, kind, args, ch.out, cache, c)
            say(f"fault {c.faults}: {c.log[-1]}")
            settle(dirs, c, kind)
            if thp_state() != thp_before and kind != "SIGKILL":
                c.thp_changed += 1
                c.problems.append(f"after {suite}:{kind}: THP {thp_state()} (was {thp_before})")
            ch.run_dir = _next_run_dir(rd, kind, code, c) if rd is not None else ch.run_dir
            continue
        if fault is None:
            bad_done = True
            # A server that cannot start: a start-up time it cannot meet (the dataset is cached by
            # now, so every cell's own start fails; an unknown option would already fail the
            # dataset's preparation, with exit 2).
            bad = work / "bad.toml"
            bad.write_text(
                Path(SMOKE)
                .read_text()
                .replace("buffer_pool_mb = 64", "buffer_pool_mb = 64\nstartup_timeout_s = 0.05")
            )
            proc = start_run(
                [str(bad), "--threads", "4", "--duration", "3", "--out", str(bad_out)], cache
            )
            try:
                proc.wait(600)
            finally:
                kill_quietly(proc)
            c.faults += 1
            rd = run_dir_in(bad_out)
            c.log.append(f"bad setting (startup_timeout_s = 0.05): exit {proc.returncode}")
            if proc.returncode not in (2, 3):
                c.problems.append(
                    f"bad setting: exit {proc.returncode}: {proc.stderr.read()[-300:]}"
                )
            if rd is not None:
                m = check_manifest(rd, "bad setting", c)
                if proc.returncode == 3 and not all(
                    x.get("status") == "failed" and "within" in (x.get("error") or "")
                    for x in m.get("cells", [])
                ):
                    c.problems.append("bad setting: cells not failed with the start-up reason")
            settle(dirs, c, "bad setting")
            continue
        kind = fault
        if run_dir is None:
            args = [*base, "--out", str(out)]
        else:
            args = [SMOKE, "--resume", str(run_dir)]
        code, rd = one_fault(rng, kind, args, out, cache, c, max_delay_s=8.0)
        say(f"fault {c.faults}: {c.log[-1]}")
        settle(dirs, c, kind)
        if thp_state() != thp_before and kind != "SIGKILL":
            c.thp_changed += 1
            c.problems.append(f"after {kind}: THP {thp_state()} (was {thp_before})")
        if rd is None:
            continue
        run_dir = _next_run_dir(rd, kind, code, c)
    # The last run directory of every chain must complete with a clean resume.
    last = [(SMOKE, run_dir), *((str(ch.suite), ch.run_dir) for ch in chains.values())]
    for suite, rd in last:
        if rd is None:
            continue
        proc = start_run([suite, "--resume", str(rd)], cache)
        try:
            proc.wait(600)
        finally:
            kill_quietly(proc)
        m = check_manifest(rd, "final resume", c, finished_expected=True)
        if proc.returncode not in (0, 3) or not m:
            c.resumes_incomplete += 1
            c.problems.append(
                f"final resume of {rd.name} exit {proc.returncode}: {proc.stderr.read()[-300:]}"
            )
        else:
            check_once(rd, m, c)
        settle(dirs, c, "final resume")
    if thp_state() != thp_before:
        c.thp_changed += 1
        c.problems.append(f"at the end: THP {thp_state()} (was {thp_before})")
    return c


def main() -> int:
    faults = int(os.environ.get("MALLOCSWEEP_STRESS_FAULTS", "50"))
    seed = int(
        os.environ.get("MALLOCSWEEP_STRESS_SEED") or random.SystemRandom().randrange(1 << 30)
    )
    budget = float(os.environ.get("MALLOCSWEEP_STRESS_BUDGET_S", "3600"))
    print(
        f"fault campaign: seed {seed}, {faults} faults (MALLOCSWEEP_STRESS_SEED={seed} repeats it)"
    )
    with scratch_dir("ms-stress-") as work:
        c = campaign(seed, faults, work, budget)
    print(c.summary())
    for p in c.problems:
        print("problem:", p)
    return 1 if c.problems else 0


if __name__ == "__main__":
    sys.exit(main())
