"""Several servers in one run: `[server] servers`, `baseline_server`, `--servers NAME=SPEC,...`.

An upgrade check (the build you run and the next one) or a "which server" check measures several
servers in one run, interleaved and paired by round like the allocators (suites.runner.plan). Each
entry is a server the tool runs on its own, named, given as a SPEC:

    host            the installed server (Debian's mariadbd), what an empty [server] runs
    fetched:SPEC    a server of `mallocsweep servers fetch` (e.g. fetched:mariadb-10.11.18)
    root:DIR        a server root (another release's files), its binary at the default place
    basedir:DIR     a MySQL/Percona install directory with bin/mysqld
    PATH or NAME    a server binary (a path, or a name looked up on PATH)

In the suite file: `servers = { old = "fetched:mariadb-10.11.18", new = "host" }` (the keys are the
names, in order), or a list: `servers = ["old=fetched:mariadb-10.11.18", "new=host"]`, or tables
with `name` and the [server] keys that say where a server comes from (binary, basedir, root,
fetched; flavor for another family). Every other [server] setting (buffer pool, my.cnf lines,
engines, ...) is the section's, the same for every server. `baseline_server` is the server every
other is compared with (default: the first).

This module checks the entries' shape (names, specs, paths); which family each is and whether the
workload can run on it is checked with the whole suite (suites.families.registry.server_entries,
suites.suite.model).
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field, ValidationInfo, field_validator

from suites.config.settings import Section, control_character, existing, server_binary

# Where a server comes from: the [server] keys an entry may set (the rest are the section's).
SOURCE_KEYS = ("binary", "basedir", "root", "fetched")
HOST = "host"
_PREFIXES = {"fetched:": "fetched", "root:": "root", "basedir:": "basedir"}
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,31}")
SPEC_HELP = (
    "host, fetched:SPEC, root:DIR, basedir:DIR, or a server binary (a path or a name on PATH)"
)


class ServerEntryError(ValueError):
    """A malformed entry, said in one line (the caller names the field or the option)."""


class ServerEntry(Section):
    """One server of a run with several: its name and where it comes from."""

    name: str = Field("", description="How tables, verdicts and cell names call this server.")
    binary: str = Field("", description="Its binary (inside `root` when a root is given).")
    basedir: str = Field("", description="A MySQL/Percona install directory with bin/mysqld.")
    root: str = Field("", description="A server root: another release's files, run under chroot.")
    fetched: str = Field("", description="A server of `mallocsweep servers fetch`, by its SPEC.")
    flavor: str = Field("", description="Its flavor when not the section's (e.g. mongodb).")

    @property
    def spec(self) -> str:
        """The entry as --servers would give it (for messages and records)."""
        if self.fetched:
            return f"fetched:{self.fetched}"
        if self.root:
            return f"root:{self.root}" + (f" binary {self.binary}" if self.binary else "")
        if self.basedir:
            return f"basedir:{self.basedir}"
        return self.binary or HOST

    def source(self) -> dict[str, str]:
        """The [server] keys this entry sets (every source key: the others emptied)."""
        return {k: getattr(self, k) for k in SOURCE_KEYS}

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if v and not _NAME.fullmatch(v):
            raise ValueError(
                f"server name {v!r}: expected 1-32 letters, digits, '.', '-' or '_', starting with "
                "a letter or digit"
            )
        return v

    @field_validator("binary")
    @classmethod
    def _binary(cls, v: str, info: ValidationInfo) -> str:
        return server_binary(v, info, bool(info.data.get("root")))

    @field_validator("basedir", "root")
    @classmethod
    def _dir(cls, v: str, info: ValidationInfo) -> str:
        return existing(v, info, "directory") if v else v

    @field_validator("fetched")
    @classmethod
    def _fetched(cls, v: str) -> str:
        bad = control_character(v)
        if bad:
            raise ValueError(f"{v!r} holds a control character ({bad})")
        return v.strip()


def parse_spec(text: str) -> dict[str, str]:
    """SPEC -> the entry keys it sets; ServerEntryError (one line) for an empty or bad one."""
    if not isinstance(text, str):
        raise ServerEntryError(f"expected a string ({SPEC_HELP}), got {type(text).__name__}")
    spec = text.strip()
    if not spec:
        raise ServerEntryError(f"an empty server spec; expected {SPEC_HELP}")
    bad = control_character(spec)
    if bad:
        raise ServerEntryError(f"{text!r} holds a control character ({bad}); give a plain spec")
    if spec == HOST:
        return {}
    for prefix, key in _PREFIXES.items():
        if spec.startswith(prefix):
            rest = spec[len(prefix) :].strip()
            if not rest:
                raise ServerEntryError(f"{text!r}: nothing after {prefix!r}; expected {SPEC_HELP}")
            return {key: rest}
    return {"binary": spec}


def split_named(text: str) -> tuple[str, str]:
    """'NAME=SPEC' -> (NAME, SPEC); 'SPEC' -> ('', SPEC)."""
    name, eq, spec = text.partition("=")
    if not eq:
        return "", text
    return name.strip(), spec


def normalize(raw: Any) -> list[dict]:
    """The file's forms (a table of NAME = SPEC or NAME = {table}; a list of "NAME=SPEC" strings
    or tables with `name`) -> a list of entry dicts; ServerEntryError for a malformed one."""
    if isinstance(raw, dict):
        items = []
        for name, value in raw.items():
            if isinstance(value, dict):
                if "name" in value and value["name"] != name:
                    raise ServerEntryError(
                        f"entry {name!r} has name = {value['name']!r}; the key is its name"
                    )
                items.append({**value, "name": name})
            else:
                items.append({"name": name, **_spec_keys(value, name)})
        return items
    if isinstance(raw, list):
        items = []
        for i, value in enumerate(raw):
            if isinstance(value, dict):
                items.append(_table_entry(value, f"entry {i + 1}"))
            elif isinstance(value, str):
                name, spec = split_named(value)
                items.append({"name": name, **_spec_keys(spec, name or f"entry {i + 1}")})
            else:
                raise ServerEntryError(
                    f'entry {i + 1}: expected "NAME=SPEC" or a table, got {type(value).__name__}'
                )
        return items
    return raw  # not a list or table: the type check says what is expected


def _spec_keys(value: Any, where: str) -> dict[str, str]:
    try:
        return parse_spec(value)
    except ServerEntryError as e:
        raise ServerEntryError(f"server {where!r}: {e}") from None


def _table_entry(value: dict, where: str) -> dict:
    """A table entry; its `spec` (a SPEC string) is an alternative to the source keys."""
    out = {k: v for k, v in value.items() if k != "spec"}
    if "spec" in value:
        if any(out.get(k) for k in SOURCE_KEYS):
            raise ServerEntryError(
                f"{where}: give either spec or {', '.join(SOURCE_KEYS)}, not both"
            )
        out.update(_spec_keys(value["spec"], str(value.get("name") or where)))
    return out


def check_entries(entries: list[ServerEntry]) -> None:
    """Names: unique, and present on every entry when there are several."""
    if len(entries) > 1:
        for i, e in enumerate(entries):
            if not e.name:
                raise ServerEntryError(
                    f"entry {i + 1} ({e.spec}) has no name; with several servers each needs one, "
                    "e.g. old=fetched:mariadb-10.11.18,new=host"
                )
    names = [e.name for e in entries if e.name]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise ServerEntryError(f"two servers are named {dup!r}; give each its own name")


def parse_option(text: str) -> list[dict]:
    """--servers NAME=SPEC,NAME=SPEC -> entry dicts (names checked with the suite's)."""
    items = [x.strip() for x in text.split(",")]
    if not any(items):
        raise ServerEntryError(f"--servers {text!r}: expected NAME=SPEC,NAME=SPEC")
    if not all(items):
        raise ServerEntryError(f"--servers {text!r} has an empty item; remove the extra comma")
    out = []
    for i, item in enumerate(items):
        name, spec = split_named(item)
        if not name and "=" in item:
            raise ServerEntryError(f"--servers: {item!r} has no name before '='")
        try:
            out.append({"name": name, **parse_spec(spec)})
        except ServerEntryError as e:
            raise ServerEntryError(f"--servers: server {name or f'entry {i + 1}'!r}: {e}") from None
    return out
