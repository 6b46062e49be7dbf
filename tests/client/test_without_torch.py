"""The client, the schemas, the frontend, the IR, the passes and the `compile` / `packs` commands import and run
with torch, transformers, litestar and uvicorn unimportable (what `pip install "spinfc[client]"` gives)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

BLOCKER = textwrap.dedent("""
    import importlib.abc, sys
    BLOCKED = {"torch", "transformers", "litestar", "uvicorn", "gguf", "triton", "safetensors"}
    class Blocked(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ModuleNotFoundError(f"No module named {name!r} (blocked in this test)", name=name)
    sys.meta_path.insert(0, Blocked())
""")


def run_blocked(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", BLOCKER + textwrap.dedent(code)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})


def test_the_blocker_blocks():
    result = run_blocked("import torch")
    assert result.returncode != 0 and "blocked in this test" in result.stderr


def test_client_schemas_frontend_ir_and_passes_import_without_torch():
    result = run_blocked("""
        from spinfc.client import AsyncClient, Client, ScoreResponse
        import spinfc.cli, spinfc.compiler, spinfc.frontend, spinfc.ir.printer, spinfc.ir.verifier, spinfc.passes
        import spinfc.wire.schemas, spinfc.wire.decisions
        client = Client("http://127.0.0.1:9")
        print("imported", sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED))
    """)
    assert result.returncode == 0, result.stderr
    assert "imported []" in result.stdout


def test_score_and_calibrate_against_a_server_import_without_torch():
    # `spinfc score --server URL` sends the rows to a server: the engine (torch) is imported only without --server
    result = run_blocked("""
        import spinfc.bulk.command, spinfc.bulk.http_transport, spinfc.calibrate.command
        print("imported", sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED))
    """)
    assert result.returncode == 0, result.stderr
    assert "imported []" in result.stdout


def test_media_parts_are_built_without_torch_or_pil():
    result = run_blocked("""
        sys.modules["PIL"] = None  # no image library either: the parts are the file's bytes, typed from them
        from spinfc.client import image_part, user_message
        message = user_message("Look:", image_part(bytes.fromhex("89504e470d0a1a0a") + b"rest"))
        url = message["content"][1]["image_url"]["url"]
        print(url[:21], sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED))
    """)
    assert result.returncode == 0, result.stderr
    assert "data:image/png;base64 []" in result.stdout


def test_compile_to_ir_and_packs_commands_run_without_torch():
    result = run_blocked("""
        from spinfc.cli import main
        codes = [main(["compile", "fixtures/seed-support.json", "--emit", "ir"]),
                 main(["compile", "packs/moderation.toml", "--emit", "parse"]),
                 main(["packs", "validate", "packs"]),
                 main(["packs", "list"])]
        print("codes", codes)
    """)
    assert result.returncode == 0, result.stderr
    assert "codes [0, 0, 0, 0]" in result.stdout
    assert "queries (" in result.stdout and "all valid" in result.stdout


def test_a_stage_that_needs_the_tokenizer_says_what_to_install():
    result = run_blocked("""
        from spinfc.cli import main
        print("code", main(["compile", "fixtures/seed-support.json", "--emit", "tokens"]))
    """)
    assert "code 2" in result.stdout, result.stderr
    assert 'pip install "spinfc[serve]"' in result.stderr and "Traceback" not in result.stderr


def test_serve_without_the_serve_extra_says_what_to_install():
    result = run_blocked("""
        from spinfc.cli import main
        print("code", main(["serve", "--port", "1"]))
    """)
    assert "code 2" in result.stdout, result.stderr
    assert 'pip install "spinfc[serve]"' in result.stderr and "Traceback" not in result.stderr
