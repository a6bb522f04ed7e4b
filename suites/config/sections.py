"""The core sections of a suite file: what it is, the server's common settings, allocators, THP,
collection, client hosts, memory phases and the run. A workload's own sections ([sysbench],
[iibench], [rww], ...) are declared by its plugin in suites/workloads/, a server family's [server]
settings by its plugin in suites/families/; suites/suite/model.py assembles them into Suite. This
module imports no plugin registry: the plugins build on it, and the [suite] kind's choices are
narrowed to the registered workloads where the Suite is assembled (suites.suite.model.SuiteInfo).
"""

from __future__ import annotations

import os
import re
from typing import Annotated, Literal

from pydantic import (
    Field,
    PositiveFloat,
    ValidationInfo,
    field_validator,
    model_validator,
)

from rundir.format import DEFAULT_MIN_EFFECT_PCT
from suites.config.errors import LINE_BREAKS, FieldError
from suites.config.hugepage_settings import (
    DEFRAG_MODES,
    PROFILES,
    THP_MODES,
    HugepageSetting,
    settings_of,
)
from suites.config.server_entries import (
    SOURCE_KEYS,
    SPEC_HELP,
    ServerEntry,
    ServerEntryError,
    check_entries,
    normalize,
)
from suites.config.settings import (
    NonNegFloat,
    Section,
    control_character,
    existing,
    server_binary,
)

DefragChoice = Literal[("system", *DEFRAG_MODES)]  # type: ignore[valid-type]

# Each round runs the whole matrix again; the plan lists every cell up front.
MAX_REPEAT = 1000


class SuiteInfo(Section):
    """[suite]. Its `kind` is any name here; suites.suite.model narrows it to the registered
    workloads' kinds (and their help), which this module cannot know without importing them."""

    name: str = Field("suite", description="Names the run directory; letters, digits, - and _.")
    description: str = Field("", description="One line shown in the report.")
    kind: str = Field("sysbench", description="The workload this suite runs.")

    @field_validator("description")
    @classmethod
    def _description(cls, v: str) -> str:
        if LINE_BREAKS.search(v):
            raise ValueError("expected one line")
        return v

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", v):
            raise ValueError(
                "expected 1-64 letters, digits, '.', '-' or '_', starting with a letter or digit"
            )
        return v


class ServerSection(Section):
    """What every server family's [server] section has. Each family's own section
    (suites/families/: Family.section) subclasses this with its settings and narrows
    `flavor` to its flavors; the suite's [server] is validated by the section of the family its
    flavor names (suites.families.registry.server_section), so no family reads another's settings."""

    flavor: str = Field(
        "mariadb", description="Server family; MySQL-family flavors are detected from --version."
    )
    root: str = Field(
        "",
        description="A server root: a directory holding another release's files (debootstrap, "
        "a container's filesystem); the server runs in it under chroot, on its libraries and "
        "allocators. `binary` is then a path inside it (default /usr/sbin/mariadbd or mysqld).",
    )
    binary: str = Field(
        "",
        description="Server binary (mariadbd, mysqld, mongod); empty = default. A path is taken "
        "relative to the suite file's directory and must exist; a bare name is looked up on PATH.",
    )
    startup_timeout_s: PositiveFloat = Field(
        180, description="How long a server may take to accept connections."
    )
    servers: list[ServerEntry] = Field(
        default_factory=list,
        description="Several servers in one run (an upgrade check), interleaved and paired by "
        'round like the allocators: { old = "fetched:mariadb-10.11.18", new = "host" } (--servers '
        f"old=...,new=...). Each is {SPEC_HELP}; the other [server] settings apply to every one. "
        "Empty: the one server binary/basedir/root/fetched name.",
    )
    baseline_server: str = Field(
        "",
        description="The server of `servers` every other is compared with (--baseline-server); "
        "empty: the first.",
    )

    @field_validator("servers", mode="before")
    @classmethod
    def _servers_form(cls, v):
        try:
            return normalize(v)
        except ServerEntryError as e:
            raise ValueError(str(e)) from None

    @field_validator("servers")
    @classmethod
    def _servers(cls, v: list[ServerEntry]) -> list[ServerEntry]:
        try:
            check_entries(v)
        except ServerEntryError as e:
            raise ValueError(str(e)) from None
        return v

    @model_validator(mode="after")
    def _servers_or_one(self):
        if not self.servers:
            if self.baseline_server:
                raise FieldError(
                    ("server", "baseline_server"),
                    "names a server of server.servers, which lists none",
                    self.baseline_server,
                )
            return self
        for key in SOURCE_KEYS:
            if getattr(self, key, ""):
                raise FieldError(
                    ("server", key),
                    "with server.servers, each server says where it comes from (NAME = SPEC); "
                    f"leave server.{key} empty",
                    getattr(self, key),
                )
        names = [e.name for e in self.servers]
        if self.baseline_server and self.baseline_server not in names:
            raise FieldError(
                ("server", "baseline_server"),
                f"not one of the servers ({', '.join(n or '(unnamed)' for n in names)})",
                self.baseline_server,
            )
        return self

    @property
    def baseline_name(self) -> str:
        """The baseline server's name: baseline_server, else the first entry's ("" for one)."""
        return self.baseline_server or (self.servers[0].name if self.servers else "")

    @field_validator("binary")
    @classmethod
    def _binary(cls, v: str, info: ValidationInfo) -> str:
        return server_binary(v, info, bool(info.data.get("root")))

    @field_validator("root")
    @classmethod
    def _root(cls, v: str, info: ValidationInfo) -> str:
        return existing(v, info, "directory") if v else v


