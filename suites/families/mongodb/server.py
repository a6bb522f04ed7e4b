"""A MongoDB server's life: a user-supplied mongod, started as our child under its allocator.

No MongoDB is packaged for Debian, so the binary is the user's (suite setting or PATH). What
decides correctness here:
- The official mongod links tcmalloc statically: it defines malloc itself, so LD_PRELOAD would
  reach only its shared libraries (two allocators, one heap). Such a binary runs only as allocator
  `builtin`; comparing allocators needs a build made with --allocator=system. Before anything is
  launched, either sign refuses a preload: the build info of `mongod --version` says tcmalloc or
  tcmalloc-google (symbols can be hidden or stripped, the build info cannot), or the ELF symbol
  table shows a malloc definition. check_allocators() does it for a whole suite before a run
  directory exists. After start, the server's own buildInfo.allocator must be what --version said
  (else another binary, or another server on the port, answered).
- buildInfo.allocator (tcmalloc, tcmalloc-google, system) and the version are recorded at start;
  the THP advice flips at 8.0 (disable up to 7.0; enable with defrag defer+madvise from 8.0, and
  Google tcmalloc wants GLIBC_TUNABLES=glibc.pthread.rseq=0). A setting against it is a one-line
  warning in the manifest (cells[].server.warnings), next to the advice itself
  (cells[].server.thp_advice).
- The tests' wire-protocol stand-in (tests/standin/mongod-standin, a JVM process) is recognised
  by its --version and marked `standin: true` everywhere: protocol coverage, never allocator
  conclusions. It runs only as `builtin` (no native malloc is preloaded into a JVM).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pymongo
from pymongo.errors import PyMongoError

from collectors.thp_sysfs import SYSFS as THP_SYSFS
from collectors.thp_sysfs import system_modes
from servers.allocators import Allocator
from servers.elfcheck import interposes_malloc, malloc_definitions
from servers.errors import AllocatorError, ServerError
from servers.life import BASE_ENV, Launch, Probe, ServerLife, tail
from servers.verify import refuse_self_allocating, verify_allocator

_INSTALL_HINT = (
    "MongoDB is not packaged for Debian: install mongod from MongoDB's own packages or tarball, "
    "or set server.binary in the suite to a mongod"
)
THP_ROOT = str(THP_SYSFS)
# buildInfo.allocator values meaning "linked into the executable": no preload can replace them.
STATIC_ALLOCATORS = ("tcmalloc", "tcmalloc-google")
STANDIN_NOTE = (
    "MongoDB wire-protocol stand-in (JVM): protocol coverage only, no allocator conclusions"
)


@dataclass(frozen=True)
class MongoBinary:
    """A mongod found on this machine, as its own --version describes it."""

    path: str
    version: str  # "7.0.5", or "standin-<library version>" for the stand-in
    allocator_builtin: str | None  # buildInfo allocator: tcmalloc, tcmalloc-google, system (jvm)
    standin: bool

    @property
    def flavor(self) -> str:
        return "mongodb"

    def to_manifest(self) -> dict:
        d = {
            "flavor": self.flavor,
            "path": self.path,
            "version": self.version,
            "allocator_builtin": self.allocator_builtin,
            "standin": self.standin,
        }
        if self.standin:
            d["note"] = STANDIN_NOTE
        return d


def parse_version_output(text: str) -> tuple[str, dict] | None:
    """(version, build info) from `mongod --version` output; None when it is not mongod's.

    mongod prints "db version v7.0.5" and then "Build Info: {...}" (JSON over several lines).
    """
    m = re.search(r"^db version v?(\S+)\s*$", text, re.MULTILINE)
    if not m:
        return None
    build: dict = {}
    b = text.find("Build Info:")
    if b >= 0:
        start = text.find("{", b)
        if start >= 0:
            try:
                build, _ = json.JSONDecoder().raw_decode(text[start:])
            except ValueError:
                build = {}
    return m.group(1), build if isinstance(build, dict) else {}


def find_mongod(path: str | os.PathLike | None = None, timeout_s: float = 60.0) -> MongoBinary:
    """The mongod at `path` (a file, or a directory holding bin/mongod or mongod), else on PATH.

    ServerError (one line, saying what to install or set) when missing or not a mongod.
    """
    if path is None or str(path) == "":
        found = shutil.which("mongod")
        if found is None:
            raise ServerError(f"no mongod on PATH; {_INSTALL_HINT}")
        binary = Path(found)
    else:
        binary = Path(path).expanduser()
        if binary.is_dir():
            cands = [binary / "bin" / "mongod", binary / "mongod"]
            binary = next((c for c in cands if c.is_file()), cands[0])
        if not binary.exists():
            raise ServerError(f"server.binary: {path} does not exist; {_INSTALL_HINT}")
        if not os.access(binary, os.X_OK):
            raise ServerError(f"server.binary: {binary} is not executable; point it at a mongod")
    binary = binary.absolute()
    try:
        done = subprocess.run(
            [str(binary), "--version"],
            env=BASE_ENV,
            capture_output=True,
            stdin=subprocess.DEVNULL,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired:
        raise ServerError(
            f"{binary} --version did not answer in {timeout_s:.0f}s; is it a mongod?"
        ) from None
    except OSError as e:
        raise ServerError(
            f"cannot run {binary}: {e.strerror}; point server.binary at a mongod"
        ) from None
    out = done.stdout.decode(errors="replace")
    parsed = parse_version_output(out)
    if done.returncode != 0 or parsed is None:
        said = (out + done.stderr.decode(errors="replace")).strip().splitlines()
        raise ServerError(
            f"{binary} is not a mongod: `--version` exited {done.returncode} and said "
            f"{(said[0] if said else 'nothing')!r}; {_INSTALL_HINT}"
        )
    version, build = parsed
    standin = version.startswith("standin-") or bool(build.get("mallocsweepStandIn"))
    return MongoBinary(str(binary), version, build.get("allocator"), standin)


def version_tuple(version: str) -> tuple[int, int] | None:
    m = re.match(r"(\d+)\.(\d+)", version)
    return (int(m.group(1)), int(m.group(2))) if m else None


def read_thp(root: str = THP_ROOT) -> dict[str, str | None]:
    """The system THP modes now ({"enabled", "defrag"}; None where unreadable)."""
    return system_modes(Path(root))


def thp_advice_text(version: str) -> str | None:
    """MongoDB's own THP advice for `version`, in one line (None when the version is not numeric)."""
    v = version_tuple(version)
    if v is None:
        return None
    if v < (8, 0):
        return f"MongoDB {version}: disable transparent hugepages (THP 'never')"
    return (
        f"MongoDB {version}: enable transparent hugepages (THP 'always', defrag 'defer+madvise'); "
        "with Google tcmalloc, GLIBC_TUNABLES=glibc.pthread.rseq=0"
    )


