"""The engine reads as its anchors' (nano-vllm's `LLMEngine.step`, vLLM v1's `EngineCore`): a loop of schedule / run
/ deliver under 20 lines, the engine and the scheduler each under 300 (issue 35), read from the source; the runtime's
folders are the pipeline's stages."""

from __future__ import annotations

import ast
from pathlib import Path

RUNTIME = Path(__file__).resolve().parents[2] / "spinfc" / "runtime"


def test_the_engine_and_the_scheduler_are_small():
    for name in ("engine.py", "schedule/scheduler.py"):
        assert len((RUNTIME / name).read_text().splitlines()) < 300, name


def test_the_loop_schedules_runs_and_delivers():
    tree = ast.parse((RUNTIME / "engine.py").read_text())
    (loop,) = [node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and node.name == "_loop"]
    assert loop.end_lineno - loop.lineno < 20
    called = {node.func.attr for node in ast.walk(loop) if isinstance(node, ast.Call)
              and isinstance(node.func, ast.Attribute)}
    assert {"schedule", "run", "deliver"} <= called


def test_the_runtime_is_laid_out_by_stage():
    """A piece of work is admitted (admit/), scheduled (schedule/), launched (launch/) and delivered (deliver/) on a
    model loaded by load/ and the families' folders; only the engine, where it is built, and `spinfc parity` sit
    beside them."""
    assert {p.name for p in RUNTIME.glob("*.py")} == {"__init__.py", "engine.py", "start.py", "parity.py"}
    assert {"load", "admit", "schedule", "launch", "deliver"} <= {p.name for p in RUNTIME.iterdir() if p.is_dir()}