class CustomAllocator(Section):
    name: str = Field(description="Name used in tables and --allocators.")
    library: str = Field(
        description="The allocator's shared object, preloaded: an absolute path or one relative "
        "to the suite file's directory; it must exist."
    )
    env: dict[str, str] = Field(
        default_factory=dict, description="Extra environment for the server."
    )
    tunables: list[str] = Field(default_factory=list, description="GLIBC_TUNABLES items, appended.")
    description: str = Field("", description="One line shown by `mallocsweep allocators`.")
    companions: list[str] = Field(
        default_factory=list,
        description="Allocator libraries that `library` loads itself (a proxy like TBB's), which "
        "may be mapped beside it: absolute paths or relative to the suite file's directory; they "
        "must exist. Any other allocator library in the server fails verification.",
    )

    @field_validator("library")
    @classmethod
    def _library(cls, v: str, info: ValidationInfo) -> str:
        # Preloading is always by absolute path (never resolved by the loader's search path).
        if not v:
            raise ValueError("expected the path of a shared object")
        return existing(v, info, "file")

    @field_validator("companions")
    @classmethod
    def _companions(cls, v: list[str], info: ValidationInfo) -> list[str]:
        out = []
        for item in v:
            if not item:
                raise ValueError("expected paths of shared objects, got an empty string")
            out.append(existing(item, info, "file"))
        return out


class AllocatorsSection(Section):
    use: list[str] = Field(
        default_factory=lambda: ["all"],
        description='Allocator names from configs/allocators.toml, "all" for every usable core one.',
    )
    custom: list[CustomAllocator] = Field(default_factory=list, description="Your own allocators.")

    @field_validator("use")
    @classmethod
    def _use(cls, v: list[str]) -> list[str]:
        if not v:
            raise ValueError("expected at least one allocator name")
        if not all(str(x).strip() for x in v):
            raise ValueError(f"an empty allocator name in {v}")
        if len(set(v)) != len(v):
            raise ValueError(f"duplicate allocator names in {v}")
        return v


