"""Pydantic's validation errors turned into the one-line messages suite files promise.

Each message names the file and, where it can be found, the line of the setting, the field as the
user wrote it (sysbench.threads[2]), what is expected, and the value that was given. Unknown keys
get a "did you mean". Kept apart from suites/suite/model.py, which declares the settings.
"""

from __future__ import annotations

import difflib
import json
import re
from typing import Any

from pydantic import BaseModel, ValidationError

# The tag of one variant of a section validated by one of several models (suites.families.registry: the
# [server] table by its family's model). Pydantic puts the tag in an error's location; it is not
# where the user writes anything, so messages leave it out.
VARIANT_TAG = "variant:"


def _is_tag(part) -> bool:
    return isinstance(part, str) and part.startswith(("function-", VARIANT_TAG))


def models_of(annotation) -> list[type[BaseModel]]:
    """The models a field's annotation validates with: itself, or each variant of a union."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    out: list[type[BaseModel]] = []
    for inner in getattr(annotation, "__args__", None) or ():
        out += [m for m in models_of(inner) if m not in out]
    return out


def _variant(annotation, tag: str) -> type[BaseModel] | None:
    """The model of the union member tagged `tag` in `annotation` (None: no such member)."""
    meta = getattr(annotation, "__metadata__", ())
    if any(getattr(m, "tag", None) == tag for m in meta):
        found = models_of(annotation)
        return found[0] if found else None
    for inner in getattr(annotation, "__args__", None) or ():
        got = _variant(inner, tag)
        if got is not None:
            return got
    return None


class FieldError(ValueError):
    """A rule across fields, reported at the field the user should change (not "(top level)")."""

    def __init__(self, loc: tuple, msg: str, value: Any = None):
        self.loc, self.value = loc, value
        super().__init__(msg)


def did_you_mean(word: str, choices) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _fields_of(model: type[BaseModel], loc: tuple) -> list[str]:
    """The allowed keys at `loc` (for a "did you mean" on an unknown key); `loc` may hold a
    variant's tag (pydantic's own location), which picks that variant's model."""
    parts = list(loc)
    while parts:
        part = parts.pop(0)
        if isinstance(part, int):
            continue
        field = model.model_fields.get(part)
        if field is None:
            return []
        ann = field.annotation
        if parts and isinstance(parts[0], str) and parts[0].startswith(VARIANT_TAG):
            nxt = _variant(ann, parts.pop(0))
        else:
            candidates = models_of(ann)
            nxt = candidates[0] if len(candidates) == 1 else None
        if nxt is None:
            return []
        model = nxt
    return list(model.model_fields)


_HEADER = re.compile(r"^\[(\[)?\s*(.+?)\s*\]\]?\s*(?:#.*)?$")
_KEY = re.compile(r"""^(?:"([^"]*)"|'([^']*)'|([A-Za-z0-9_-]+))\s*=""")
_PART = re.compile(r"""\s*(?:"([^"]*)"|'([^']*)'|([^."'\s]+))\s*""")


def _table_name(raw: str) -> str:
    return ".".join("".join(m.groups(default="")) for m in _PART.finditer(raw))


def _find_line(text: str, loc: tuple) -> int | None:
    """Best-effort line number of a field: its key inside its [table] (or the n-th [[table]] of an
    array of tables), else the table's header, else None."""
    if not loc or not isinstance(loc[0], str):
        return None
    table = loc[0]
    key = loc[1] if len(loc) > 1 and isinstance(loc[1], str) else None
    aot = nth = inner = None  # [[table.key]] number nth, and the key inside it
    if key is not None and len(loc) > 2 and isinstance(loc[2], int):
        aot, nth = f"{table}.{key}", loc[2]
        inner = next((p for p in loc[3:] if isinstance(p, str)), None)
    current: tuple[str, int | None] = ("", None)
    seen: dict[str, int] = {}
    headers: dict[tuple[str, int | None], int] = {}
    top: dict[str, int] = {}
    keyed: dict[tuple[tuple[str, int | None], str], int] = {}
    for i, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        m = _HEADER.match(s)
        if m:
            name = _table_name(m.group(2))
            if m.group(1):
                seen[name] = seen.get(name, -1) + 1
                current = (name, seen[name])
            else:
                current = (name, None)
            headers.setdefault(current, i)
            continue
        k = _KEY.match(s)
        if k:
            word = "".join(k.groups(default=""))
            keyed.setdefault((current, word), i)
            if current == ("", None):
                top.setdefault(word, i)
    candidates = []
    if aot is not None:
        candidates += [keyed.get(((aot, nth), inner)), headers.get((aot, nth))]
    if key is not None:
        candidates += [keyed.get(((table, None), key)), headers.get((f"{table}.{key}", 0))]
    candidates += [headers.get((table, None)), top.get(table)]
    return next((c for c in candidates if c is not None), None)


