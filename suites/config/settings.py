"""What every suite settings section is built on: the strict base model, path checks relative to
the suite file, and my.cnf numbers.

The sections themselves are declared by their owners: the core ones in suites/config/sections.py,
each workload's in its plugin (suites/workloads/), and suites/suite/model.py assembles them into the
Suite model. Kept apart so that a plugin can declare a section without importing the Suite.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo

MAX_THREADS = 100_000
# Our own connections beside the clients (status collector, control connection, warmup scans)
# when a suite sets max_connections itself; sized automatically, the margin is larger.
OWN_CONNECTIONS = 10
NonNegFloat = Annotated[float, Field(ge=0)]


class Section(BaseModel):
    # strict: a value of the wrong type is an error, never converted ("30" is not 30, true is not
    # 1, "yes" is not true); the one widening allowed is a whole number where a number is expected
    # (duration_s = 30). inf and nan are not numbers a setting can take.
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


def _base_dir(info: ValidationInfo) -> Path:
    """The directory relative paths are taken from: the suite file's (the CLI's cwd for options)."""
    base = (info.context or {}).get("base_dir")
    return Path(base) if base else Path(".")


def control_character(text: str) -> str | None:
    """The first control character in `text`, named ("newline", "tab", "\\x1b"), or None. A path
    or name holding one is refused: it would break every log line and shell command it reaches."""
    for ch in text:
        if ord(ch) < 32 or ord(ch) == 127:
            return {"\n": "newline", "\r": "carriage return", "\t": "tab"}.get(ch, repr(ch)[1:-1])
    return None


def resolve_path(value: str, info: ValidationInfo) -> Path:
    bad = control_character(value)
    if bad:
        raise ValueError(f"{value!r} holds a control character ({bad}); give a plain path")
    p = Path(value)
    if value.startswith("~"):
        try:
            p = p.expanduser()
        except RuntimeError:
            raise ValueError(f"cannot expand {value!r}: no home directory") from None
    if not p.is_absolute():
        p = _base_dir(info).absolute() / p
    return Path(os.path.normpath(p))  # no symlink resolution: mysqld's name may tell its flavor


def _where_relative(value: str, info: ValidationInfo) -> str:
    if value.startswith(("/", "~")):
        return ""
    base = (info.context or {}).get("base_name", "the suite file's directory")
    return f" (a relative path is taken from {base})"


def server_binary(value: str, info: ValidationInfo, in_root: bool) -> str:
    """A server binary setting: inside a root, an absolute path there (checked when the server is
    resolved); else empty (the default), a bare name looked up on PATH, or a path that exists."""
    if in_root:
        if value and not value.startswith("/"):
            raise ValueError("with a server root, expected an absolute path inside the root")
        return value
    if not value or ("/" not in value and not value.startswith("~")):
        return value
    return existing(value, info, "file")


def existing(value: str, info: ValidationInfo, kind: str) -> str:
    """`value` as an absolute path that exists and is a `kind` ("file" or "directory")."""
    p = resolve_path(value, info)
    ok = p.is_dir() if kind == "directory" else p.is_file()
    if not ok:
        what = "no such file" if kind == "file" else "no such directory"
        if p.exists():
            what = f"not a {kind}"
        raise ValueError(f"{what}: {p}{_where_relative(value, info)}")
    return str(p)


def mycnf_int(value: Any) -> int | None:
    """A whole number as my.cnf writes it (2000, "2000", "16M"); None when it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else None
    # [0-9], not \d: \d matches any script's digits ("２０００"), which int() reads and my.cnf doesn't
    m = re.fullmatch(r"\s*([0-9]{1,18})\s*([kKmMgG]?)\s*", str(value))
    if not m:
        return None
    return int(m.group(1)) * 1024 ** " kmg".index((m.group(2) or " ").lower())


# The server's max_allowed_packet when the suite does not set it: 16 MiB, MariaDB 10.2+'s default
# (MySQL 8's is 64 MiB: taking the smaller refuses nothing that fits).
DEFAULT_MAX_ALLOWED_PACKET = 16 * 1024 * 1024


def packet_limit(server_settings: dict) -> tuple[int | None, bool]:
    """(the server's max_allowed_packet in bytes or None when unreadable, whether the suite set
    it): what one INSERT statement of a workload may take."""
    given = server_settings.get("max_allowed_packet")
    if given is None:
        return DEFAULT_MAX_ALLOWED_PACKET, False
    return mycnf_int(given), True