class ThpSection(Section):
    """Hugepage settings as one matrix dimension (suites.config.hugepage_settings): each combination of
    modes x defrag x max_ptes_none x large_pages is one setting, labelled in the `thp` column."""

    modes: list[Literal[THP_MODES + tuple(PROFILES)]] = Field(  # type: ignore[valid-type]
        default_factory=lambda: ["system"],
        description="THP modes as a matrix dimension; system = leave the machine's setting alone; "
        "a profile name sets all three of enabled/defrag/max_ptes_none as documented "
        f"({', '.join(f'{k}: {v[0]}/{v[1]}/{v[2]}' for k, v in PROFILES.items())}).",
    )

    defrag: DefragChoice | list[DefragChoice] = Field(
        "system",
        description="THP defrag policy while a THP mode is in force (MongoDB 8 wants defer+madvise); "
        "a list makes it a matrix dimension.",
    )

    max_ptes_none: list[Annotated[int, Field(ge=0)]] = Field(
        default_factory=list,
        description="khugepaged's max_ptes_none while THP always/madvise is in force (0 = collapse "
        "only fully used ranges; the kernel's default is 511 with 4 kB pages); several values make "
        "it a matrix dimension; empty = leave the machine's.",
    )

    large_pages: list[bool] = Field(
        default_factory=lambda: [False],
        description="The buffer pool on explicit huge pages (MariaDB large_pages=1, MySQL "
        "--large-pages): [false, true] makes it a matrix dimension. Each such cell reserves "
        "vm.nr_hugepages for it and gives them back after (needs root), and proves from "
        "/proc/PID/smaps that the pool is on hugetlb pages.",
    )

    large_pages_reserve: bool = Field(
        True,
        description="true: reserve the huge pages a large-pages cell needs (vm.nr_hugepages up by "
        "that many) and give them back after it; false: use huge pages already reserved on the "
        "machine (HugePages_Free must hold them, checked before the run).",
    )

    keep_server_thp: bool = Field(
        False,
        description="EXPERIMENT: preload a shim that ignores the server's prctl(PR_SET_THP_DISABLE), "
        "so the system THP mode reaches its heap (MariaDB turns THP off for itself).",
    )

    @field_validator("modes")
    @classmethod
    def _modes(cls, v: list[str]) -> list[str]:
        if not v:
            raise ValueError("expected at least one mode")
        if len(set(v)) != len(v):
            raise ValueError(f"duplicate modes in {v}")
        return v

    @field_validator("defrag", "max_ptes_none", "large_pages")
    @classmethod
    def _dimension(cls, v, info: ValidationInfo):
        if isinstance(v, list):
            if not v and info.field_name != "max_ptes_none":  # [] there: leave it alone
                raise ValueError("expected at least one value (or leave the key out)")
            if len(set(v)) != len(v):
                raise ValueError(f"duplicate values in {v}")
        return v

    def settings(self) -> list[HugepageSetting]:
        """Every hugepage setting this section makes (one per cell of each round)."""
        return settings_of(self.modes, self.defrag, self.max_ptes_none, self.large_pages)

    def labels(self) -> list[str]:
        return [s.label for s in self.settings()]


class CollectSection(Section):
    sample_interval_s: float = Field(
        1.0,
        ge=0.1,
        description="Timeline sampling period, >= 0.1 s: a sample reads /proc for every server "
        "thread (~40 ms at 1500 threads), so a shorter period measures the sampler, not the server.",
    )
    smaps_interval_s: NonNegFloat = Field(
        30,
        description="smaps_rollup (AnonHugePages) period; 0 = phase boundaries only, else >= 1 s "
        "and >= sample_interval_s: each read walks the server's page tables under its mmap lock "
        "(129 ms on 12 GB of 4 KB pages) and can stall it.",
    )
    perf: bool = Field(
        True,
        description="Allow the perf fallback for whole-process context switches when taskstats "
        "(the default source: kernel counters read over netlink, root only) is unavailable. perf "
        "counters follow every server thread and cost it throughput (15% of POINT_SELECT QPS at "
        "64 threads in one measurement; `make bench` measures it); false falls back straight to "
        "/proc, which loses exited threads.",
    )

    @model_validator(mode="after")
    def _smaps(self):
        floor = max(1.0, self.sample_interval_s)
        if self.smaps_interval_s and self.smaps_interval_s < floor:
            raise FieldError(
                ("collect", "smaps_interval_s"),
                f"expected 0 (phase boundaries only) or at least {floor:g} s (1 s and "
                "sample_interval_s): each read walks the server's page tables",
            )
        return self


