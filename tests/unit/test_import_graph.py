"""The layers of docs/architecture.md, checked on the sources: the import graph (from the AST, every
first-party import wherever it sits) has no cycle between modules nor between packages (the rooms:
suites.*, servers.*, and the top-level packages), and every edge points the way the layers say;
the command line's start-up does not load what only running a suite needs.

Run `python -m tests.unit.test_import_graph` for the census the architecture note quotes: modules,
cycles, the share of first-party imports that sit inside functions (and where), the largest modules.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("suites", "servers", "collectors", "analysis", "rundir", "bench")

# Which of our packages each may import (a prefix matches the package and its modules). What a
# layer may not import is what it does not list: rundir imports nothing of ours; analysis reads run
# directories only; the plugins and datasets never reach up into the runner or the CLI.
ALLOWED = {
    "rundir": ("rundir",),
    "collectors": ("collectors", "rundir"),
    "analysis": ("analysis", "rundir"),
    "servers": ("servers", "collectors", "rundir"),
    "suites": (),  # the package docstring
    "suites.errors": ("servers.interrupts",),  # one Interrupted class for both
    "suites.target": (),  # ClientTarget: below the families and the workloads, which both use it
    # the vocabulary of suite files, which the plugins build their sections on: no registry
    "suites.config": (
        "suites.config",
        "suites.errors",
        "servers",
        "collectors",
        "rundir",
    ),
    # the Suite model, assembled from config's core sections and the registered plugins' own
    "suites.suite": (
        "suites.suite",
        "suites.config",
        "suites.errors",
        "suites.families",
        "suites.workloads",
        "servers",
        "collectors",
        "rundir",
    ),
    "suites.families": (
        "suites.families",
        "suites.config",
        "suites.errors",
        "suites.target",
        "suites.workloads",
        "suites.datasets",
        "suites.runner.preflight",
        "servers",
        "collectors",
        "rundir",
    ),
    "suites.workloads": (
        "suites.workloads",
        "suites.config",
        "suites.errors",
        "suites.target",
        "suites.remote",
        "servers",
        "collectors",
        "rundir",
    ),
    # remote owns client hosts and ssh (spawn.py); the levels run over it are the workloads'
    # (suites/workloads/pylevel.py, level_agent.py), so remote imports no workload
    "suites.remote": (
        "suites.remote",
        "suites.errors",
        "servers",
        "collectors",
        "rundir",
    ),
    "suites.datasets": (
        "suites.datasets",
        "suites.config",
        "suites.errors",
        "suites.target",
        "suites.families",
        "suites.workloads",
        "servers",
        "collectors",
        "rundir",
    ),
    "suites.runner": (
        "suites.runner",
        "suites.suite",
        "suites.config",
        "suites.errors",
        "suites.target",
        "suites.families",
        "suites.workloads",
        "suites.datasets",
        "suites.remote",
        "suites.kit.manifest",  # the kit a run is made with, recorded in its manifest
        "servers",
        "collectors",
        "rundir",
        "analysis",
    ),
    # `mallocsweep tune`: runs arms through the runner, reads their verdicts, writes its files
    "suites.tune": (
        "suites.tune",
        "suites.suite",
        "suites.config",
        "suites.errors",
        "suites.runner",
        "servers",
        "collectors",
        "rundir",
        "analysis",
    ),
    # The kit (issue 37): its build reuses the server roots' code; the runner reads its manifest.
    "suites.kit": ("suites.kit", "suites.errors", "servers", "collectors", "rundir"),
    "suites.cli": ("suites", "servers", "collectors", "rundir", "analysis"),
    "bench": PACKAGES,
}


def modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for p in (REPO / pkg).rglob("*.py"):
            parts = list(p.relative_to(REPO).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = p
    return out


def _resolve(name: str, mods: dict[str, Path]) -> str | None:
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name or None


def imports(mods: dict[str, Path]) -> dict[str, list[tuple[str, int, bool]]]:
    """module -> [(imported module, line, inside a function)]. `from pkg import sub` is an edge to
    pkg.sub only (pkg itself runs, but it is a package __init__ that holds no imports of ours)."""
    return {mod: _edges(mod, path, mods) for mod, path in mods.items()}


def _edges(mod: str, path: Path, mods: dict[str, Path]) -> list[tuple[str, int, bool]]:
    edges: list[tuple[str, int, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for ch in ast.iter_child_nodes(node):
            if isinstance(ch, ast.Import | ast.ImportFrom):
                if isinstance(ch, ast.Import):
                    names = [a.name for a in ch.names]
                elif ch.level:
                    names = []  # the project uses absolute imports only (ruff's TID252)
                else:
                    names = [f"{ch.module}.{a.name}" for a in ch.names]
                for n in names:
                    if n.split(".")[0] in PACKAGES:
                        target = _resolve(n, mods)
                        if target and target != mod:
                            edges.append((target, ch.lineno, in_function))
            func = isinstance(ch, ast.FunctionDef | ast.AsyncFunctionDef)
            visit(ch, in_function or func)

    visit(ast.parse(path.read_text()), False)
    return edges


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        found.append(sorted(comp))
    return found


def _layer(mod: str) -> str:
    best = ""
    for layer in ALLOWED:
        if (mod == layer or mod.startswith(layer + ".")) and len(layer) > len(best):
            best = layer
    return best


def test_no_import_cycles():
    mods = modules()
    graph = {m: {t for t, _, _ in e} for m, e in imports(mods).items()}
    assert cycles(graph) == []


# No edge between packages may close a cycle. The last two (suites.config -> the family and workload
# registries, issue 32) went when the Suite model moved above both (suites/suite/): config is the
# vocabulary the plugins build on and imports none of them. Kept empty, and checked to be.
KNOWN_BACK_EDGES: set[tuple[str, str]] = set()


def room(mod: str, mods: dict[str, Path]) -> str:
    """The package a module is in, as the layers count them: suites.X and servers.X for the
    subpackages of those two, else the top-level package (suites.errors is in suites)."""
    parts = mod.split(".")
    if parts[0] in ("suites", "servers") and len(parts) >= 2:
        sub = ".".join(parts[:2])
        if sub in mods and mods[sub].name == "__init__.py":
            return sub
    return parts[0]


def package_graph(mods: dict[str, Path]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for m, edges in imports(mods).items():
        a = room(m, mods)
        graph.setdefault(a, set())
        for t, _, _ in edges:
            b = room(t, mods)
            graph.setdefault(b, set())
            if a != b:
                graph[a].add(b)
    return graph


def test_no_cycles_between_packages():
    mods = modules()
    assert KNOWN_BACK_EDGES == set()
    assert cycles(package_graph(mods)) == []


def test_rooms_are_the_subpackages():
    mods = modules()
    assert room("suites.config.sections", mods) == "suites.config"
    assert room("suites.suite.model", mods) == "suites.suite"
    assert room("suites.workloads.iibench.spec", mods) == "suites.workloads"
    assert room("servers.acquire.fetch", mods) == "servers.acquire"
    assert room("analysis.verdicts", mods) == "analysis"
    assert room("servers.launch", mods) == "servers" and room("suites.target", mods) == "suites"
    # a package cycle is found even when no module cycle exists
    assert cycles({"p": {"q"}, "q": {"p"}}) == [["p", "q"]]


def test_cycle_finder_finds_one():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_every_import_points_the_way_the_layers_say():
    mods = modules()
    wrong = []
    for mod, edges in imports(mods).items():
        layer = _layer(mod)
        assert layer, f"{mod}: in no layer of ALLOWED (add it, and to docs/architecture.md)"
        for target, line, _ in edges:
            ok = any(target == a or target.startswith(a + ".") for a in ALLOWED[layer])
            if not ok:
                wrong.append(f"{mods[mod].relative_to(REPO)}:{line}: {mod} -> {target}")
    assert wrong == []


def test_the_command_line_starts_without_the_runtime():
    """`mallocsweep --help` (and so every refusal of bad arguments) loads neither the statistics
    and plotting libraries nor the runner: why the subcommands import inside run()."""
    code = (
        "import sys\nfrom suites.cli.main import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = ('scipy', 'matplotlib', 'numpy', 'suites.runner.matrix', 'analysis.report')\n"
        "print('loaded:' + ','.join(m for m in heavy if m in sys.modules), file=sys.stderr)"
    )
    err = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    ).stderr
    assert err.strip().splitlines()[-1] == "loaded:", err[-300:]


def census() -> str:
    mods = modules()
    imps = imports(mods)
    graph = {m: {t for t, _, _ in e} for m, e in imps.items()}
    inner = [(m, line, t) for m, e in imps.items() for t, line, f in e if f]
    total = sum(len(e) for e in imps.values())
    lines = [
        f"modules: {len(mods)}; first-party imports: {total}, inside functions: {len(inner)} "
        f"({100 * len(inner) / max(total, 1):.1f}%); import cycles: {len(cycles(graph))}; "
        f"package cycles: {len(cycles(package_graph(mods)))} "
        f"(known back edges: {len(KNOWN_BACK_EDGES)})",
        "inside functions, by module:",
    ]
    by_mod: dict[str, int] = {}
    for m, _, _ in inner:
        by_mod[m] = by_mod.get(m, 0) + 1
    lines += [f"  {n:3d}  {m}" for m, n in sorted(by_mod.items(), key=lambda x: -x[1])]
    sizes = sorted(((len(p.read_text().splitlines()), m) for m, p in mods.items()), reverse=True)
    lines.append("largest modules (lines):")
    lines += [f"  {n:5d}  {m}" for n, m in sizes[:12]]
    per_pkg: dict[str, int] = {}
    for n, m in sizes:
        key = ".".join(m.split(".")[:2]) if m.startswith("suites.") else m.split(".")[0]
        per_pkg[key] = per_pkg.get(key, 0) + n
    lines.append("lines per package:")
    lines += [f"  {n:6d}  {k}" for k, n in sorted(per_pkg.items(), key=lambda x: -x[1])]
    return "\n".join(lines)


if __name__ == "__main__":
    print(census())
