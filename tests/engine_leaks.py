"""The guard of DESIGN.md's rule "capabilities are data the engine declares":
code outside engines/ never names an engine, never guesses one from the keys of
its metrics, and never probes an engine or a dialect for optional attributes.

`leaks_in(path)` reads one Python file (its syntax tree, docstrings and prose left
alone) and lists every leak, each as "file:line: kind: what"; tests/test_engine_plugin.py
runs it on src/ and on a file with injected leaks (the guard's own test)."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from pathlib import Path

from blocklab import engines
from blocklab.engines.base import DialectBase, Engine, EngineBase

# prefixes of engine metrics the issue named, beside those the engines declare (Capabilities.own_metrics)
NAMED_PREFIXES = ("innodb.", "data_file.", "journal_", "bgwriter", "pg_stat", "performance_schema", "rocksdb.")
ENGINE_ISH = re.compile(r"engine|dialect|plugin", re.IGNORECASE)
NAME_ATTRIBUTES = ("name", "kind", "engine_kind")  # `engine.name == ...` compares a name


def engine_names() -> set[str]:
    return set(engines.available(listed_only=True))


def metric_prefixes() -> tuple[str, ...]:
    declared = {p for kind in engines.available() for p in engines.engine_class(kind).capabilities.own_metrics}
    return tuple(sorted(declared | set(NAMED_PREFIXES)))


def engine_attributes() -> set[str]:
    """Every attribute an engine class or a dialect of one has (a getattr of one of
    these names is a probe for an optional capability)."""
    names: set[str] = set()
    classes: list[type] = [Engine, EngineBase, DialectBase]
    for kind in engines.available(listed_only=False):
        cls = engines.engine_class(kind)
        classes += [cls, *cls.dialects.values()]
    for cls in classes:
        for klass in cls.__mro__:
            if klass is object:
                continue
            names |= {n for n in (*vars(klass), *vars(klass).get("__annotations__", {})) if not n.startswith("_")}
    return names


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                out.add(id(first.value))
    return out


def leaks_in(path: Path, names: Iterable[str] | None = None, prefixes: Iterable[str] | None = None,
             attributes: Iterable[str] | None = None) -> list[str]:
    names = set(engine_names() if names is None else names)
    prefixes = tuple(metric_prefixes() if prefixes is None else prefixes)
    attributes = set(engine_attributes() if attributes is None else attributes)
    text = path.read_text()
    tree = ast.parse(text, str(path))
    docs = _docstrings(tree)
    out: list[str] = []

    def leak(node: ast.AST, kind: str, what: str) -> None:
        out.append(f"{path}:{getattr(node, 'lineno', 0)}: {kind}: {what}")

    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            value = node.value
            if value.split() != [value]:
                continue  # prose (a help text, a message), not a key or a name
            if value.lower() in names:
                leak(node, "engine name", repr(value))
            elif value.startswith(prefixes):
                leak(node, "engine metric key", repr(value))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr"):
            if not node.args:
                continue
            target = ast.get_source_segment(text, node.args[0]) or ""
            attribute = node.args[1].value if len(node.args) > 1 and isinstance(node.args[1], ast.Constant) else None
            if ENGINE_ISH.search(target) or attribute in attributes:
                leak(node, f"{node.func.id} probe", ast.get_source_segment(text, node) or node.func.id)
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            for side in sides:
                if isinstance(side, ast.Attribute) and side.attr in NAME_ATTRIBUTES and ENGINE_ISH.search(ast.unparse(side.value)) or isinstance(side, ast.Name) and side.id == "engine_kind":
                    leak(node, "engine name compared", ast.get_source_segment(text, node) or "")
    return out


def leaks_outside_engines(src: Path) -> list[str]:
    names, prefixes, attributes = engine_names(), metric_prefixes(), engine_attributes()
    out: list[str] = []
    for path in sorted(src.rglob("*.py")):
        if (src / "engines") in path.parents:
            continue
        out += leaks_in(path, names, prefixes, attributes)
    return out