class MemorySection(Section):
    alloc_stats: bool = Field(
        True,
        description="Read the allocator's own accounting (in use, cached, mapped) at every phase "
        "boundary through a small library preloaded after the allocator (servers/shims/"
        "alloc_stats.c); it waits on a FIFO between readings and costs nothing then. MySQL family.",
    )
    count_calls: bool = Field(
        True,
        description="Count the server's calls into its allocator (the malloc family and C++ "
        "operator new/delete, and bytes asked) with a library preloaded ahead of the allocator "
        "that forwards every call to it (servers/shims/alloc_count.c), read with alloc_stats' "
        "readings (so it needs alloc_stats): the calls per query in results.csv and the report's "
        "exposure words. Its cost is measured by make bench. MySQL family.",
    )
    parts: bool = Field(
        True,
        description="Take RSS apart by mapping at every phase boundary (buffer pool, thread "
        "stacks, files, the heap; collectors/smaps.py), from the one read of /proc/PID/smaps a "
        "boundary makes anyway (for the hugepage figures), never while a level runs. MySQL "
        "and Percona then run with core-file and innodb_buffer_pool_in_core_file=OFF, which "
        "marks their buffer pool's mapping.",
    )
    idle_s: NonNegFloat = Field(
        0,
        description="An idle phase after the last level, in seconds (0 = none): no client runs "
        "while RSS and the allocator's figures are sampled, to show what it gives back and how "
        "fast (jemalloc decay, tcmalloc release, glibc trim).",
    )
    idle_sample_s: float = Field(
        2.0,
        ge=0.5,
        description="Allocator readings during the idle phase every this many seconds (>= 0.5).",
    )
    churn_cycles: Annotated[int, Field(ge=0, le=100)] = Field(
        0,
        description="Thread churn (0 = off): run the sysbench thread levels, in the order given "
        "(e.g. [8, 1536]), this many times per thread_cache_size in churn_thread_cache, then one "
        "last level at the first thread count: clients connect and leave in cycles, and RSS per "
        "cycle shows what the allocator keeps of the threads that left.",
    )
    churn_thread_cache: list[Annotated[int, Field(ge=0, le=16384)]] = Field(
        default_factory=list,
        description="thread_cache_size values (SET GLOBAL, in this order) the churn cycles run "
        "under; small lets server threads really exit and start. Empty: the server's own "
        "(thread_cache_size at the top thread level).",
    )

    @model_validator(mode="after")
    def _churn(self):
        if self.churn_thread_cache and not self.churn_cycles:
            raise FieldError(
                ("memory", "churn_thread_cache"),
                "set churn_cycles too: thread cache sizes apply to churn cycles only",
            )
        return self


class RunSection(Section):
    repeat: Annotated[int, Field(ge=1, le=MAX_REPEAT)] = Field(
        1, description="Rounds of the whole matrix; allocator order alternates."
    )
    out: str = Field("runs", description="Directory under which run directories are created.")
    budget_s: NonNegFloat = Field(
        0,
        description="Time budget in seconds (--budget 20m). 0: exactly `repeat` rounds. Else "
        "`repeat` is the first look: after it, rounds are added while some verdict is undecided "
        "and the budget allows one more round; the 5% is spent over the planned looks "
        "(analysis/sequential.py), so adding rounds does not inflate false positives.",
    )
    baseline: str = Field(
        "glibc", description="The allocator every verdict compares with (--baseline NAME)."
    )
    min_effect_pct: Annotated[float, Field(gt=0, lt=100)] = Field(
        DEFAULT_MIN_EFFECT_PCT,
        description="Smallest difference called faster/slower, in % (--min-effect): a "
        "significant but smaller one is 'none'.",
    )
    aa: bool = Field(
        False,
        description="Run the baseline a second time per round under the name <baseline>-aa (same "
        "library and settings): an A/A pair that measures the noise floor of the run. It must "
        "never be called different; if it is, the run says the machine is too noisy.",
    )
    design: Literal["solo", "alternate"] = Field(
        "solo",
        description='How arms are compared (--design; docs/designs.md). "solo": each arm\'s '
        "server lives alone, one after the other, every level run whole (scaling curves, memory "
        'at stop, per-op CPU need the machine to themselves). "alternate": within a round every '
        "arm's server is started, proven and warmed and all stay alive; each level is run on "
        "them in turn in short blocks (block_s), the order rotated from cycle to cycle and from "
        "round to round, one arm loaded at a time, so the machine's drift falls on every arm "
        "alike; throughput verdicts come from the blocks (sysbench suites, THP mode system).",
    )
    block_s: Annotated[int, Field(ge=3, le=600)] = Field(
        5,
        description='"alternate": seconds of one block (whole seconds, sysbench --time; at '
        "least 3 report intervals: the first report is the block's ramp and is left out).",
    )
    blocks: Annotated[int, Field(ge=1, le=100)] = Field(
        4,
        description='"alternate": blocks per arm per level (cycles of the rotation); a level '
        "then takes arms x blocks x block_s seconds.",
    )
    block_settle_cap_s: Annotated[int, Field(ge=0, le=600)] = Field(
        0,
        description='"alternate": > 0 lets each block settle as a solo level does ([sysbench] '
        "settle_cap_s): it runs until block_s seconds of reports follow its ramp (the "
        "steady-state rule, applied live), at most block_s + block_settle_cap_s. A block at "
        "256 threads on a small machine is otherwise mostly ramp. 0: every block runs block_s.",
    )

    @field_validator("out")
    @classmethod
    def _out(cls, v: str) -> str:
        if not v.strip():
            raise ValueError('expected a directory (e.g. "runs")')
        bad = control_character(v)
        if bad:
            raise ValueError(f"{v!r} holds a control character ({bad}); give a plain path")
        if v.startswith("~"):
            # "~/runs" is the home directory's runs, never a directory named "~" here (which a
            # later `rm -rf ~` meant for it would take the home directory with)
            done = os.path.expanduser(v)
            if done.startswith("~"):
                raise ValueError(
                    f"cannot expand {v!r}: no such user here; give the path without '~'"
                )
            return done
        return v


