"""An allocator's search space: declared beside its registry entry (configs/allocators.toml,
`[allocator.NAME.tune]`), narrowed by the user's space file (`[space.NAME] knob = [lo, hi]`).

Every value is checked here, before anything starts: an unknown knob, one of another allocator,
a value outside the declared range, a choice the allocator does not offer. Each message names
the file, the field and the value (exit 2 through suites/cli/main.py).

A setting (knob -> value) becomes the arm's environment the way the allocator reads it:
MALLOC_CONF=key:value,... (jemalloc), GLIBC_TUNABLES items glibc.malloc.KEY=value appended with
':' (glibc: never replacing a user's own), or one variable per knob (gperftools, mimalloc).
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path

from servers.allocators import DEFAULT_REGISTRY
from suites.errors import SuiteError

WRITES = ("MALLOC_CONF", "GLIBC_TUNABLES", "env")
KINDS = ("int", "float", "choice")
_KNOB_FIELDS = {*KINDS, "log", "env", "optional"}
# An optional knob may also stay unset (the allocator's own default): the sampler draws this
# switch beside its value (`switch(name)`), and a trial whose switch says UNSET does not write it.
# glibc's thresholds need it: setting either turns glibc's dynamic mmap threshold off, which is
# not a value of the knob but a different behaviour (mallopt(3)).
SET, UNSET = "set", "unset"


def switch(name: str) -> str:
    """The sampler's parameter that says whether optional knob `name` is set."""
    return f"{name}?"


# A float knob is searched on a grid of this many steps across its range: the value written
# into the environment is then exactly the value searched and recorded (no 0.30000000000000004).
FLOAT_STEPS = 100


@dataclass(frozen=True)
class Knob:
    name: str
    kind: str  # "int" | "float" | "choice"
    low: float | None = None
    high: float | None = None
    log: bool = False
    choices: tuple[str, ...] = ()
    env: str | None = None  # writes = "env": the variable this knob is
    optional: bool = False  # may stay unset (the allocator's default): module constants SET/UNSET

    def check(self, value) -> str | None:
        """Why `value` is not a value of this knob (None: it is)."""
        if self.kind == "choice":
            return None if str(value) in self.choices else f"expected one of {list(self.choices)}"
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"expected a number in [{_num(self.low)}, {_num(self.high)}]"
        if self.kind == "int" and not float(value).is_integer():
            return "expected an integer"
        if not (self.low <= value <= self.high):
            return f"outside the allowed range [{_num(self.low)}, {_num(self.high)}]"
        return None

    def text(self, value) -> str:
        """The value as the allocator reads it."""
        if self.kind == "int":
            return str(int(value))
        if self.kind == "float":
            return f"{float(value):g}"
        return str(value)

    @property
    def step(self) -> float | None:
        return None if self.kind != "float" else (self.high - self.low) / FLOAT_STEPS


@dataclass(frozen=True)
class Space:
    allocator: str
    writes: str
    knobs: dict[str, Knob]
    source: str  # where it was declared (and narrowed): for messages and tune.json
    # Settings DBAs deploy, tried first (name -> {knob: value}; knobs not named are left unset,
    # the allocator's defaults: suites/tune/study.py _applied): a search that starts from random
    # draws may never come near them in a two-hour budget
    presets: dict[str, dict] = field(default_factory=dict)

    def preset_params(self) -> list[tuple[str, dict]]:
        """(name, the sampler's params) of every preset whose values this space (narrowed or not)
        holds; one that a space file narrowed away is not tried."""
        out = []
        for name, values in self.presets.items():
            params = {}
            for key, value in values.items():
                knob = self.knobs.get(key)
                if knob is None or knob.check(value) is not None:
                    break
                if knob.optional:
                    params[switch(key)] = SET
                if knob.kind == "choice":
                    params[key] = knob.text(value)
                elif knob.kind == "int":
                    params[key] = int(value)
                else:  # on the searched grid (FLOAT_STEPS), as the sampler draws it
                    k = round((float(value) - knob.low) / knob.step)
                    params[key] = round(knob.low + k * knob.step, 12)
            else:
                out.append((name, params))
        return out

    def env_of(self, setting: dict) -> tuple[dict[str, str], tuple[str, ...]]:
        """(environment, GLIBC_TUNABLES items) that give a server this setting."""
        items = [(self.knobs[k], v) for k, v in setting.items()]
        if self.writes == "MALLOC_CONF":
            return {"MALLOC_CONF": ",".join(f"{k.name}:{k.text(v)}" for k, v in items)}, ()
        if self.writes == "GLIBC_TUNABLES":
            return {}, tuple(f"glibc.malloc.{k.name}={k.text(v)}" for k, v in items)
        return {k.env: k.text(v) for k, v in items}, ()

    def will_not_take(self, setting: dict, cpus: int | None = None) -> str | None:
        """Why the library would run a setting otherwise than asked (the live read-back would
        then fail the trial after a round of lives), or None. Known: jemalloc's percpu_arena
        "percpu" keeps an arena per CPU and raises narenas to the CPU count (seen twice in a
        tune on 2 cores: narenas:1 ran as opt.narenas 2; "phycpu" with narenas:1 took)."""
        cpus = cpus or os.cpu_count() or 1
        if self.writes == "MALLOC_CONF" and setting.get("percpu_arena") == "percpu":
            n = setting.get("narenas")
            if n is not None and int(n) < cpus:
                return (
                    f"narenas={n} with percpu_arena=percpu: jemalloc raises narenas to the "
                    f"{cpus} CPUs, so the setting would not take"
                )
        return None

    def to_json(self) -> dict:
        return {
            "allocator": self.allocator,
            "writes": self.writes,
            "knobs": {
                n: {"kind": k.kind, "low": k.low, "high": k.high, "log": k.log,
                    "choices": list(k.choices), "env": k.env,
                    **({"optional": True} if k.optional else {})}
                for n, k in self.knobs.items()
            },
        }  # fmt: skip


