"""Imports at module level (issue 46): at most 60 import statements inside functions in the whole package, read
from the source with ast. A module's imports are its dependencies, stated once at its top; an import inside a
function hides one, and usually a cycle or a function in the wrong module.

Not counted:
- the optional heavy dependencies, imported where they are needed so that a module works without them: the bulk
  extra (pyarrow, ray, matplotlib), the GPU extra's flash-linear-attention (fla), transformers (seconds to import:
  the towers' processors and the tokenizer's converter), and the media decoders (PIL, soundfile, av);
- the CLI's start-up path (cli.py, cli_quant.py): `spinfc` builds every command's flags at start and imports a
  command's own modules when it runs, so `spinfc compile` starts without torch.

With the imports at the top, a circle among them fails at import time. tests/layers/test_import_graph.py finds the
circles between modules; the one here also counts the packages' __init__ files that importing a module runs first
(a package that re-exports its modules closes a circle the module graph does not show).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "spinfc"
LIMIT = 60
HEAVY_OPTIONAL = {"pyarrow", "ray", "matplotlib", "fla", "transformers", "PIL", "soundfile", "av"}
CLI_START_UP = {"cli.py", "cli_quant.py"}


def imports_inside_functions(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import statement inside a function (at any depth) of the file."""
    found = []

    def walk(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if in_function and isinstance(child, ast.Import):
                found.extend((child.lineno, alias.name) for alias in child.names)
            elif in_function and isinstance(child, ast.ImportFrom):
                found.append((child.lineno, "." * child.level + (child.module or "")))
            walk(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    walk(ast.parse(path.read_text(), str(path)), False)
    return found


def counted(root: Path = PACKAGE) -> list[str]:
    """`file:line: module` for each import inside a function that the limit counts."""
    rows = []
    for path in sorted(root.rglob("*.py")):
        name = path.relative_to(root).as_posix()
        if name in CLI_START_UP:
            continue
        rows += [f"spinfc/{name}:{line}: {module}" for line, module in imports_inside_functions(path)
                 if module.split(".")[0] not in HEAVY_OPTIONAL]
    return rows


def import_time_graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    """module -> the modules its top level runs when imported: each module it imports and every package above it
    (not its own packages, which are running already)."""
    def name_of(path: Path) -> str:
        parts = path.relative_to(root.parent).with_suffix("").parts
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)

    modules = {name_of(p): p for p in root.rglob("*.py")}

    def resolved(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    def top_level(node: ast.AST) -> list[ast.Import | ast.ImportFrom]:
        found = []
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            found += [child] if isinstance(child, (ast.Import, ast.ImportFrom)) else top_level(child)
        return found

    graph = {}
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        runs = set()
        for node in top_level(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join([*parts, base] if base else parts)
                names = [base] + [f"{base}.{alias.name}" for alias in node.names]
            for target in filter(None, map(resolved, (n for n in names if n.split(".")[0] == root.name))):
                parts = target.split(".")
                runs |= {d for d in (".".join(parts[:k]) for k in range(1, len(parts) + 1))
                         if d in modules and d != module and not module.startswith(d + ".")}
        graph[module] = runs
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, iterative)."""
    index, low, on, stack, found = {}, {}, set(), [], []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on.add(start)
        while work:
            v, edges = work[-1]
            w = next(edges, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                component = []
                while not component or component[-1] != v:
                    component.append(stack.pop())
                    on.discard(component[-1])
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_count_finds_imports_inside_functions(tmp_path):
    (tmp_path / "a.py").write_text("import os\n\ndef f():\n    import json\n    def g():\n        from . import b\n"
                                   "    import pyarrow\n\nclass C:\n    def m(self):\n        from x.y import z\n")
    (tmp_path / "cli.py").write_text("def main():\n    import torch\n")
    assert counted(tmp_path) == ["spinfc/a.py:4: json", "spinfc/a.py:6: .", "spinfc/a.py:11: x.y"]


def test_at_most_60_imports_inside_functions():
    rows = counted()
    assert len(rows) <= LIMIT, (
        f"{len(rows)} imports inside functions, more than {LIMIT}: import at the module's top; where that makes an "
        "import cycle, move the function to the module it belongs to. Each one:\n" + "\n".join(rows))


def test_the_circle_search_sees_a_package_that_re_exports(tmp_path):
    package = tmp_path / "spinfc"
    (package / "quant").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "base.py").write_text("from spinfc.quant.layer import Layer\n")
    (package / "quant" / "__init__.py").write_text("from spinfc.quant.checkpoint import write\n")
    (package / "quant" / "layer.py").write_text("Layer = object\n")
    (package / "quant" / "checkpoint.py").write_text("from spinfc.base import flat\n")
    assert circles(import_time_graph(package)) == [["spinfc.base", "spinfc.quant", "spinfc.quant.checkpoint"]]
    (package / "quant" / "__init__.py").write_text('"""re-exports nothing"""\n')
    assert circles(import_time_graph(package)) == []


def test_no_circle_at_import_time():
    found = circles(import_time_graph())
    assert not found, ("modules whose top-level imports run each other (packages' __init__ included): move what "
                       "both need into a module of its own, or stop the package re-exporting:\n"
                       + "\n".join(" <-> ".join(c) for c in found))