def effective_thp(thp_enabled: str | None, thp_disable: bool) -> str | None:
    """The THP mode that reaches the server: PR_SET_THP_DISABLE makes it "never" whatever the
    system says; None when the system mode could not be read."""
    return "never" if thp_disable else thp_enabled


def thp_advice(
    version: str,
    thp_enabled: str | None,
    thp_defrag: str | None,
    thp_disable: bool,
    allocator_builtin: str | None,
    glibc_tunables: str = "",
) -> list[str]:
    """Warnings where this server's THP setup goes against MongoDB's advice for its version.

    Up to 7.0 the advice is "disable": anything but an effective "never" is against it (madvise
    too: MongoDB's own production notes say disable; docs/facts.md, "MongoDB"). From 8.0 it is "always" with
    defrag defer+madvise. An unreadable mode is said as such, never judged.
    """
    v = version_tuple(version)
    if v is None:
        return []
    effective = effective_thp(thp_enabled, thp_disable)
    unknown = (
        "the system THP mode could not be read "
        "(/sys/kernel/mm/transparent_hugepage/enabled), so whether this server follows it is unknown"
    )
    warnings = []
    if v < (8, 0):
        if effective is None:
            warnings.append(f"MongoDB {version} advises disabling transparent hugepages; {unknown}")
        elif effective != "never":
            warnings.append(
                f"MongoDB {version} advises disabling transparent hugepages, but this server runs "
                f"with THP {effective!r}; use thp mode 'never' for results that match production "
                "advice"
            )
        return warnings
    if effective is None:
        warnings.append(
            f"MongoDB {version} advises enabling transparent hugepages ('always'); {unknown}"
        )
    elif effective != "always":
        warnings.append(
            f"MongoDB {version} advises enabling transparent hugepages ('always'), but this "
            f"server runs with THP {effective!r}"
        )
    if effective == "always" and thp_defrag != "defer+madvise":
        warnings.append(
            f"MongoDB {version} advises THP defrag 'defer+madvise', "
            + (
                "but the defrag setting could not be read"
                if thp_defrag is None
                else f"the system has {thp_defrag!r}"
            )
        )
    if allocator_builtin == "tcmalloc-google" and "glibc.pthread.rseq=0" not in (
        glibc_tunables or ""
    ).split(":"):
        warnings.append(
            f"MongoDB {version} with Google tcmalloc wants GLIBC_TUNABLES=glibc.pthread.rseq=0 "
            "(per-CPU caches); the server was started without it"
        )
    return warnings


