"""The files a DBA installs: a systemd drop-in (`[Service]` with one `Environment=` line per
variable: LD_PRELOAD by absolute path, MALLOC_CONF / GLIBC_TUNABLES / TCMALLOC_* / MIMALLOC_*)
and the same variables as an env file for a container (`docker run --env-file`, compose's
`env_file`). Both are written from the environment the runner gives the server
(Allocator.launch_env), so what is installed is what was measured.

`environment` reads a drop-in back, and `setting_of` turns it into an arm again, so a test can
start the server from the installed file through the runner's own launch path and prove it.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from servers.allocators import Allocator
from suites.errors import SuiteError

DROPIN = "mallocsweep-tune.conf"
ENV_FILE = "mallocsweep-tune.env"


def _env(allocator: Allocator, env: dict, tunables: tuple) -> dict[str, str]:
    # An empty base: the drop-in carries only what the allocator and the setting need; glibc's
    # tunables are one GLIBC_TUNABLES value (a unit with its own must merge them: said below).
    arm = Allocator(
        name=allocator.name,
        kind=allocator.kind,
        family=allocator.family,
        library=allocator.library,
        env={**allocator.env, **env},
        tunables=(*allocator.tunables, *tunables),
    )
    env = arm.launch_env({})
    # the preload first: what a reader looks for, and what the rest is read by
    return dict(sorted(env.items(), key=lambda kv: kv[0] != "LD_PRELOAD"))


def _quoted(key: str, value: str) -> str:
    # systemd splits Environment= on spaces and strips quotes: quote an assignment that needs it
    item = f"{key}={value}"
    return f'"{item}"' if any(c in item for c in " \"'\\") else item


def dropin_text(allocator: Allocator, env: dict, tunables: tuple, header: list[str]) -> str:
    lines = [f"# {h}" for h in header]
    lines += [
        "# Install: /etc/systemd/system/<the server's unit>.service.d/" + DROPIN + ", then",
        "#   systemctl daemon-reload && systemctl restart <unit>",
        "# A unit that sets GLIBC_TUNABLES itself: join both values with ':' in one line.",
        "[Service]",
    ]
    lines += [f"Environment={_quoted(k, v)}" for k, v in _env(allocator, env, tunables).items()]
    return "\n".join(lines) + "\n"


def env_file_text(allocator: Allocator, env: dict, tunables: tuple, header: list[str]) -> str:
    lines = [f"# {h}" for h in header]
    lines += ["# docker run --env-file " + ENV_FILE + " ... (or compose's env_file:)"]
    lines += [f"{k}={v}" for k, v in _env(allocator, env, tunables).items()]
    return "\n".join(lines) + "\n"


def environment(path: Path) -> dict[str, str]:
    """The variables of a drop-in's `Environment=` lines (under [Service])."""
    out: dict[str, str] = {}
    section = None
    for n, raw in enumerate(Path(path).read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = line
            continue
        key, sep, value = line.partition("=")
        if section == "[Service]" and sep and key.strip() == "Environment":
            for item in shlex.split(value):
                k, eq, v = item.partition("=")
                if not eq:
                    raise SuiteError(f"{path}:{n}: Environment item {item!r}: expected KEY=value")
                out[k] = v
    return out


def setting_of(allocator: Allocator, variables: dict[str, str]) -> tuple[dict, tuple]:
    """(env, GLIBC_TUNABLES items) beyond `allocator`'s own, from a drop-in's variables; the
    drop-in must preload exactly this allocator's library (or nothing, for glibc)."""
    preload = variables.get("LD_PRELOAD")
    if preload != (allocator.library if allocator.kind == "preload" else None):
        raise SuiteError(
            f"the drop-in preloads {preload!r}, the allocator {allocator.name} is "
            f"{allocator.library!r}"
        )
    tunables = tuple(
        t
        for t in variables.get("GLIBC_TUNABLES", "").split(":")
        if t and t not in allocator.tunables
    )
    env = {
        k: v
        for k, v in variables.items()
        if k not in ("LD_PRELOAD", "GLIBC_TUNABLES") and allocator.env.get(k) != v
    }
    return env, tunables