_CLIENT_HOST = re.compile(r"^(?:[A-Za-z0-9._-]+@)?[A-Za-z0-9_][A-Za-z0-9._-]*$")


class ClientsSection(Section):
    hosts: list[str] = Field(
        default_factory=list,
        description='Client hosts ("user@host" or an ssh_config Host alias; --client-host): '
        "sysbench levels run there over SSH (key-based, BatchMode, one shared connection) "
        "against the server over TCP at server_address. Several hosts: each level's threads "
        "are split over them as evenly as possible (every host at least one thread) and they "
        "start together. Empty: clients run on this machine over the unix socket.",
    )
    server_address: str = Field(
        "",
        description="The address of this machine the server binds (only that one) and the "
        "client host connects to; required with hosts.",
    )
    ssh_config: str = Field(
        "",
        description="An ssh_config file for the client hosts (ssh -F; relative to the suite "
        "file's directory); empty: the user's own (~/.ssh/config).",
    )
    connect_timeout_s: PositiveFloat = Field(
        10, description="How long ssh may take to reach a client host before preflight fails."
    )
    python: str = Field(
        "",
        description="The Python of mallocsweep's install on the client hosts (e.g. "
        '"/opt/mallocsweep/bin/python"): iibench\'s clients are ours and run there with it; '
        "preflight checks it runs the same code as this machine. Empty: python3 on their PATH.",
    )

    @field_validator("hosts")
    @classmethod
    def _hosts(cls, v: list[str]) -> list[str]:
        for h in v:
            if not _CLIENT_HOST.match(h):
                raise ValueError(f'expected "user@host" or a host name, got {h!r}')
        if len(set(v)) != len(v):
            raise ValueError("a client host is named twice")
        return v

    @field_validator("server_address")
    @classmethod
    def _address(cls, v: str) -> str:
        if not v:
            return v
        import ipaddress

        try:
            addr = ipaddress.ip_address(v)
        except ValueError:
            raise ValueError(f"expected an IP address of this machine, got {v!r}") from None
        if addr.is_loopback or addr.is_unspecified:
            raise ValueError(
                f"{v} cannot be reached from another host; name an address of this machine's "
                "network interface"
            )
        return v

    @field_validator("ssh_config")
    @classmethod
    def _ssh_config(cls, v: str, info: ValidationInfo) -> str:
        return existing(v, info, "file") if v else v

    @model_validator(mode="after")
    def _needs_address(self):
        if self.hosts and not self.server_address:
            raise FieldError(
                ("clients", "server_address"),
                "client hosts need the address of this machine the server binds and they "
                "connect to",
            )
        return self
