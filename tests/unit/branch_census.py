"""Branches on server family/flavor, workload kind/name and storage engine in our source, by AST.

Run from the repository root: `python -m tests.unit.branch_census [--list]` prints, per file, the
lines that branch on them inside and outside the plugin modules (the issue-14 count); the unit
tests use `census()` to keep the suite-config core free of them.

A branch is a source line holding a comparison (==, !=, in, not in) or a dict-literal dispatch
({...}[x], {...}.get(x)) where a string constant (or a dict key) names a server family or flavor,
a workload or an engine (the words below); comparing something called `flavor` with a
non-constant is a family branch too. A comparison of something called kind/flavor/family/
workload/engine(s) or *_kind that names none of them (allocator kinds, fetched-server kinds...)
is 'other'. One line counts once, as the first of family, workload, engine, other it involves.
"""

from __future__ import annotations

import ast
import collections
import sys
from pathlib import Path

FAMILY = {"mariadb", "mysql", "percona", "mongodb", "mongod"}
WORKLOAD = {"sysbench", "iibench", "rww", "oltp_ro", "point_select", "rww_load", "rww_run"}
ENGINE = {"innodb", "rocksdb"}
NAMES = {"kind", "flavor", "family", "workload", "engine", "engines"}
KINDS = ("family", "workload", "engine", "other")
# Where branching on them is the point: workload plugins, the family folders (each family's
# server, option file, driver and storage engines: suites/families/mysql/engines.py) and their
# registry.
PLUGINS = (
    "suites/workloads/",
    "suites/families/",
)
ROOTS = ("suites", "servers", "collectors", "analysis", "rundir")


def _strings(node: ast.AST) -> set[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return set().union(*(_strings(e) for e in node.elts))
    return set()


def _name(node: ast.AST) -> str:
    return node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")


def _kind(consts: set[str], names: list[str]) -> str | None:
    for kind, words in (("family", FAMILY), ("workload", WORKLOAD), ("engine", ENGINE)):
        if consts & words:
            return kind
    if "flavor" in names and not consts:
        return "family"
    if any(n in NAMES or n.endswith("_kind") for n in names):
        return "other"
    return None


def _keys(d: ast.Dict) -> set[str]:
    return set().union(*(_strings(k) for k in d.keys if k is not None))


def branches(source: str) -> dict[int, str]:
    """{line: kind} of the branches in one module's source."""
    out: dict[int, str] = {}
    for node in ast.walk(ast.parse(source)):
        kind = None
        if isinstance(node, ast.Compare) and any(
            isinstance(op, ast.Eq | ast.NotEq | ast.In | ast.NotIn) for op in node.ops
        ):
            operands = [node.left, *node.comparators]
            kind = _kind(set().union(*map(_strings, operands)), [_name(o) for o in operands])
        elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Dict):
            kind = _kind(_keys(node.value), [])
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and isinstance(node.func.value, ast.Dict)
        ):
            kind = _kind(_keys(node.func.value), [])
        if kind and (node.lineno not in out or KINDS.index(kind) < KINDS.index(out[node.lineno])):
            out[node.lineno] = kind
    return out


def census(repo: Path, roots=ROOTS) -> dict[str, dict[int, str]]:
    """{path relative to repo: {line: kind}} for every module under `roots` with a branch."""
    found = {}
    for root in roots:
        for p in sorted((repo / root).rglob("*.py")):
            lines = branches(p.read_text())
            if lines:
                found[str(p.relative_to(repo))] = lines
    return found


def main(argv: list[str]) -> None:
    repo = Path.cwd()
    totals = collections.Counter()
    for rel, lines in census(repo).items():
        where = "plugin" if rel.startswith(PLUGINS) else "outside"
        src = (repo / rel).read_text().splitlines()
        per = collections.Counter(lines.values())
        for kind in KINDS:
            totals[(where, kind)] += per[kind]
        named = {k: n for k, n in per.items() if k != "other"}
        if named:
            print(f"{where:8s}{rel}: {named}")
        if "--list" in argv:
            for line, kind in sorted(lines.items()):
                if kind != "other":
                    print(f"    {line}: [{kind}] {src[line - 1].strip()[:90]}")
    for where in ("outside", "plugin"):
        print(f"{where}: " + ", ".join(f"{k} {totals[(where, k)]}" for k in KINDS))


if __name__ == "__main__":
    main(sys.argv[1:])
