"""Every third-party module the code imports is declared in pyproject.toml, and every runtime
dependency declared there is imported: an installed package (`pip install .`) has exactly what it
needs (markupsafe was imported by analysis/report.py and arrived only as jinja2's dependency).

Imports are read from the source (AST, imports inside functions included); a module's
distribution comes from the venv's metadata (importlib.metadata.packages_distributions).
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from functools import cache
from importlib.metadata import packages_distributions
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("suites", "servers", "collectors", "analysis", "rundir", "bench", "configs")
# Ours: the packages, and what tests import from their own tree (tests/fixtures/make_runs.py).
FIRST_PARTY = {*PACKAGES, "tests", *(p.stem for p in (REPO / "tests").iterdir())}
# Dev dependencies that are never imported: a pytest plugin found by its entry point, a linter.
NOT_IMPORTED = {"pytest-timeout", "pytest-xdist", "ruff"}


def _canon(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _declared() -> tuple[set[str], set[str]]:
    """(runtime dependencies, every declared dependency) by canonical distribution name."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]

    def names(reqs: list[str]) -> set[str]:
        return {_canon(re.split(r"[\s<>=!~;\[]", r, maxsplit=1)[0]) for r in reqs}

    runtime = names(project["dependencies"])
    extras = set().union(*(names(v) for v in project["optional-dependencies"].values()))
    return runtime, runtime | extras


def _imports(trees: tuple[str, ...]) -> dict[str, set[str]]:
    """Top-level module names imported by the .py files under `trees`, each with where."""
    found: dict[str, set[str]] = {}
    for tree in trees:
        for f in sorted((REPO / tree).rglob("*.py")):
            for node in ast.walk(ast.parse(f.read_text(), str(f))):
                if isinstance(node, ast.Import):
                    mods = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    mods = [node.module]
                else:
                    continue
                for m in mods:
                    top = m.split(".")[0]
                    if top not in FIRST_PARTY and top not in sys.stdlib_module_names:
                        found.setdefault(top, set()).add(str(f.relative_to(REPO)))
    return found


@cache
def _distributions() -> dict[str, list[str]]:
    return packages_distributions()


def _distribution(module: str) -> str | None:
    dists = _distributions().get(module)
    return _canon(dists[0]) if dists else None


def test_every_third_party_import_of_the_package_is_a_runtime_dependency():
    runtime, _ = _declared()
    missing = {
        m: (_distribution(m), sorted(where)[0])
        for m, where in _imports(PACKAGES).items()
        if _distribution(m) not in runtime
    }
    assert missing == {}, f"imported, not in [project] dependencies: {missing}"


def test_every_runtime_dependency_is_imported_by_the_package():
    runtime, _ = _declared()
    used = {_distribution(m) for m in _imports(PACKAGES)}
    assert runtime - used == set(), "declared, never imported"


def test_every_third_party_import_of_the_tests_is_declared():
    _, declared = _declared()
    missing = {
        m: (_distribution(m), sorted(where)[0])
        for m, where in _imports(("tests",)).items()
        if _distribution(m) not in declared
    }
    assert missing == {}, f"imported by tests, declared nowhere: {missing}"
    assert NOT_IMPORTED <= declared
