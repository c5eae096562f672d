"""The shape of the house: blocklab's import graph, read from the source with `ast`.

Every module under src/blocklab is parsed; every import of a blocklab module is an
edge, at module level and inside functions alike (a function-level import is
still a dependency, only a later one). Imports under `if TYPE_CHECKING:` are not
edges: they never run, and an engine's helper modules name their engine's class
that way for the type checker only.

The floors, from the ground up (a module may import its own floor and those
below it; an import of a higher floor "runs back up"):

 1. ground      units, errors, paths, jsonvalue, lazy, engines/service_user, the package's __version__:
                pure helpers, imported by everyone, importing nothing of blocklab's floors above
 2. core        the engine protocol (engines/base, the knob vocabulary engines/vocabulary,
                what an engine declares engines/capabilities, engines/host, the
                engine registry engines/__init__), results files, the experiment file (spec, recipes),
                the plan (grid x repeats), the environment, the kernel probes (probes/)
 3. device      fio, calibration, the device twin (device/)
 4. workloads   what a workload or a feature (system statistics) needs from an engine,
                as dialect protocols (workloads/, features/)
 5. engines     each engine's package (engines/<engine>/): implements the protocols
                of the floors below
 6. analysis    statistics and verdicts, computing only (analysis/, search.py: the
                sequential search is statistics)
 7. views       what people read: report/ (files, figures, and the terminal's tables in
                report/console_tables.py), console.py (the live progress of a run),
                importers/ (other tools' output as runs)
 8. running     runner, run_summary, experiment, claims, lab, owed: a run, cell by cell
 9. fleet       a run over several hosts (fleet/)
10. commands    cli*.py, doctor.py, sql_shortcut.py (--script): the `blocklab` commands

Checked: no import circle between modules; at most MAX_BACK_UP imports running
back up the floors (each one a debt, listed when the test fails); no module over
MAX_LINES lines; no private name (`_x`) imported from another module; analysis/
and probes/ compute and neither draw nor print (matplotlib and rich belong to
report/).
"""

from __future__ import annotations

import ast
import fnmatch
from dataclasses import dataclass
from functools import cache
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "blocklab"
MAX_BACK_UP = 2
MAX_LINES = 600
# the rooms that compute and the libraries that draw or lay out tables: figures live in
# report/, console tables in report/console_tables.py
COMPUTING = ("blocklab.analysis", "blocklab.analysis.*", "blocklab.probes", "blocklab.probes.*")
DRAWING = ("matplotlib", "rich")

# (floor name, module patterns), from the ground up; the first pattern a module matches places it
FLOORS: list[tuple[str, tuple[str, ...]]] = [
    ("ground", ("blocklab", "blocklab.units", "blocklab.errors", "blocklab.paths", "blocklab.jsonvalue", "blocklab.lazy", "blocklab.engines.service_user")),
    ("core", ("blocklab.engines", "blocklab.engines.base", "blocklab.engines.vocabulary",
              "blocklab.engines.capabilities", "blocklab.engines.host", "blocklab.results",
              "blocklab.spec", "blocklab.budget", "blocklab.recipes", "blocklab.plan", "blocklab.environment", "blocklab.probes", "blocklab.probes.*")),
    ("device", ("blocklab.device", "blocklab.device.*")),
    ("workloads", ("blocklab.workloads", "blocklab.workloads.*", "blocklab.features", "blocklab.features.*")),
    ("engines", ("blocklab.engines.*",)),
    ("analysis", ("blocklab.analysis", "blocklab.analysis.*", "blocklab.search")),
    ("views", ("blocklab.report", "blocklab.report.*", "blocklab.console", "blocklab.importers", "blocklab.importers.*")),
    ("running", ("blocklab.runner", "blocklab.run_summary", "blocklab.experiment", "blocklab.claims", "blocklab.lab", "blocklab.owed",
                 "blocklab.tune", "blocklab.tune.*")),
    ("fleet", ("blocklab.fleet", "blocklab.fleet.*")),
    ("commands", ("blocklab.cli", "blocklab.cli_*", "blocklab.doctor", "blocklab.sql_shortcut")),
]


@dataclass(frozen=True)
class Import:
    source: str  # the importing module
    target: str  # the imported module
    names: tuple[str, ...]  # the names taken from it (empty for `import x`)
    line: int

    def where(self) -> str:
        return f"{self.source} -> {self.target} (line {self.line}{': ' + ', '.join(self.names) if self.names else ''})"


@cache
def modules() -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package."""
    found = {}
    for path in sorted((SRC / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_nodes(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement that runs: module level and in functions, not under TYPE_CHECKING."""
    out: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for other in child.orelse:
                    visit(other)
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                out.append(child)
            visit(child)

    visit(tree)
    return out