def flatten_numeric(doc: dict, prefix: str = "") -> dict[str, float]:
    """Numeric leaves of a nested document as {"a.b.c": value}; booleans and text dropped."""
    out: dict[str, float] = {}
    for key, value in doc.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten_numeric(value, name + "."))
        elif isinstance(value, int | float) and not isinstance(value, bool):
            out[name] = float(value)
        elif hasattr(value, "to_decimal") or type(value).__name__ == "Int64":
            try:
                out[name] = float(value.to_decimal() if hasattr(value, "to_decimal") else value)
            except (TypeError, ValueError, ArithmeticError):
                continue
    return out


def _builtin_only(binary: MongoBinary, defs: list[str]) -> str | None:
    """Why this mongod can run only under its own allocator (None when a preload is possible).

    Either sign is enough: the build info names a statically linked tcmalloc (true even when the
    symbols are hidden or stripped), or the symbol tables show a malloc definition.
    """
    own = interposes_malloc(defs)
    static = binary.allocator_builtin in STATIC_ALLOCATORS
    if not own and not static:
        return None
    carried = binary.allocator_builtin if static else "its own allocator"
    if own:
        evidence = f"defines {', '.join(own[:3])} itself (statically linked {carried})"
    else:
        evidence = (
            f"links {carried} statically (its build info says allocator {carried!r}; the malloc "
            "symbols are hidden or stripped, so the symbol table cannot show them)"
        )
    return (
        f"{binary.path} {evidence}: under any other allocator its own calls would stay on "
        f"{carried} while its shared libraries used the other one, and mixed allocators corrupt "
        "the heap"
    )


def check_allocator(binary: MongoBinary, allocator: Allocator) -> list[str]:
    """Refuse, before launch, an allocator this mongod cannot really run under.

    Returns the malloc-family symbols the binary defines (evidence). AllocatorError explains why
    and what to use instead.
    """
    if binary.standin:
        if allocator.kind != "builtin":
            raise AllocatorError(
                f"{binary.path} is the MongoDB wire-protocol stand-in, a JVM process: only "
                f"allocator 'builtin' applies, not {allocator.name!r} (it is for protocol tests, "
                "never for allocator comparisons)"
            )
        return []
    defs = malloc_definitions(Path(binary.path))
    if allocator.kind != "builtin":
        why = _builtin_only(binary, defs)
        if why is not None:
            raise AllocatorError(
                f"{why}; so allocator {allocator.name!r} is refused: run it as allocator "
                "'builtin', or compare allocators with a mongod built with --allocator=system"
            )
    # Static binaries and unusable allocators: the generic refusals, with their own reasons.
    refuse_self_allocating(Path(binary.path), allocator)
    return defs


def check_allocators(binary: MongoBinary, allocators: list[Allocator]) -> None:
    """Refuse a suite's allocator list up front, in one line, before any run directory, THP
    change or server exists (so a builtin-only mongod does not fail every cell one by one)."""
    others = [a.name for a in allocators if a.kind != "builtin"]
    if others:
        if binary.standin:
            raise AllocatorError(
                f"{binary.path} is the MongoDB wire-protocol stand-in (a JVM process): it runs "
                f"only as allocator 'builtin', but allocators.use asks for {', '.join(others)}; "
                "use --allocators builtin"
            )
        why = _builtin_only(binary, malloc_definitions(Path(binary.path)))
        if why is not None:
            raise AllocatorError(
                f"{why}. It runs only as allocator 'builtin', but allocators.use asks for "
                f"{', '.join(others)}: use --allocators builtin (or allocators.use = "
                '["builtin"]), or compare allocators with a mongod built with --allocator=system'
            )
    for a in allocators:
        check_allocator(binary, a)  # the remaining per-allocator refusals (static binary, ...)


