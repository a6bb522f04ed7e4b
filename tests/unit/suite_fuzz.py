"""Random suite files built from the models: every section and key, nested tables, wrong types.

Shared by the fuzz tests of suites/suite/model.py (tests/unit/test_config.py) and of the CLI path
(tests/unit/test_config_cli.py). The keys come from the models, so a new setting is fuzzed without
touching this file; values are mostly of the field's type (often at its edges) so that the fuzzing
gets past the type checks to the rules behind them, and sometimes garbage.
"""

from __future__ import annotations

import json
import math
import typing

from hypothesis import strategies as st
from pydantic import BaseModel

from suites.config.errors import models_of
from suites.suite.model import CustomAllocator, Suite

# Each section's models: one, or (for [server]) each server family's.
SECTIONS: dict[str, list[type[BaseModel]]] = {
    k: models_of(f.annotation) for k, f in Suite.model_fields.items()
}
ALL_KEYS = sorted(
    set(SECTIONS)
    | {k for m in (*sum(SECTIONS.values(), []), CustomAllocator) for k in m.model_fields}
    | {"x", "nmae", "thread"}
)
SETTING_KEYS = [
    "max_connections",
    "max_allowed_packet",
    "innodb_adaptive_hash_index",
    "port",
    "loose-socket",
    "bind-address",
    "bad key",
    "",
    "x.y",
]
STRINGS = st.one_of(
    st.sampled_from(
        [
            "",
            "x",
            "all",
            "glibc",
            "jemalloc",
            "oltp_ro",
            "point_select",
            "system",
            "never",
            "iibench",
            "sysbench",
            "mongodb",
            "mysqld",
            "/nonexistent/x",
            "relative/x",
            "/bin/sh",
            "/usr",
            "~/x",
            "2000",
            "16M",
            "a\nb",
            "a\u2028b",
            "\x00",
        ]
    ),
    st.text(max_size=10),
)
NUMBERS = st.one_of(
    st.sampled_from([0, 1, -1, 2, 3, 4, 8, 100, 1536, 16001, 10**6, 10**12, 2**63]),
    st.integers(-(10**6), 10**6),
    st.sampled_from(
        [0.0, 0.05, 0.1, 0.5, 1.5, 2.0, 30.0, 1e-9, 1e300, math.inf, -math.inf, math.nan]
    ),
    st.floats(allow_nan=True),
)
SCALARS = st.one_of(NUMBERS, st.booleans(), STRINGS)
GARBAGE = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(ALL_KEYS), inner, max_size=4)
    ),
    max_leaves=10,
)


def _typed(annotation) -> st.SearchStrategy:
    """Values of roughly the field's type (often valid, often at the edges), so that fuzzing gets
    past the type checks to the rules behind them."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return _table(annotation)
    if origin is typing.Literal:
        return st.sampled_from(args)
    if origin is list:
        return st.lists(_typed(args[0]), max_size=4)
    if origin is dict:
        keys = st.one_of(st.sampled_from(SETTING_KEYS), st.text(max_size=6))
        return st.dictionaries(keys, _typed(args[1]), max_size=4)
    if args:  # a union
        return st.one_of(*(_typed(a) for a in args))
    return {int: NUMBERS, float: NUMBERS, bool: st.booleans(), str: STRINGS}.get(
        annotation, GARBAGE
    )


def _sometimes(rare: st.SearchStrategy, usual: st.SearchStrategy, odds: int = 8):
    """`rare` one time in `odds`: mostly plausible input gets past one error to the rules behind."""
    return st.integers(1, odds).flatmap(lambda i: rare if i == 1 else usual)


def _table(model: type[BaseModel]) -> st.SearchStrategy:
    def value(key: str) -> st.SearchStrategy:
        field = model.model_fields.get(key)
        return GARBAGE if field is None else _sometimes(GARBAGE, _typed(field.annotation))

    own = st.lists(st.sampled_from(list(model.model_fields)), unique=True, max_size=6)
    foreign = _sometimes(
        st.lists(st.sampled_from(ALL_KEYS), min_size=1, max_size=2), st.just([]), odds=30
    )
    keys = st.tuples(own, foreign).map(lambda t: list(dict.fromkeys(t[0] + t[1])))
    return keys.flatmap(lambda ks: st.fixed_dictionaries({k: value(k) for k in ks}))


@st.composite
def suite_docs(draw) -> dict:
    doc = {}
    names = _sometimes(
        st.sampled_from(["x", "sever", "threads"]), st.sampled_from(list(SECTIONS)), odds=30
    )
    for name in draw(st.lists(names, unique=True, max_size=len(SECTIONS))):
        models = SECTIONS.get(name)
        wrong = models is None or draw(st.integers(1, 30)) == 1  # a section of the wrong type
        doc[name] = draw(GARBAGE if wrong else st.sampled_from(models).flatmap(_table))
    return doc


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return {"nan": "nan", "inf": "inf", "-inf": "-inf"}.get(repr(v), repr(v))
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return "{" + ", ".join(f"{json.dumps(k)} = {_toml_value(x)}" for k, x in v.items()) + "}"


def toml_text(doc: dict) -> str:
    """Tables as [headers] (so that line numbers are exercised), anything else as top-level keys."""
    top = [f"{json.dumps(k)} = {_toml_value(v)}" for k, v in doc.items() if not isinstance(v, dict)]
    tables = [
        f"[{json.dumps(k)}]\n"
        + "\n".join(f"{json.dumps(kk)} = {_toml_value(vv)}" for kk, vv in v.items())
        for k, v in doc.items()
        if isinstance(v, dict)
    ]
    return "\n".join(top + tables) + "\n"
