"""The kit's manifest (`kit.json` at the top of a kit): what the kit carries, each component with
its version and sha256, so a DBA can check the artifact and every run made with it says exactly
which builds it measured.

A run started inside a kit records the manifest under its own manifest.json's "kit" key: the
launcher hands its path to the tool as MALLOCSWEEP_KIT_MANIFEST and `run_record()` reads it. The
key is optional: runs made outside a kit have none and no reader requires it (rundir.records
declares it as an optional field).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from suites.errors import SuiteError

FILE = "kit.json"
KIT_VERSION = 1  # of this file's shape
ENV = "MALLOCSWEEP_KIT_MANIFEST"  # set by the kit's launcher, inside the kit's root
KINDS = ("tool", "launcher", "helper", "shim", "allocator", "sysbench", "server", "python")


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@dataclass(frozen=True)
class Component:
    kind: str  # one of KINDS
    name: str  # "jemalloc", "host", "fetched:mysql-9.7.4", "msexec", ...
    path: str  # relative to the kit's top directory
    sha256: str
    version: str | None = None  # the Debian package's version, or the tool's
    package: str | None = None  # the Debian package it came from, when one did

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"component kind {self.kind!r} is not one of {', '.join(KINDS)}")
        if os.path.isabs(self.path) or ".." in Path(self.path).parts:
            raise ValueError(f"component path {self.path!r} must be relative to the kit")


def component(kit: Path, kind: str, name: str, path: Path, version=None, package=None) -> Component:
    """A component of the kit at `kit`, hashed from the file at `path` (inside `kit`)."""
    return Component(
        kind=kind,
        name=name,
        path=str(Path(path).relative_to(kit)),
        sha256=sha256_file(path),
        version=version,
        package=package,
    )


@dataclass
class KitManifest:
    name: str  # the kit's directory name
    tool_version: str
    release: str  # the Debian release of the kit's root
    built_at: str
    servers: list[str]  # as given to --server: "host", "fetched:SPEC"
    components: list[Component] = field(default_factory=list)
    source_commit: str | None = None  # the checkout's git commit the wheel was built from
    kit_version: int = KIT_VERSION

    def to_json(self) -> dict:
        return asdict(self)

    def write(self, kit: Path) -> Path:
        out = kit / FILE
        out.write_text(json.dumps(self.to_json(), indent=2) + "\n")
        return out


def load(path: Path) -> KitManifest:
    """A kit.json read back; SuiteError (one line, naming the file and field) when it is not one."""
    try:
        data = json.loads(Path(path).read_text())
    except OSError as e:
        raise SuiteError(f"{path}: cannot read the kit manifest: {e.strerror}") from None
    except ValueError as e:
        raise SuiteError(f"{path}: not JSON ({e})") from None
    if not isinstance(data, dict):
        raise SuiteError(f"{path}: not a kit manifest (a JSON object is expected)")
    if data.get("kit_version") != KIT_VERSION:
        raise SuiteError(
            f"{path}: kit_version {data.get('kit_version')!r}, this mallocsweep reads {KIT_VERSION}"
        )
    try:
        comps = [Component(**c) for c in data.get("components", [])]
        return KitManifest(**{**data, "components": comps})
    except (TypeError, ValueError) as e:
        raise SuiteError(f"{path}: not a kit manifest: {e}") from None


def verify(kit: Path, manifest: KitManifest) -> list[str]:
    """The components whose file is missing or whose sha256 differs (one line each)."""
    bad = []
    for c in manifest.components:
        p = kit / c.path
        if not p.is_file():
            bad.append(f"{c.kind} {c.name}: {c.path} is missing")
        elif sha256_file(p) != c.sha256:
            bad.append(f"{c.kind} {c.name}: {c.path} does not match its sha256")
    return bad


def run_record(environ=os.environ) -> dict | None:
    """What a run records under manifest.json's "kit": the kit's manifest, when this tool runs
    inside a kit (its launcher sets MALLOCSWEEP_KIT_MANIFEST); None otherwise."""
    path = environ.get(ENV)
    if not path:
        return None
    return load(Path(path)).to_json()
