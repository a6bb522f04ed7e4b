"""CLI options over a suite file (`mallocsweep run SUITE --threads ... --duration ...`).

The result is validated like the file was; an error names the option. An option that sets a
workload's field (--threads, --duration) goes where that workload's plugin says
(suites.workloads.base.Workload.options), or stops with the plugin's reason.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from suites.config.errors import first_error, format_loc, reason
from suites.config.server_entries import SOURCE_KEYS, ServerEntryError, parse_option
from suites.errors import SuiteError
from suites.suite.model import Suite
from suites.workloads import registry as workloads


def apply_overrides(suite: Suite, **opts) -> Suite:
    """CLI options override the file; the result is validated like the file was, and an error
    names the option ("--duration 2.5: sysbench.duration_s: ...")."""
    data = suite.as_dict()
    workload = workloads.workload(data["suite"]["kind"])
    given: dict[str, tuple[str, Any]] = {}  # option -> (shown value, the fields it sets)

    def put(flag: str, value: Any, *fields: tuple[str, str]) -> None:
        shown = ",".join(map(str, value)) if isinstance(value, list) else str(value)
        given[flag] = (shown, fields)

    def workload_option(opt: str) -> None:
        # The workload says which of its fields the option sets, or why it does not apply.
        flag = "--" + opt
        field = workload.options.get(opt)
        if isinstance(field, str):
            raise SuiteError(field)
        if field is None:
            raise SuiteError(f"{flag} does not apply to {workload.kind} suites")
        data[field[0]][field[1]] = opts[opt]
        put(flag, opts[opt], field)

    if opts.get("allocators") is not None:
        data["allocators"]["use"] = opts["allocators"]
        put("--allocators", opts["allocators"], ("allocators", "use"))
    if opts.get("threads") is not None:
        workload_option("threads")
    if opts.get("engines") is not None:
        data["server"]["engines"] = opts["engines"]
        put("--engines", opts["engines"], ("server", "engines"))
    if opts.get("duration") is not None:
        workload_option("duration")
    if opts.get("soak") is not None:
        workload_option("soak")
        if opts.get("repeat") is None:
            # a soak is one life per arm: the suite's rounds are for its runs without --soak
            data["run"]["repeat"] = 1
    if opts.get("scenarios") is not None:
        workload_option("scenarios")
    if opts.get("warmup") is not None:
        data["warmup"]["cap_s"] = opts["warmup"]
        data["warmup"]["min_s"] = min(data["warmup"]["min_s"], opts["warmup"])
        put("--warmup", opts["warmup"], ("warmup", "cap_s"), ("warmup", "min_s"))
    if opts.get("repeat") is not None:
        data["run"]["repeat"] = opts["repeat"]
        put("--repeat", opts["repeat"], ("run", "repeat"))
    if opts.get("thp") is not None:
        data["thp"]["modes"] = opts["thp"]
        put("--thp", opts["thp"], ("thp", "modes"))
    if opts.get("server") is not None and opts.get("servers") is not None:
        raise SuiteError(
            f"--server {opts['server']} with --servers: give one server (--server) or several "
            "(--servers NAME=SPEC,...), not both"
        )
    if opts.get("servers") is not None:
        try:
            entries = parse_option(opts["servers"])
        except ServerEntryError as e:
            raise SuiteError(str(e)) from None
        data["server"]["servers"] = entries
        for key in SOURCE_KEYS:  # the servers say where each comes from
            if key in data["server"]:
                data["server"][key] = ""
        data["server"]["baseline_server"] = ""
        put("--servers", opts["servers"], ("server", "servers"))
    if opts.get("server") is not None:
        # One server: the suite's list of servers (if any) is replaced by it.
        data["server"].pop("servers", None)
        data["server"].pop("baseline_server", None)
        if not opts["server"].strip():
            raise SuiteError(
                f"--server {opts['server']!r}: empty; give a server binary (a name on PATH or a "
                "path) or fetched:SPEC, or leave --server out for the suite's server"
            )
        if opts["server"].startswith("fetched:") and not opts["server"][8:].strip():
            raise SuiteError(
                f"--server {opts['server']!r}: no SPEC after 'fetched:' (e.g. fetched:mysql-9.7.4;"
                " `mallocsweep servers list` shows what is fetched)"
            )
        if opts["server"].startswith("fetched:"):  # --server fetched:SPEC
            data["server"]["fetched"] = opts["server"].removeprefix("fetched:")
            data["server"]["binary"] = data["server"]["basedir"] = ""
            put("--server", opts["server"], ("server", "fetched"))
        else:
            data["server"].pop("fetched", None)
            data["server"]["binary"] = opts["server"]
            put("--server", opts["server"], ("server", "binary"))
    for opt, key in (
        ("budget", "budget_s"),
        ("baseline", "baseline"),
        ("min_effect", "min_effect_pct"),
        ("design", "design"),
    ):
        if opts.get(opt) is not None:
            data["run"][key] = opts[opt]
            put("--" + opt.replace("_", "-"), opts[opt], ("run", key))
    if opts.get("design") == "solo":
        # the file's block settings belong to the design replaced: a solo level settles by its
        # workload's own cap (the quick suite ships alternate with blocks that settle)
        data["run"]["block_settle_cap_s"] = 0
    if opts.get("duration") is not None and data["run"].get("design") == "alternate":
        # under alternate a level runs in blocks of block_s seconds; --duration sets them, or it
        # would change nothing
        data["run"]["block_s"] = opts["duration"]
        shown, fields = given["--duration"]
        given["--duration"] = (shown, (*fields, ("run", "block_s")))
    if opts.get("baseline_server") is not None:
        data["server"]["baseline_server"] = opts["baseline_server"]
        put("--baseline-server", opts["baseline_server"], ("server", "baseline_server"))
    if opts.get("server_root") is not None:
        data["server"]["root"] = opts["server_root"]
        put("--server-root", opts["server_root"], ("server", "root"))
    if opts.get("client_host") is not None:
        data.setdefault("clients", {})["hosts"] = [opts["client_host"]]
        put("--client-host", opts["client_host"], ("clients", "hosts"))
    if opts.get("out") is not None:
        data["run"]["out"] = opts["out"]
        put("--out", opts["out"], ("run", "out"))

    def describe(err: dict) -> str:
        loc, msg = reason(err)
        field = format_loc(loc)
        for flag, (shown, fields) in given.items():
            if any(tuple(loc[:2]) == f for f in fields):
                if len(fields) > 1:  # e.g. --warmup sets cap_s and min_s: name what was given
                    return f"{flag} {shown}: {msg}"
                return f"{flag} {shown}: {field}: {msg}"
        return f"with {' '.join(f'{k} {v}' for k, (v, _) in given.items())}: {field}: {msg}"

    try:
        # Paths given on the command line are relative to where the command runs; the file's were
        # made absolute when it was loaded.
        suite = Suite.model_validate(
            data, context={"base_dir": Path.cwd(), "base_name": "the current directory"}
        )
    except ValidationError as e:
        raise SuiteError(first_error(e, describe)) from None
    baseline, use = opts.get("baseline"), suite.allocators.use
    if baseline is not None and "all" not in use and baseline not in use:
        # Named on the command line, the baseline must be one of the run's arms (the file's
        # default, glibc, may be absent: the run then says it has no verdicts).
        raise SuiteError(
            f"--baseline {baseline}: not one of this run's allocators ({', '.join(use)}); add it "
            "to --allocators or choose one of them"
        )
    return suite