class MongoServer(ServerLife):
    """One mongod life in `workdir`. Use as a context manager to guarantee it is stopped."""

    noun = "mongod"
    start_timeout_s = 120

    def __init__(
        self,
        binary: MongoBinary,
        workdir: Path,
        cache_gb: float,
        allocator: Allocator,
        port: int | None = None,
        thp_disable: bool = False,
        thp_root: str = THP_ROOT,
    ):
        if not cache_gb or cache_gb <= 0:
            raise ServerError(f"server.cache_gb = {cache_gb!r}: expected a size in GiB > 0")
        self.binary = binary
        self.workdir = Path(workdir).absolute()
        self.cache_gb = float(cache_gb)
        self.allocator = allocator
        self.requested_port = port
        self.port: int | None = port
        self.thp_disable = thp_disable
        self.thp_root = thp_root
        self.dbpath = self.workdir / "db"
        self.error_log = self.workdir / "mongod.log"
        self.console_log = self.workdir / "mongod.console.log"
        # mongod writes its pid here: `mallocsweep doctor` finds a server left by a killed run.
        self.pid_file = self.workdir / "mongod.pid"
        self.launch_env: dict[str, str] = {}
        self.warnings: list[str] = []
        self.thp_system: dict[str, str | None] = {}
        self._build_info: dict = {}
        self._client: pymongo.MongoClient | None = None
        self._lock = threading.Lock()
        # Refuse what cannot work now, before any dataset or collector is set up.
        self._malloc_defs = check_allocator(binary, allocator)

    # -- start -------------------------------------------------------------------------------
    def argv(self) -> list[str]:
        return [
            self.binary.path,
            "--dbpath", str(self.dbpath),
            "--bind_ip", "127.0.0.1",
            "--port", str(self.port),
            "--wiredTigerCacheSizeGB", f"{self.cache_gb:g}",
            "--nounixsocket",  # no /tmp/mongodb-PORT.sock shared with other servers on the machine
            "--logpath", str(self.error_log),
            "--pidfilepath", str(self.pid_file),
        ]  # fmt: skip

    def _prepare_launch(self) -> Launch:
        self._claim_port()
        self.dbpath.mkdir(parents=True, exist_ok=True)
        self.launch_env = self.allocator.launch_env(BASE_ENV | {"HOME": str(self.workdir)})
        self.thp_system = read_thp(self.thp_root)
        return Launch(self.argv(), log=self.console_log)

    def _prove(self) -> None:
        """buildInfo recorded and checked, the allocator proved, THP advice weighed."""
        self._build_info = self._admin("buildInfo")
        self._check_build_info()
        self.evidence = self._verify()
        self.warnings = thp_advice(
            self.binary.version,
            self.thp_system.get("enabled"),
            self.thp_system.get("defrag"),
            self.thp_disable,
            self._build_info.get("allocator") or self.binary.allocator_builtin,
            self.launch_env.get("GLIBC_TUNABLES", ""),
        )

    def _client_now(self) -> pymongo.MongoClient:
        if self._client is None:
            self._client = pymongo.MongoClient(
                "127.0.0.1",
                self.port,
                directConnection=True,
                serverSelectionTimeoutMS=2000,
                connectTimeoutMS=2000,
                # A stopped or wedged server must not hang status polls or stop() forever.
                socketTimeoutMS=30_000,
                appname="mallocsweep",
            )
        return self._client

    def _admin(self, command: str, **kw) -> dict:
        with self._lock:
            return dict(self._client_now().admin.command(command, **kw))

    @contextmanager
    def _readiness_probe(self) -> Iterator[Probe]:
        client = pymongo.MongoClient(
            "127.0.0.1", self.port, directConnection=True,
            serverSelectionTimeoutMS=250, connectTimeoutMS=250,
        )  # fmt: skip

        def probe() -> str | None:
            try:
                client.admin.command("ping")
            except PyMongoError as e:
                return (str(e).splitlines()[0] if str(e) else type(e).__name__)[:120]
            return None

        try:
            yield probe
        finally:
            client.close()

    def _not_ready_text(self, timeout_s: float, why: str) -> str:
        return f"did not answer ping on 127.0.0.1:{self.port} within {timeout_s:.0f}s ({why})"

    def _check_build_info(self) -> None:
        """The server that answered must be the binary that was checked before launch.

        The preload refusal trusted `--version`'s build info; a different allocator now means a
        different binary (or another server on this port) answered, and a statically linked
        tcmalloc under a preload is the mixed-heap case the refusal exists for.
        """
        running = self._build_info.get("allocator")
        said = self.binary.allocator_builtin
        if said is not None and running != said:
            raise AllocatorError(
                f"{self.binary.path}: `--version` reported allocator {said!r} but the server on "
                f"127.0.0.1:{self.port} reports buildInfo.allocator {running!r}; a different "
                "mongod answered, so its allocator checks do not hold"
            )
        if running in STATIC_ALLOCATORS and self.allocator.kind != "builtin":
            raise AllocatorError(
                f"{self.binary.path} reports buildInfo.allocator {running!r} (statically linked) "
                f"once running, so allocator {self.allocator.name!r} would mix two allocators in "
                "one heap; run it as allocator 'builtin', or use a mongod built with "
                "--allocator=system"
            )

    def _verify(self) -> dict:
        reported = self._build_info.get("allocator")
        if self.binary.standin:
            return {
                "allocator": self.allocator.name,
                "kind": self.allocator.kind,
                "pid": self.child.pid,
                "binary": self.binary.path,
                "standin": True,
                "buildinfo_allocator": reported,
                "verdict": "standin",
                "note": STANDIN_NOTE,
            }
        # buildInfo.allocator is what the binary was built with, not a runtime detection: it is a
        # cross-check only for `builtin`, and recorded as a fact for the rest.
        evidence = verify_allocator(
            self.child.pid,
            self.allocator,
            Path(self.binary.path),
            server_reported=reported if self.allocator.kind == "builtin" else None,
        )
        evidence["buildinfo_allocator"] = reported
        return evidence

    # -- talking to it -----------------------------------------------------------------------
    def client_target(self) -> dict:
        """Where clients connect (the runner turns this into a suites.target.ClientTarget)."""
        return {"host": "127.0.0.1", "port": self.port}

    def build_info(self) -> dict:
        """buildInfo as recorded at start (version, allocator, ...)."""
        if not self._build_info and self.alive:
            self._build_info = self._admin("buildInfo")
        return dict(self._build_info)

    def server_status(self) -> dict[str, float]:
        """serverStatus, numeric fields flattened ("wiredTiger.cache.bytes currently in the cache").
        One kept client, callable from a collector thread."""
        try:
            doc = self._admin("serverStatus")
        except PyMongoError as e:
            raise ServerError(
                f"serverStatus failed on 127.0.0.1:{self.port}: {str(e).splitlines()[0]}"
            ) from None
        return flatten_numeric(doc)

    # -- stop --------------------------------------------------------------------------------
    def _request_shutdown(self) -> bool:
        return self._shutdown_command()

    def _release(self) -> None:
        self._close_client()
        if self.child is None or self.child.exit is not None:
            # Reaped (or never started): the pid in it is no longer ours to point at.
            self.pid_file.unlink(missing_ok=True)

    def _shutdown_command(self) -> bool:
        """Ask mongod to shut down; True when the request reached it. mongod closes the
        connection instead of answering, so a dropped connection is the expected reply."""
        try:
            self._admin("shutdown")
        except pymongo.errors.ServerSelectionTimeoutError:
            return False
        except PyMongoError:
            pass
        return True

    def _close_client(self) -> None:
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()

    def _log_summary(self, n: int = 3) -> str:
        lines = [
            ln
            for ln in (tail(self.error_log, 50) + "\n" + tail(self.console_log, 50)).splitlines()
            if ln and not ln.startswith("(")
        ]
        errors = [ln for ln in lines if '"s":"E"' in ln or '"s":"F"' in ln or "ERROR" in ln]
        return " | ".join((errors or lines)[-n:])[:600] or "(no log output)"

    def to_manifest(self) -> dict:
        d = {
            "flavor": "mongodb",
            "version": self.binary.version,
            "binary": self.binary.path,
            "standin": self.binary.standin,
            "buildinfo_version": self._build_info.get("version"),
            "buildinfo_allocator": self._build_info.get("allocator", self.binary.allocator_builtin),
            "binary_malloc_definitions": self._malloc_defs,
            "cache_gb": self.cache_gb,
            "port": self.port,
            "pid": self.pid,
            "thp_disable": self.thp_disable,
            "thp_system": self.thp_system,
            "thp_effective": effective_thp(self.thp_system.get("enabled"), self.thp_disable)
            if self.child is not None
            else None,
            "thp_advice": thp_advice_text(self.binary.version),
            "allocator": self.allocator.name,
            "launch_env": {k: v for k, v in self.launch_env.items() if k != "HOME"},
            "warnings": list(self.warnings),
            "evidence": self.evidence,
            "exit": self.exit.to_manifest() if self.exit else None,
        }
        if self.binary.standin:
            d["note"] = STANDIN_NOTE
        return d
