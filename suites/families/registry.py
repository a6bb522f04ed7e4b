"""The server family plugins, by the flavors that name them (`[server] flavor`).

A family is one folder in suites/families/ (see mysql/ and mongodb/): a Family subclass in its
plugin.py (its [server] section, how its binary is found, how its servers are made, read, reached
and their datasets kept), its clients' Driver in driver.py (connect, sysbench's arguments, its SQL
dialect), its ServerLife (start, readiness, allocator proof, stop) and config file beside them. It
is registered here by its flavors, which are also the choices of `server.flavor`. Adding a family:
its folder, one line in REGISTRY, its [server] keys in configs/suites/template.toml, and its tests
(docs/architecture.md). The runner, the dataset cache, the preflight, the warmup, the suite
validation and doctor ask `family_of(suite)` or REGISTRY only; the workloads ask the target's
driver.

The suite's [server] table is validated by the section of the family its flavor names
(server_section): a setting of another family is refused with that family's reason when it is
given a value, and ignored at its default (one section once held every family's settings, and
suites copied from the template carry them at their defaults).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BeforeValidator, ConfigDict, Discriminator, Field, Tag, ValidationError

from suites.config.errors import VARIANT_TAG, FieldError, format_loc, reason
from suites.config.sections import ServerSection
from suites.config.server_entries import SOURCE_KEYS, ServerEntry
from suites.errors import SuiteError
from suites.families.base import Family
from suites.families.mongodb.plugin import MONGODB
from suites.families.mysql.plugin import MYSQL

# Every family, in the template's order; the first is the default (its first flavor is
# server.flavor's default).
REGISTRY: dict[str, Family] = {f.name: f for f in (MYSQL, MONGODB)}
# server.flavor -> its family
FAMILIES: dict[str, Family] = {flavor: f for f in REGISTRY.values() for flavor in f.flavors}
DEFAULT = next(iter(REGISTRY.values()))
_UNKNOWN = VARIANT_TAG + "unknown"


def register(family: Family) -> None:
    """Add a family (a plugin outside this package, or a test's). Before suites.suite.model is first
    imported: the Suite model's [server] is built from the registry then."""
    REGISTRY[family.name] = family
    FAMILIES.update({flavor: family for flavor in family.flavors})


def family_for(server) -> Family:
    """The family of one server's section (a suite's [server]); SuiteError for an unknown flavor."""
    try:
        return FAMILIES[server.flavor]
    except KeyError:
        raise SuiteError(
            f"server.flavor {server.flavor!r}: no such server family "
            f"({', '.join(sorted(FAMILIES))})"
        ) from None


def family_of(suite) -> Family:
    """The server family of a loaded suite (its server.flavor)."""
    return family_for(suite.server)


def server_entries(suite) -> list[tuple[str, ServerSection]]:
    """(name, section) of every server the suite runs: each entry of [server] servers as the
    suite's [server] with that entry's source (suites.config.server_entries), validated by its
    own family's section; or ("", suite.server) when the suite names one server. FieldError at
    the entry for one its family refuses."""
    server = suite.server
    if not server.servers:
        return [("", server)]
    return [(e.name, entry_section(server, e)) for e in server.servers]


def entry_section(server: ServerSection, entry: ServerEntry) -> ServerSection:
    """One entry's server: the section's settings, the entry's binary/basedir/root/fetched (and
    flavor), validated by the section of the entry's family."""
    data = server.model_dump()
    for key in ("servers", "baseline_server", *SOURCE_KEYS):
        data.pop(key, None)
    data.update({k: v for k, v in entry.source().items() if v})
    if entry.flavor:
        data["flavor"] = entry.flavor
    where = ("server", "servers", entry.name or entry.spec)
    family = FAMILIES.get(data.get("flavor"))
    if family is None:
        raise FieldError(
            where,
            f"flavor {data.get('flavor')!r}: no such server family ({', '.join(sorted(FAMILIES))})",
        )
    try:
        return family.section.model_validate(_settle_foreign(data))
    except FieldError as e:
        raise FieldError(where, f"{format_loc(e.loc)}: {e}", e.value) from None
    except ValidationError as e:
        loc, msg = reason(e.errors(include_url=False)[0])
        raise FieldError(where, f"{format_loc(loc)}: {msg}") from None


def _unknown_flavor() -> type[ServerSection]:
    """The section chosen for a flavor no family has: its only error is the flavor's, naming
    every family's flavors (those registered when the Suite model is built)."""

    class UnknownFlavor(ServerSection):
        model_config = ConfigDict(extra="ignore")
        flavor: Literal[tuple(FAMILIES)] = Field(DEFAULT.flavors[0])  # type: ignore[valid-type]

    return UnknownFlavor


def _flavor(data: Any) -> Any:
    if isinstance(data, dict):
        return data.get("flavor", DEFAULT.flavors[0])
    return getattr(data, "flavor", DEFAULT.flavors[0])


def _family(data: Any) -> Family | None:
    flavor = _flavor(data)
    return FAMILIES.get(flavor) if isinstance(flavor, str) else None


def _tag(data: Any) -> str:
    family = _family(data)
    if family is None:
        return _UNKNOWN if isinstance(data, dict) else VARIANT_TAG + DEFAULT.name
    return VARIANT_TAG + family.name


def _settle_foreign(data: Any) -> Any:
    """Another family's settings in this [server]: dropped at their defaults, refused otherwise."""
    family = _family(data) if isinstance(data, dict) else None
    if family is None:
        return data  # not a table, or an unknown flavor: the section's own errors say so
    own = family.section.model_fields
    out = dict(data)
    for key, value in data.items():
        owner = next(
            (f for f in REGISTRY.values() if f is not family and key in f.section.model_fields),
            None,
        )
        if key in own or owner is None:
            continue  # its own, or unknown to every family (the section names it)
        if value == owner.section.model_fields[key].get_default(call_default_factory=True):
            del out[key]
            continue
        why = family.refusals.get(key) or (
            f"a setting of {owner.summary} servers; a {data.get('flavor')} server does not take it"
        )
        raise FieldError(("server", key), why, value)
    return out


def server_section() -> Any:
    """The type of the suite's [server]: the section of the family its flavor names."""
    members = [Annotated[f.section, Tag(VARIANT_TAG + f.name)] for f in REGISTRY.values()]
    members.append(Annotated[_unknown_flavor(), Tag(_UNKNOWN)])
    union = Annotated[Union[tuple(members)], Discriminator(_tag)]  # noqa: UP007 - built at runtime
    return Annotated[union, BeforeValidator(_settle_foreign)]


def section_models() -> list[type[ServerSection]]:
    """Every family's [server] model, in registry order (the template's and the help's)."""
    return [f.section for f in REGISTRY.values()]


__all__ = [
    "DEFAULT",
    "FAMILIES",
    "REGISTRY",
    "Family",
    "family_for",
    "entry_section",
    "family_of",
    "register",
    "server_entries",
    "server_section",
]
