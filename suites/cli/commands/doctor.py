"""`mallocsweep doctor`: is this machine ready, and did a killed run leave anything behind?"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from rich.markup import escape
from rich.table import Table

from suites.runner import leftovers, thp
from suites.runner.display import stdout_console


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""


def add_parser(sub) -> None:
    p = sub.add_parser(
        "doctor",
        help="check servers, sysbench, allocators, THP, limits, taskstats/perf; find leftovers",
        description="Readiness of this machine for mallocsweep, each item with what to do when it "
        "is missing; also reports servers left running by a killed run (by the pid files in the "
        "run directories mallocsweep created, wherever --out put them) and a system setting (THP, "
        "khugepaged's max_ptes_none, vm.nr_hugepages) a killed run left changed; --repair puts "
        "that setting back.",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument(
        "--runs",
        default="runs",
        metavar="DIR",
        help="also look for leftover servers in the run directories under DIR (default: runs; "
        "runs made by this version are found wherever they are)",
    )
    p.add_argument(
        "--repair",
        "--restore-thp",
        dest="repair",
        action="store_true",
        help="put back what a killed run left changed on the system (THP enabled/defrag, "
        "khugepaged max_ptes_none, vm.nr_hugepages), each value verified by reading it back",
    )
    p.set_defaults(func=run)


def _thp_checks() -> list[Check]:
    cur = thp.current()
    out = [
        Check(
            "THP",
            cur["enabled"] is not None,
            f"enabled={cur['enabled']} defrag={cur['defrag']}; "
            + (
                "writable (modes always/madvise/never available)"
                if thp.writable()
                else "not writable: only 'never' (per server, prctl) and 'system'"
            ),
            "" if thp.writable() else "run as root to study always/madvise",
        )
    ]
    out.append(_huge_pages_check())
    left = thp.leftover()
    if left:
        orig = left.get("original", {})
        values = " ".join(f"{k}={v}" for k, v in orig.items() if v is not None)
        out.append(
            Check(
                "THP left changed",
                False,
                f"a run (pid {left.get('pid')}, {left.get('run_dir')}) changed the system from "
                f"{values} and did not restore it"
                + (" — it still seems to be running" if left.get("runner_alive") else "")
                + (
                    f"; its restore failed: {left['restore_error']}"
                    if left.get("restore_error")
                    else ""
                )
                + f" (record: {left.get('record_file')})",
                "mallocsweep doctor --repair",
            )
        )
    return out


def _huge_pages_check() -> Check:
    """Whether explicit huge pages can be reserved here ([thp] large_pages), and how many are
    free now; khugepaged's max_ptes_none and what this kernel takes."""
    from collectors.hugepages import system_hugepages
    from collectors.procfs import ProcFS
    from collectors.thp_sysfs import max_ptes_none, max_ptes_none_limit

    procfs = ProcFS()
    hp = system_hugepages(procfs)
    name = "huge pages (large_pages)"
    if hp.get("hugepages_total") is None:
        return Check(name, False, "this kernel has no explicit huge pages (no HugePages_Total)")
    size = hp.get("hugepage_size_kb") or 2048
    try:
        avail = procfs.meminfo().get("MemAvailable", 0)
    except Exception:  # noqa: BLE001 - informational
        avail = 0
    can = procfs.sys_vm_writable("nr_hugepages")
    ptes, limit = max_ptes_none(), max_ptes_none_limit()
    khuge = f"; khugepaged max_ptes_none={ptes} (0..{limit})" if ptes is not None else ""
    detail = (
        f"{hp['hugepages_free']} of {hp['hugepages_total']} huge pages of {size} kB free "
        f"(reserved {hp['hugepages_rsvd']}); "
        + (
            f"can reserve more (root): MemAvailable allows about {avail // size:,} more"
            if can
            else "cannot reserve more (vm.nr_hugepages needs root): only free ones can be used "
            "(large_pages_reserve = false)"
        )
        + khuge
    )
    return Check(
        name,
        can or bool(hp.get("hugepages_free")),
        detail,
        "" if can else "run as root, or reserve them: echo N > /proc/sys/vm/nr_hugepages",
    )


def _taskstats_check() -> Check:
    """The collectors' context-switch source: a TGID query over taskstats on our own pid, and the
    probe that this kernel keeps exited threads' switches in it (collectors.taskstats)."""
    from collectors.errors import CollectorError
    from collectors.taskstats import TaskstatsClient, check_usable

    name = "taskstats (context switches)"
    try:
        with TaskstatsClient() as c:
            r = c.read_tgid(os.getpid())
            probe = check_usable(c)
    except CollectorError as e:
        return Check(
            name,
            False,
            str(e).splitlines()[0],
            "run as root (TASKSTATS_CMD_GET needs CAP_NET_ADMIN), outside a container's own "
            "network namespace, on a kernel with CONFIG_TASKSTATS that keeps exited threads in "
            "TGID readings; meanwhile the perf fallback is used if allowed (collect.perf), at a "
            "throughput cost to the server",
        )
    return Check(
        name,
        True,
        f"TASKSTATS family {c.family}, struct version {r.version}; a TGID query on our own pid "
        f"works and keeps exited threads (probe: {probe['taskstats_voluntary']} voluntary "
        f"switches vs getrusage {probe['rusage_voluntary']})",
    )


