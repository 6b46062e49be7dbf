"""Nothing hooks a forward by swapping a stack's `ops` or wrapping them in a proxy (issue 35, item 2): how attention
reads and what a forward keeps are its `ForwardContext`'s. Read from the source: the only assignment to an `ops`
attribute is `Model.with_ops` (the same weights on another backend), and a `__getattr__` is defined only where it
is no ops proxy."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "spinfc"
# where a `__getattr__` is not an ops proxy: a module's lazy imports, and the engine's graph wrapper of a stack
GETATTR_ALLOWED = {"runtime/weights/__init__.py": "module", "backend/graphs.py": "GraphedModel"}


def _functions(tree: ast.AST):
    """(enclosing class or None, function) for every function of a module."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    yield node.name, item
    for item in getattr(tree, "body", []):
        if isinstance(item, ast.FunctionDef):
            yield None, item


def _assigned(node: ast.AST):
    """The attributes an assignment statement writes (tuple targets spelled out)."""
    targets = node.targets if isinstance(node, ast.Assign) else \
        [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
    while targets:
        target = targets.pop()
        if isinstance(target, ast.Tuple):
            targets.extend(target.elts)
        elif isinstance(target, ast.Attribute):
            yield target


def test_only_with_ops_assigns_a_stacks_ops():
    found = []
    for path in PACKAGE.rglob("*.py"):
        for owner, function in _functions(ast.parse(path.read_text())):
            if function.name in ("with_ops", "__init__"):  # a backend chosen at build time, or another for a copy
                continue
            for node in ast.walk(function):
                found += [f"{path.relative_to(PACKAGE)}:{node.lineno} ({owner}.{function.name})"
                          for target in _assigned(node) if target.attr == "ops"]
    assert not found, f"an `ops` swapped outside Model.with_ops: {found}"


def test_no_getattr_proxies():
    found = []
    for path in PACKAGE.rglob("*.py"):
        relative = path.relative_to(PACKAGE).as_posix()
        for owner, function in _functions(ast.parse(path.read_text())):
            if function.name == "__getattr__" and GETATTR_ALLOWED.get(relative) != (owner or "module"):
                found.append(f"{relative}:{function.lineno} ({owner})")
    assert not found, f"a __getattr__ proxy: {found}"
