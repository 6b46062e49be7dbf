"""The import graph of spinfc, walked from the source (every import, at module level or inside a function): no
circle, and nothing imported from a later stage of the pipeline (DESIGN.md: body/pack -> frontend -> passes ->
backend -> runtime -> server and the commands). None is left (issue 35): a new one fails here."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "spinfc"

# The pipeline's stages, earliest first: a module imports only from its own stage or an earlier one.
LAYERS = (
    {"errors", "shapes", "ir", "metrics"},  # values every stage shares
    {"config", "registry", "whole_files"},  # settings, where models and tokenizers are found, whether files are whole
    {"packsrc", "frontend", "wire", "media"},  # what a request or a pack says, read and checked
    {"passes"},  # the named compiler passes
    {"backend", "compiler"},  # launches and kernels, and the driver that runs the passes into them
    {"runtime"},  # the engine: admitted, scheduled, launched, delivered
    {"client", "bulk", "router", "server", "calibrate", "cli", "cli_quant"},  # the entry points
)

# None left (issue 35): a new one fails the tests below.
KNOWN_UPWARD: set[tuple[str, str]] = set()
KNOWN_CIRCLES: set[frozenset[str]] = set()


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def resolved(name: str) -> str | None:
    """The spinfc module an imported name lives in (`spinfc.a.b.name` -> `spinfc.a.b`)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def imports(module: str) -> set[str]:
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            names = [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        found |= {m for m in map(resolved, (n for n in names if n.startswith("spinfc"))) if m and m != module}
    return found


GRAPH = {module: imports(module) for module in MODULES}


def stage(module: str) -> int:
    top = module.split(".")[1] if "." in module else ""
    return next((i for i, names in enumerate(LAYERS) if top in names), -1)


def circles() -> set[frozenset[str]]:
    """The graph's strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: set[frozenset[str]] = set()

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while not component or w != v:
                w = stack.pop()
                component.add(w)
            if len(component) > 1:
                found.add(frozenset(component))

    for v in sorted(GRAPH):
        if v not in index:
            visit(v)
    return found


def test_every_top_level_name_has_a_stage():
    tops = {m.split(".")[1] for m in MODULES if "." in m}
    assert not {t for t in tops if stage(f"spinfc.{t}") < 0 and t != "__init__"}, "add it to LAYERS"


def test_nothing_is_imported_from_a_later_stage():
    upward = {(m, d) for m, deps in GRAPH.items() for d in deps if stage(d) > stage(m) >= 0}
    assert upward - KNOWN_UPWARD == set(), "import it the other way round, or pass it in as an argument"
    assert KNOWN_UPWARD - upward == set(), "removed: take it off KNOWN_UPWARD"


def test_no_import_circle():
    found = circles()
    assert found - KNOWN_CIRCLES == set(), "a circle of imports: move what both need into a module of its own"
    assert KNOWN_CIRCLES - found == set(), "removed: take it off KNOWN_CIRCLES"