def _owner(name: str) -> str | None:
    """The module a dotted name lives in ('blocklab.units.fmt_bytes' -> 'blocklab.units')."""
    while name:
        if name in modules():
            return name
        name = name.rpartition(".")[0]
    return None


def _resolve(module: str, node: ast.Import | ast.ImportFrom) -> list[Import]:
    if isinstance(node, ast.Import):
        return [Import(module, target, (), node.lineno) for a in node.names if (target := _owner(a.name))]
    if node.level:
        is_package = modules()[module].name == "__init__.py"
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        origin = ".".join(base + ([node.module] if node.module else []))
    else:
        origin = node.module or ""
    if origin != PACKAGE and not origin.startswith(PACKAGE + "."):
        return []
    out = []
    for alias in node.names:
        submodule = f"{origin}.{alias.name}"
        if submodule in modules():  # `from . import counters`: the submodule itself
            out.append(Import(module, submodule, (), node.lineno))
        elif (target := _owner(origin)) is not None:
            out.append(Import(module, target, (alias.name,), node.lineno))
    return out


@cache
def imports() -> list[Import]:
    out = []
    for module, path in modules().items():
        tree = ast.parse(path.read_text(), str(path))
        for node in _import_nodes(tree):
            out.extend(i for i in _resolve(module, node) if i.target != module)
    return out


def floor_of(module: str) -> int:
    for index, (_, patterns) in enumerate(FLOORS):
        if any(fnmatch.fnmatchcase(module, p) for p in patterns):
            return index
    raise AssertionError(f"{module} stands on no floor: add it to FLOORS in {__file__}")


def module_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in modules()}
    for i in imports():
        graph[i.source].add(i.target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles: strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return found


def back_up_imports() -> list[Import]:
    """One per pair of modules (the first import statement of the pair)."""
    first: dict[tuple[str, str], Import] = {}
    for i in imports():
        if floor_of(i.target) > floor_of(i.source):
            first.setdefault((i.source, i.target), i)
    return list(first.values())


# ---------------------------------------------------------------------- the checks
def test_the_graph_is_read():
    """The reader sees what it should: a known edge of each kind is found."""
    edges = {(i.source, i.target) for i in imports()}
    assert ("blocklab.runner", "blocklab.plan") in edges  # module level, relative
    assert ("blocklab.engines.vocabulary", "blocklab.units") in edges
    assert len(modules()) > 100 and len(edges) > 300


def test_the_checks_see_what_they_look_for():
    """A circle of three is found whole; an import inside a function counts, one
    under TYPE_CHECKING does not."""
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
    code = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import x\ndef f():\n    import y\n"
    assert [n.names[0].name for n in _import_nodes(ast.parse(code)) if isinstance(n, ast.Import)] == ["y"]


def test_every_module_stands_on_a_floor():
    for module in modules():
        floor_of(module)


def test_no_import_circles():
    found = cycles(module_graph())
    ties = [i.where() for i in imports() if any(i.source in c and i.target in c for c in found)]
    assert not found, "import circles: " + "; ".join(" <-> ".join(c) for c in found) + "\ntied by:\n  " + "\n  ".join(ties)


def test_few_imports_run_back_up_the_floors():
    up = back_up_imports()
    listing = "\n  ".join(f"{i.where()}: floor {FLOORS[floor_of(i.source)][0]} imports floor {FLOORS[floor_of(i.target)][0]}" for i in up)
    assert len(up) <= MAX_BACK_UP, f"{len(up)} imports run back up the floors (at most {MAX_BACK_UP}):\n  {listing}"


def test_no_module_over_the_line_limit():
    long = {m: n for m, p in modules().items() if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines (split them by what they hold): {long}"


def _draws(module: str) -> list[str]:
    """What a module does of drawing or printing: imports of matplotlib or rich, print() calls."""
    tree = ast.parse(modules()[module].read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[0] in DRAWING]
        elif isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] in DRAWING:
            found.append(str(node.module))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
            found.append(f"print() at line {node.lineno}")
    return found


def test_analysis_computes_and_never_draws_or_prints():
    computing = [m for m in modules() if any(fnmatch.fnmatchcase(m, p) for p in COMPUTING)]
    drawing = {m: d for m in computing if (d := _draws(m))}
    assert not drawing, f"figures go to report/, console tables to report/console_tables.py: {drawing}"


def test_no_private_name_is_imported_from_another_module():
    private = [i.where() for i in imports() if any(n.startswith("_") and not n.startswith("__") for n in i.names)]
    assert not private, "private names imported across modules (make them public, or move the code):\n  " + "\n  ".join(private)
