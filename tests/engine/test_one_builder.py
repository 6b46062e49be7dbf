"""An engine is built in one place: `spinfc.runtime.start.start_engine`. No other module of spinfc constructs an
`Engine` or captures a model's CUDA graphs (`graph_model`), so the server, the router, `spinfc score` and `spinfc
parity` run the same loading, precision, shapes and graphs."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUILDER = "spinfc/runtime/start.py"


def builds(path: Path, root: Path = ROOT) -> list[str]:
    """`file:line: name` for every call of Engine(...) and every use of graph_model (called, or handed to a thread)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        func = node.func if isinstance(node, ast.Call) else node
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
        if (name == "Engine" and isinstance(node, ast.Call)) or (name == "graph_model" and node is func):
            found.append((node.lineno, f"{path.relative_to(root)}:{node.lineno}: {name}"))
    return [line for _, line in sorted(found)]


def test_the_scan_finds_a_build(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("from spinfc.backend import serving\nm, s = serving.graph_model(m, s)\ne = Engine(m, s).start()\n")
    assert [line.rsplit(": ", 1)[1] for line in builds(probe, tmp_path)] == ["graph_model", "Engine"]


def test_only_start_engine_builds_an_engine():
    found = [line for path in sorted((ROOT / "spinfc").rglob("*.py")) if path.relative_to(ROOT).as_posix() != BUILDER
             for line in builds(path)]
    assert not found, f"engines are built by {BUILDER} (start_engine) alone; call it instead:\n" + "\n".join(found)
    assert builds(ROOT / BUILDER), "start_engine no longer builds the engine it returns"