def _perf_checks() -> list[Check]:
    """The fallback when taskstats is unavailable: a software context-switch counter
    (perf_event_open, no `perf` binary) and the sched:sched_switch tracepoint, which needs
    tracefs. Looked at, never mounted: a run that falls back to perf mounts tracefs itself when
    it is root, as perf(1) does."""
    from collectors.errors import CollectorError
    from collectors.perf_event import (
        PERF_COUNT_SW_CONTEXT_SWITCHES,
        PERF_TYPE_SOFTWARE,
        TRACEFS_ROOTS,
        Counter,
        paranoid_level,
        tracepoint_dir,
    )

    out = []
    try:
        c = Counter(os.getpid(), PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES, inherit=False)
        c.close()
        out.append(
            Check(
                "perf counters (fallback)",
                True,
                f"perf_event_open context-switches works (perf_event_paranoid={paranoid_level()});"
                " used only when taskstats is unavailable",
            )
        )
    except CollectorError as e:
        out.append(
            Check(
                "perf counters (fallback)",
                False,
                str(e).splitlines()[0],
                "only matters without taskstats: run as root or sysctl -w "
                "kernel.perf_event_paranoid=1 (else context switches come from /proc, which "
                "loses exited threads)",
            )
        )
    root = os.geteuid() == 0
    try:
        tp = tracepoint_dir("sched", "sched_switch", mount=False)
        out.append(
            Check(
                "tracefs (perf fallback)",
                True,
                f"mounted at {tp.parents[2]} (sched:sched_switch)",
            )
        )
    except CollectorError:
        out.append(
            Check(
                "tracefs (perf fallback)",
                root,
                f"not mounted at {' or '.join(TRACEFS_ROOTS)}"
                + ("; a run that falls back to perf mounts it itself (root)" if root else ""),
                ""
                if root
                else f"as root: mount -t tracefs nodev {TRACEFS_ROOTS[0]} (else involuntary "
                "context switches are not split from voluntary ones)",
            )
        )
    return out


def _fetched_servers() -> list[Check]:
    """Servers of `mallocsweep servers fetch`: each can start as far as its binary's `--version`
    runs (under chroot for a root) and names the fetched version."""
    from servers.acquire.fetch import check_runs, list_fetched, servers_dir

    out = []
    for s in list_fetched():
        ok, detail = check_runs(s)
        where = f"{s.kind} {s.path}, {s.release}, glibc {s.glibc}"
        out.append(
            Check(
                f"fetched {s.spec}",
                ok,
                f"{detail} ({where})",
                ""
                if ok
                else f"remove {servers_dir() / s.spec} and run mallocsweep servers fetch {s.spec}",
            )
        )
    return out


def _leftover_servers(extra_roots: list[Path]) -> list[Check]:
    """Servers whose pid file sits in a run's work area and whose live process names that work
    directory on its command line (a reused pid does not). A server still the child of its run's
    runner belongs to a run in progress, not to a killed one."""
    out = []
    for run_dir in leftovers.known_run_dirs(extra_roots):
        runner = leftovers.runner_pid(run_dir)
        for s in leftovers.live_servers(run_dir):
            if runner is not None and s.ppid == runner:
                out.append(
                    Check(
                        "server of a run in progress",
                        True,
                        f"{s.comm} pid {s.pid} from {s.work_dir} (runner pid {runner})",
                    )
                )
                continue
            out.append(
                Check(
                    "leftover server",
                    False,
                    f"{s.comm} pid {s.pid} from {s.work_dir}",
                    f"stop it: kill {s.pid} (it belongs to a run that was killed)",
                )
            )
    return out


def _stale_prepare() -> list[Check]:
    """Dataset work directories a killed run left in the cache (the next run removes them)."""
    from suites.datasets.prepare import default_cache_root
    from suites.datasets.stale import size_of, stale_dirs

    root = default_cache_root()
    return [
        Check(
            "stale dataset work directory",
            False,
            f"{p} ({size_of(p) / 1e6:.0f} MB), left by a killed run (pid gone)",
            f"the next `mallocsweep run` removes it, or: rm -r '{p}'",
        )
        for p in stale_dirs(root)
    ]


def checks(runs: Path) -> list[Check]:
    from servers import checks as server_checks
    from suites.families.registry import DEFAULT, REGISTRY

    out: list[Check] = []
    # the limits are checked for the default family's server at 1536 clients
    fds = DEFAULT.needs(DEFAULT.section(), 1536).open_files
    found = [
        *(c for family in REGISTRY.values() for c in family.doctor_checks()),
        *server_checks.allocator_checks(),
        *server_checks.system_checks(fds),
    ]
    for c in found:
        out.append(Check(c.name, c.ok, c.detail, c.fix or ""))
    out.append(_taskstats_check())
    out.extend(_perf_checks())
    out.extend(_fetched_servers())
    out.extend(_thp_checks())
    out.extend(_leftover_servers([runs]))
    out.extend(_stale_prepare())
    return out


def run(args) -> int:
    if args.repair:
        rec = thp.restore_leftover()
        if rec is None:
            print("nothing to repair: no run left THP or huge pages changed")
        else:
            print(thp.restored_text(rec))
        return 0
    found = checks(Path(args.runs))
    if args.json:
        print(json.dumps([asdict(c) for c in found], indent=2))
    else:
        t = Table(title=f"mallocsweep doctor (uid {os.getuid()})")
        for col in ("check", "", "detail", "what to do"):
            t.add_column(col, overflow="fold")  # paths are wrapped, never cut
        for c in found:
            t.add_row(
                escape(c.name),
                "[green]ok[/green]" if c.ok else "[red]no[/red]",
                escape(c.detail or ""),
                escape(c.fix or ""),
            )
        stdout_console().print(t)
    return 0