def _num(x) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


def _registry(path: Path | None) -> tuple[Path, dict]:
    path = Path(path) if path else DEFAULT_REGISTRY
    try:
        return path, tomllib.loads(path.read_text()).get("allocator", {})
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise SuiteError(f"{path}: cannot read the allocator registry: {e}") from None


def declared_spaces(registry: Path | None = None) -> dict[str, Space]:
    """Every allocator that declares a search space, by name (the entry's own `tune` table:
    a variant's settings are not a starting point to tune from)."""
    path, entries = _registry(registry)
    out = {}
    for name, entry in entries.items():
        table = entry.get("tune") if isinstance(entry, dict) else None
        if table is not None:
            out[name] = _space(path, name, table)
    return out


def _space(path: Path, name: str, table) -> Space:
    where = f"{path}: allocator.{name}.tune"
    if not isinstance(table, dict):
        raise SuiteError(f"{where}: expected a table")
    writes = table.get("writes")
    if writes not in WRITES:
        raise SuiteError(f"{where}.writes: expected one of {', '.join(WRITES)}, got {writes!r}")
    knobs = {}
    for key, spec in table.items():
        if key in ("writes", "presets"):
            continue
        knobs[key] = _knob(f"{where}.{key}", key, spec, writes)
    if not knobs:
        raise SuiteError(f"{where}: declares no knob")
    return Space(name, writes, knobs, str(path), _presets(where, table.get("presets", {}), knobs))


def _presets(where: str, table, knobs: dict[str, Knob]) -> dict[str, dict]:
    if not isinstance(table, dict):
        raise SuiteError(f"{where}.presets: expected a table of name = {{ knob = value, ... }}")
    out = {}
    for name, values in table.items():
        at = f"{where}.presets.{name}"
        if not isinstance(values, dict) or not values:
            raise SuiteError(f"{at}: expected {{ knob = value, ... }}, got {values!r}")
        for key, value in values.items():
            if key not in knobs:
                raise SuiteError(f"{at}.{key}: not a knob of this space")
            why = knobs[key].check(value)
            if why:
                raise SuiteError(f"{at}.{key} = {value!r}: {why}")
        out[name] = dict(values)
    return out


def _knob(where: str, name: str, spec, writes: str) -> Knob:
    if not isinstance(spec, dict) or set(spec) - _KNOB_FIELDS:
        raise SuiteError(
            f"{where}: expected {{ int|float|choice = ..., log?, env?, optional? }}, got {spec!r}"
        )
    optional = spec.get("optional", False)
    if not isinstance(optional, bool):
        raise SuiteError(f"{where}.optional: expected true or false, got {optional!r}")
    kinds = [k for k in KINDS if k in spec]
    if len(kinds) != 1:
        raise SuiteError(f"{where}: expected exactly one of int, float, choice")
    kind = kinds[0]
    env = spec.get("env")
    if (writes == "env") != isinstance(env, str):
        raise SuiteError(f'{where}.env: needed exactly when writes = "env", got {env!r}')
    if kind == "choice":
        choices = spec["choice"]
        if (
            not isinstance(choices, list)
            or not choices
            or not all(isinstance(c, str) and c for c in choices)
        ):
            raise SuiteError(f"{where}.choice: expected a list of strings, got {choices!r}")
        return Knob(name, kind, choices=tuple(choices), env=env, optional=optional)
    bounds = spec[kind]
    if (
        not isinstance(bounds, list)
        or len(bounds) != 2
        or not all(isinstance(b, int | float) and not isinstance(b, bool) for b in bounds)
        or bounds[0] >= bounds[1]
        or (kind == "int" and not all(isinstance(b, int) for b in bounds))
    ):
        raise SuiteError(f"{where}.{kind}: expected [low, high] with low < high, got {bounds!r}")
    log = spec.get("log", False)
    if not isinstance(log, bool) or (log and bounds[0] <= 0):
        raise SuiteError(f"{where}.log: true needs a positive low bound, got {bounds!r}")
    cast = int if kind == "int" else float
    return Knob(name, kind, cast(bounds[0]), cast(bounds[1]), log, env=env, optional=optional)


