"""Our Python load clients' level, run on a client host (the host side of suites.workloads.pylevel).

    python -m suites.workloads.level_agent WORK.json     one level; records on stdout
    python -m suites.workloads.level_agent --version     {"version", "digest"} of this install

The work file (written by the runner over SSH, mode 600: it holds the level's account password)
names the workload, the target (the server over TCP) and the level's spec. The level runs here
exactly as it would on the server's machine (its clients are processes of this host, started by
suites.workloads.client_procs), and what the runner needs comes back as JSON lines on stdout:
{"type": "interval", "t_s", "tps", "qps"} as each report happens, then {"type": "result"} with
the LevelResult. The level's own log follows on stderr when it is over.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from suites.remote.identity import identity


def _emit(rec: dict) -> None:
    sys.stdout.write(json.dumps(rec) + "\n")
    sys.stdout.flush()


def run(work_path: Path) -> int:
    from suites.target import ClientTarget

    work = json.loads(work_path.read_text(encoding="utf-8"))
    target = ClientTarget(**work["target"])
    log = Path(work["log"])
    if work["kind"] != "iibench":
        print(f"level_agent: unknown workload {work['kind']!r}", file=sys.stderr)
        return 2
    from suites.workloads.iibench.run_level import run_level
    from suites.workloads.iibench.spec import IIBenchSpec

    spec = IIBenchSpec(**work["spec"])

    def on_interval(t_s: float, tps: float, qps: float) -> None:
        _emit({"type": "interval", "t_s": t_s, "tps": tps, "qps": qps})

    res = run_level(target, spec, log, on_interval=on_interval)
    out = res.to_json()
    out["raw_log"] = None
    _emit({"type": "result", "result": out})
    for p in (log, log.with_name(log.name + ".clients.stderr")):
        if p.exists():
            sys.stderr.write(p.read_text(errors="replace"))
    return 0


def main(argv: list[str]) -> int:
    if argv == ["--version"]:
        print(json.dumps(identity()))
        return 0
    if len(argv) != 1:
        print(
            "usage: python -m suites.workloads.level_agent WORK.json | --version", file=sys.stderr
        )
        return 2
    return run(Path(argv[0]))


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
