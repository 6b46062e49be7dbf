"""The client and `spinfc score` speak the server's wire format (spinfc/wire/) without importing the server: no
module of spinfc/client/ or spinfc/bulk/ imports spinfc.server, at its top or inside a function."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("spinfc/client", "spinfc/bulk")


def server_imports(path: Path, root: Path = ROOT) -> list[str]:
    """`file:line: module` for every import of spinfc.server in the file (absolute or relative)."""
    package = ".".join(path.relative_to(root).with_suffix("").parts[:-1])
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            names = [module] + [f"{module}.{alias.name}" for alias in node.names]
        else:
            continue
        found += [f"{path.relative_to(root)}:{node.lineno}: {name}" for name in names
                  if name == "spinfc.server" or name.startswith("spinfc.server.")]
    return found


def test_the_scan_finds_an_import_of_the_server(tmp_path):
    probe = tmp_path / "spinfc" / "client" / "probe.py"
    probe.parent.mkdir(parents=True)
    probe.write_text("import json\ndef f():\n    from ..server import schemas\n    import spinfc.server.app\n")
    assert [line.split(": ")[1] for line in server_imports(probe, tmp_path)] == [
        "spinfc.server", "spinfc.server.schemas", "spinfc.server.app"]


def test_no_module_of_client_or_bulk_imports_the_server():
    found = [line for folder in FOLDERS for path in sorted((ROOT / folder).rglob("*.py"))
             for line in server_imports(path)]
    assert not found, "client/ and bulk/ import spinfc.server (import spinfc.wire instead):\n" + "\n".join(found)


def test_importing_the_client_and_the_bulk_job_loads_no_server_module():
    code = ("import sys, spinfc.client, spinfc.bulk.command, spinfc.bulk.engine_transport, spinfc.bulk.http_transport\n"
            "print(sorted(m for m in sys.modules if m.startswith('spinfc.server')))")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                            env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