def format_loc(loc: tuple) -> str:
    out = ""
    for p in loc:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


# Characters str.splitlines() breaks on: a message must stay one line whatever the input held.
LINE_BREAKS = re.compile("[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")


def one_line(text: str) -> str:
    return LINE_BREAKS.sub(lambda m: repr(m.group())[1:-1], text)


def _shown(value: Any) -> str:
    """A value as the user wrote it in TOML (true, "30", 1.5), short."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        text = json.dumps(value, ensure_ascii=False)
        return text if len(text) <= 60 else text[:56] + '..."'
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "a list"
    return repr(value)


# What a wrong type is told it should be (strict validation: nothing is converted).
_EXPECTED = {
    "int_type": "expected a whole number",
    "float_type": "expected a number",
    "bool_type": "expected true or false",
    "string_type": "expected a string in quotes",
    "list_type": "expected a list, e.g. [1, 2]",
    "dict_type": "expected a table ({ key = value } or a [section])",
    "model_type": "expected a table ({ key = value } or a [section])",
    "model_attributes_type": "expected a table ({ key = value } or a [section])",
    "finite_number": "expected a finite number",
    "missing": "required setting is missing",
}
_BOUNDS = {
    "greater_than": ("gt", ">"),
    "greater_than_equal": ("ge", ">="),
    "less_than": ("lt", "<"),
    "less_than_equal": ("le", "<="),
}


def reason(err: dict) -> tuple[tuple, str]:
    """(where, what is expected) of one pydantic error."""
    loc = tuple(p for p in err["loc"] if not _is_tag(p))
    kind = err["type"]
    cause = (err.get("ctx") or {}).get("error")
    if isinstance(cause, FieldError):
        return cause.loc, str(cause)
    if kind in _EXPECTED:
        return loc, _EXPECTED[kind]
    if kind in _BOUNDS:
        key, op = _BOUNDS[kind]
        return loc, f"expected a value {op} {err['ctx'][key]}"
    msg = err["msg"].removeprefix("Value error, ")
    return loc, msg.replace("Input should be ", "expected ", 1)


def describe(err: dict, text: str, path: str, root: type[BaseModel]) -> str:
    loc, msg = reason(err)
    line = _find_line(text, loc)
    where = f"{path}:{line}" if line else path
    field = format_loc(loc) or "(top level)"
    if err["type"] == "extra_forbidden":
        raw = [p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-"))]
        allowed = _fields_of(root, tuple(raw[:-1]))
        hint = did_you_mean(str(loc[-1]), allowed)
        expected = f"; allowed here: {', '.join(allowed)}" if allowed else ""
        return f"{where}: unknown setting {field}{hint}{expected}"
    return f"{where}: {field}: {msg}{_got(err)}"


def _got(err: dict) -> str:
    """The "(got VALUE)" suffix, where the value helps the reader find the mistake."""
    value = err.get("input")
    cause = (err.get("ctx") or {}).get("error")
    if isinstance(cause, FieldError):
        value = cause.value
    if value is None or err["type"] == "missing":
        return ""
    if isinstance(value, dict | list) and err["type"] not in _EXPECTED:
        return ""  # the message names the entry at fault
    return f" (got {_shown(value)})"


def first_error(e: ValidationError, describe) -> str:
    # An unknown key first: a misspelt key also makes the setting it meant "missing".
    errs = sorted(e.errors(include_url=False), key=lambda err: err["type"] != "extra_forbidden")
    more = len(errs) - 1
    tail = f" (and {more} more error{'s' if more > 1 else ''})" if more else ""
    return one_line(describe(errs[0]) + tail)
