"""Suite files: every setting declared once, with its help and default; bad values stop the run.

A suite is a TOML file (see configs/suites/template.toml, which lists every setting). Validation is
strict: unknown keys are errors (with a "did you mean"), wrong types and out-of-range values are
errors, nothing is silently clamped. Every error names the file, the line where it can be found, the
field, and the expected form — as one line, via SuiteError.

The Suite model is assembled here from the core sections (suites/config/sections.py) and the
sections each workload plugin declares (suites/workloads/); the rules across sections that depend
on the workload or the server family are the plugins' hooks, called from here in a fixed order.
"""

from __future__ import annotations

import hashlib
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model, model_validator

from rundir.format import AA_SUFFIX
from rundir.integrity import why_unreachable
from servers.allocators import custom_allocator, load_registry
from servers.errors import AllocatorError
from suites.config.errors import (
    FieldError,
    did_you_mean,
    first_error,
    format_loc,
    models_of,
    one_line,
    reason,
)
from suites.config.errors import describe as describe_error
from suites.config.sections import (
    MAX_REPEAT,
    AllocatorsSection,
    ClientsSection,
    CollectSection,
    CustomAllocator,
    MemorySection,
    RunSection,
    ThpSection,
)
from suites.config.sections import SuiteInfo as _SuiteInfo
from suites.config.settings import OWN_CONNECTIONS, Section, mycnf_int
from suites.errors import SuiteError
from suites.families.registry import (
    family_for,
    section_models,
    server_entries,
    server_section,
)
from suites.workloads import registry as workloads


class SuiteInfo(_SuiteInfo):
    # The kinds and their help come from the workload plugins, in the order they are registered.
    kind: Literal[tuple(workloads.REGISTRY)] = Field(  # type: ignore[valid-type]
        next(iter(workloads.REGISTRY)),
        description="; ".join(f"{k}: {w.summary}" for k, w in workloads.REGISTRY.items()) + ".",
    )


__all__ = [
    "MAX_REPEAT",
    "CustomAllocator",
    "LoadedSuite",
    "Suite",
    "SuiteInfo",
    "load_suite",
    "mycnf_int",
    "parse_suite",
    "suite_from_dict",
    "template_settings",
]