def space_of(allocator: str, registry: Path | None = None) -> Space:
    """The declared space of `allocator`; a one-line error naming those that have one."""
    spaces = declared_spaces(registry)
    if allocator not in spaces:
        raise SuiteError(
            f"--allocator {allocator}: no search space is declared for it; tunable: "
            f"{', '.join(spaces)}"
        )
    return spaces[allocator]


def narrow(space: Space, file: Path, registry: Path | None = None) -> Space:
    """`space` narrowed by the user's space file: `[space.NAME] knob = [lo, hi]` (numbers inside
    the declared range), `knob = ["a", "b"]` (a subset of the choices), `knob = value` (fixed,
    always set) or, for an optional knob, `knob = "unset"` (never set: out of the search)."""
    try:
        data = tomllib.loads(Path(file).read_text())
    except FileNotFoundError:
        raise SuiteError(f"--space {file}: no such file") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise SuiteError(f"--space {file}: cannot read it: {e}") from None
    extra = sorted(set(data) - {"space"})
    if extra:
        raise SuiteError(
            f"{file}: {extra[0]}: unknown table; expected only [space.{space.allocator}]"
        )
    tables = data.get("space", {})
    if not isinstance(tables, dict):
        raise SuiteError(f"{file}: space: expected [space.{space.allocator}] tables")
    others = declared_spaces(registry)
    for name in tables:
        if name != space.allocator:
            raise SuiteError(
                f"{file}: space.{name}: this tune is of {space.allocator} (--allocator); "
                f"{name}'s knobs do not apply to it"
            )
    mine = tables.get(space.allocator)
    if mine is None:
        raise SuiteError(f"{file}: no [space.{space.allocator}] table")
    knobs = dict(space.knobs)
    for key, value in mine.items():
        where = f"{file}: space.{space.allocator}.{key}"
        if key not in knobs:
            owner = next((n for n, s in others.items() if key in s.knobs), None)
            why = f"a knob of {owner}, not of {space.allocator}" if owner else "unknown knob"
            raise SuiteError(f"{where} = {value!r}: {why}; known: {', '.join(space.knobs)}")
        if value == UNSET and knobs[key].optional:
            del knobs[key]  # left at the allocator's default in every trial
            continue
        knobs[key] = _narrowed(where, knobs[key], value)
    if not knobs:
        raise SuiteError(f"{file}: space.{space.allocator}: every knob is unset; nothing to search")
    return replace(space, knobs=knobs, source=f"{space.source} narrowed by {file}")


def _narrowed(where: str, knob: Knob, value) -> Knob:
    if knob.kind == "choice":
        given = value if isinstance(value, list) else [value]
        for v in given:
            why = knob.check(v)
            if why:
                raise SuiteError(f"{where} = {v!r}: {why}")
        return replace(knob, choices=tuple(dict.fromkeys(str(v) for v in given)))
    if isinstance(value, list):
        if len(value) != 2:
            raise SuiteError(f"{where} = {value!r}: expected [low, high] or one value")
        for v in value:
            why = knob.check(v)
            if why:
                raise SuiteError(f"{where} = {v!r}: {why}")
        lo, hi = value
        if lo > hi:
            raise SuiteError(f"{where} = {value!r}: low above high")
        if knob.log and lo <= 0:
            raise SuiteError(f"{where} = {value!r}: this knob is searched on a log scale; low > 0")
        if lo == hi:
            return _fixed(knob, lo)
        cast = int if knob.kind == "int" else float
        return replace(knob, low=cast(lo), high=cast(hi))
    why = knob.check(value)
    if why:
        raise SuiteError(f"{where} = {value!r}: {why}")
    return _fixed(knob, value)


def _fixed(knob: Knob, value) -> Knob:
    """The knob fixed at one value: a choice of one, always set, written as the allocator reads
    it."""
    return replace(knob, kind="choice", choices=(knob.text(value),), low=None, high=None,
                   optional=False)  # fmt: skip