class _SuiteRules(Section):
    """The rules across sections, in the order they are checked (the first broken one is the
    error shown). The sections are the fields of Suite, below."""

    @model_validator(mode="after")
    def _churn(self):
        if self.memory.churn_cycles and not workloads.of(self).churns:
            raise FieldError(
                ("memory", "churn_cycles"),
                f"thread churn cycles sysbench thread levels; this suite's kind is "
                f"{self.suite.kind!r}",
            )
        return self

    @model_validator(mode="after")
    def _server(self):
        # The workload first (can it run on this family at all?), then what the family refuses;
        # for every server of a run with several (suites.config.server_entries), at its entry.
        workload = workloads.of(self)
        entries = server_entries(self)
        for name, server in entries:
            family = family_for(server)
            try:
                workload.check_family(self, family)
                family.check_suite(self, server)
                if any(self.thp.large_pages) and family.no_large_pages:
                    raise FieldError(
                        ("thp", "large_pages"), f"{family.name}: {family.no_large_pages}"
                    )
            except FieldError as e:
                if len(entries) == 1:
                    raise
                raise FieldError(
                    ("server", "servers", name),
                    f"server {name!r} is {family.summary} ({server.flavor}): {e}",
                    e.value,
                ) from None
        return self

    @model_validator(mode="after")
    def _allocators(self):
        # Names and custom entries are checked against configs/allocators.toml here, with the file
        # and line; whether an allocator is installed is the runner's question (it detects them).
        try:
            registry = load_registry()
        except AllocatorError as e:
            raise FieldError(("allocators",), str(e)) from None
        for i, c in enumerate(self.allocators.custom):
            try:
                custom_allocator(c.model_dump(), known=registry)
            except AllocatorError as e:
                raise FieldError(("allocators", "custom", i), str(e)) from None
        names = [c.name for c in self.allocators.custom]
        if len(set(names)) != len(names):
            dup = next(n for n in names if names.count(n) > 1)
            raise FieldError(("allocators", "custom"), f"custom allocator {dup!r} is defined twice")
        known = ["all", *registry, *names]
        if self.run.baseline == "all":
            raise FieldError(
                ("run", "baseline"),
                "'all' is every allocator, not one: name the allocator every verdict compares "
                "with (e.g. glibc)",
            )
        if self.run.baseline not in known:
            one = [*registry, *names]
            raise FieldError(
                ("run", "baseline"),
                f"unknown allocator {self.run.baseline!r}{did_you_mean(self.run.baseline, one)}",
            )
        use = self.allocators.use
        default = RunSection.model_fields["baseline"].default
        if "all" not in use and self.run.baseline != default and self.run.baseline not in use:
            # (the default, glibc, may be left out: then the run has no verdicts and says so)
            raise FieldError(
                ("run", "baseline"),
                f"{self.run.baseline!r} is not one of the allocators this suite runs "
                f"({', '.join(use)}); add it to allocators.use or choose one of them",
            )
        if self.run.aa:
            # The A/A arm is a name of its own in every table: nothing else may have it.
            arm = self.run.baseline + AA_SUFFIX
            if arm in names:
                raise FieldError(
                    ("allocators", "custom", names.index(arm), "name"),
                    f"custom allocator {arm!r} has the name of the A/A arm that run.aa = true adds "
                    f"(the baseline {self.run.baseline!r} run again as {arm!r}); rename the custom "
                    "allocator",
                )
            if arm in registry:
                raise FieldError(
                    ("run", "aa"),
                    f"the A/A arm of the baseline {self.run.baseline!r} would be named {arm!r}, "
                    f"which configs/allocators.toml already defines ([allocator.{arm}]); choose "
                    "another baseline or set run.aa = false",
                )
        for name in self.allocators.use:
            if name not in known:
                raise FieldError(
                    ("allocators", "use"),
                    f"unknown allocator {name!r}{did_you_mean(name, known)}; known: "
                    + ", ".join(known),
                )
        return self

    @model_validator(mode="after")
    def _client_hosts(self):
        mysql = all(family_for(server).mysql_compatible for _, server in server_entries(self))
        if self.clients.hosts and not (workloads.of(self).remote_clients and mysql):
            raise FieldError(
                ("clients", "hosts"),
                "client hosts run sysbench and iibench levels on MySQL-family servers only in "
                "this version",
            )
        hosts = len(self.clients.hosts)
        workload = workloads.of(self)
        if hosts > 1 and not workload.remote_split:
            raise FieldError(
                ("clients", "hosts"),
                f"{hosts} client hosts: a {workload.kind} level runs on one client host in "
                "this version (sysbench levels can be split over several)",
            )
        if hosts > 1 and workload.min_clients(self) < hosts:
            loc, what = workload.clients_field
            raise FieldError(
                loc,
                f"{what} {workload.min_clients(self)} is below the {hosts} client hosts it is "
                "split over (every host runs at least one thread)",
            )
        return self

    @model_validator(mode="after")
    def _connections(self):
        workload = workloads.of(self)
        for _, server in server_entries(self):
            limit = family_for(server).connection_limit(server)
            clients = workload.max_clients(self)
            if limit is not None and clients > limit - OWN_CONNECTIONS:
                loc, what = workload.clients_field
                raise FieldError(
                    loc,
                    f"{what} {clients} is above the server's connection limit "
                    f"(server.settings.max_connections = {limit}, of which {OWN_CONNECTIONS} are "
                    "kept for our own monitoring); raise max_connections or drop the setting to "
                    "size it automatically",
                )
        return self

    @model_validator(mode="after")
    def _design(self):
        # "alternate" keeps every arm of a round alive and runs each level in blocks on them in
        # turn (suites/runner/alternate.py): what that needs of the rest of the suite.
        if self.run.design != "alternate":
            if self.run.block_settle_cap_s:
                raise FieldError(
                    ("run", "block_settle_cap_s"),
                    "blocks settle in design alternate only; a solo level settles by "
                    "[sysbench] settle_cap_s",
                    self.run.block_settle_cap_s,
                )
            return self
        why = None
        if not workloads.of(self).alternates:
            why = f"its levels run in blocks for sysbench suites only; this suite's kind is {self.suite.kind!r}"
        elif self.memory.churn_cycles:
            why = "thread churn's cycles are one life's own sequence; use design solo with churn_cycles"
        elif self.clients.hosts:
            why = "levels on client hosts run whole; use design solo with [clients] hosts"
        elif self.thp.labels() != ["system"]:
            why = (
                "a hugepage setting changes the whole machine for one cell, and alternate keeps "
                'several cells alive at once; use thp.modes = ["system"] or design solo (--design solo)'
            )
        if why:
            raise FieldError(("run", "design"), f"alternate: {why}", "alternate")
        interval = self.sysbench.report_interval_s
        if self.run.block_s < 3 * interval:
            raise FieldError(
                ("run", "block_s"),
                f"block_s ({self.run.block_s}) is shorter than 3 x sysbench.report_interval_s "
                f"({3 * interval:g} s): a block's first report is its ramp, and its rate needs "
                "the reports after it",
                self.run.block_s,
            )
        return self

    @model_validator(mode="after")
    def _limits(self):
        # Every server's family (one run may hold MariaDB and MySQL: each its own limits).
        for family in dict.fromkeys(family_for(s) for _, s in server_entries(self)):
            workloads.of(self).check_limits(self, family)
        return self

    @property
    def max_threads(self) -> int:
        """Client connections the largest level opens at once."""
        return workloads.of(self).max_clients(self)

    def as_dict(self) -> dict[str, Any]:
        d = self.model_dump(mode="json")
        if not self.server.servers:
            # One server, as before [server] servers existed: recorded as runs always were.
            for key in ("servers", "baseline_server"):
                d["server"].pop(key, None)
        # Solo lives with the default blocks, as every run before designs existed: recorded as
        # runs always were (--resume and compare of older runs see no difference).
        for key in ("design", "block_s", "blocks", "block_settle_cap_s"):
            if d["run"].get(key) == RunSection.model_fields[key].default:
                d["run"].pop(key, None)
        if self.clients == ClientsSection():
            # Clients on this machine, as before [clients] existed: recorded as runs always were,
            # so --resume and compare see no difference with runs written before it.
            d.pop("clients")
        return d


def _sections() -> dict[str, type[BaseModel]]:
    """Every section of a suite file, in the template's order: what it is and where it runs, the
    workloads' own sections (in the order they are registered), then collection and the run."""
    head = {
        "suite": SuiteInfo,
        "server": server_section(),
        "allocators": AllocatorsSection,
        "thp": ThpSection,
    }
    tail = {
        "collect": CollectSection,
        "clients": ClientsSection,
        "memory": MemorySection,
        "run": RunSection,
    }
    out: dict = dict(head)
    for w in workloads.REGISTRY.values():
        for name, model in w.sections.items():
            if name in out or name in tail:
                # a programming error of the plugin's: two owners for one table of the file
                raise RuntimeError(f"workload {w.kind!r} declares [{name}], which is taken")
            out[name] = model
    return {**out, **tail}


def _default(name: str, model) -> Field:
    # [server]'s default is the default family's section (suites.families.registry)
    return Field(default_factory=models_of(model)[0] if name == "server" else model)


Suite = create_model(
    "Suite",
    __base__=_SuiteRules,
    __module__=__name__,
    **{name: (model, _default(name, model)) for name, model in _sections().items()},
)
Suite.__doc__ = "A whole suite file: every section, each with its defaults."


class LoadedSuite(BaseModel):
    """A validated suite with where it came from."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)
    path: str
    sha256: str
    suite: Suite


def parse_suite(text: str, path: str = "<suite>", base_dir: str | Path | None = None) -> Suite:
    """Validate suite TOML text; SuiteError with file:line, field and expected form on any error.

    Relative paths in it (server.binary, server.basedir, allocators.custom.library) are taken from
    `base_dir`, by default the directory of `path`.
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise SuiteError(one_line(f"{path}: not valid TOML: {e}")) from None
    except RecursionError:
        raise SuiteError(one_line(f"{path}: not valid TOML: nested too deeply")) from None
    base = Path(base_dir) if base_dir is not None else Path(path).parent
    try:
        return Suite.model_validate(data, context={"base_dir": base})
    except ValidationError as e:
        raise SuiteError(
            first_error(e, lambda err: describe_error(err, text, path, Suite))
        ) from None


def suite_from_dict(data: Any, where: str) -> Suite:
    """A suite recorded as a dict (a run's manifest), validated like a file; `where` names it."""
    try:
        return Suite.model_validate(data)
    except ValidationError as e:
        raise SuiteError(
            first_error(e, lambda err: f"{where}: {format_loc(reason(err)[0])}: {reason(err)[1]}")
        ) from None


def load_suite(path: str | Path) -> LoadedSuite:
    p = Path(path)
    if not p.exists():
        why = why_unreachable(p, "file") or (
            "no such suite file (the shipped suites are in configs/suites/)"
        )
        raise SuiteError(one_line(f"{p}: {why}"))
    if not p.is_file():
        raise SuiteError(one_line(f"{p}: not a file"))
    try:
        raw = p.read_bytes()
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise SuiteError(one_line(f"{p}: not UTF-8 text")) from None
    except OSError as e:
        raise SuiteError(one_line(f"{p}: cannot read: {e.strerror}")) from None
    suite = parse_suite(text, str(p))
    require_workload(tomllib.loads(text), str(p))
    return LoadedSuite(path=str(p), sha256=hashlib.sha256(raw).hexdigest(), suite=suite)


def require_workload(data: dict, path: str) -> None:
    """A suite FILE must say what to run: an empty file, or one without the section of its kind
    ([sysbench], [iibench], [rww]), would otherwise run the default matrix (seven 30 s levels per
    allocator: hours) that nobody asked for."""
    if not data:
        raise SuiteError(
            f"{path}: empty suite file; copy one from configs/suites/ (template.toml lists every "
            "setting)"
        )
    default = SuiteInfo.model_fields["kind"].default
    info = data.get("suite")
    kind = info.get("kind", default) if isinstance(info, dict) else default
    if not isinstance(data.get(kind), dict):
        raise SuiteError(
            f"{path}: no [{kind}] section: the suite names no workload to run; add one "
            "(configs/suites/template.toml shows its settings)"
        )


def template_settings() -> list[tuple[str, str, Any, str]]:
    """(section, key, default, help) for every setting, core, workload and family sections alike,
    from their declarations: configs/suites/template.toml is checked against it (tests/unit). A
    [server] key comes once, from the first family that declares it (registry order)."""
    out = []
    for section, field in Suite.model_fields.items():
        models = section_models() if section == "server" else models_of(field.annotation)
        seen: set[str] = set()
        for model in models:
            for key, f in model.model_fields.items():
                if key in seen:
                    continue
                seen.add(key)
                default = f.get_default(call_default_factory=True)
                out.append((section, key, default, f.description or ""))
    return out
