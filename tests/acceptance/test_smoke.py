"""The acceptance run's CPU half (`python -m benchmarks.acceptance --smoke`), so the suite a GPU change must pass
cannot rot between GPU runs: real `spinfc serve` processes at defaults on tiny random snapshots of three families
(Llama with its fp8-static checkpoint, Gemma 4 E2B with images, audio and video, Qwen3.5 with images), every kind of
request checked against transformers, and one large shape's timing path on Qwen3.5. The whole suite, on an H200, is
documented in docs/acceptance.md."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow  # servers of three families on the CPU: ~3 minutes on 2 cores


def test_every_kind_of_request_passes_on_the_cpu(tmp_path):
    out = tmp_path / "acceptance.json"
    command = [sys.executable, "-m", "benchmarks.acceptance", "--smoke", "--only", "llama", "gemma4-e2b", "qwen3_5",
               "--timed", "qwen3_5-27b", "--work", str(tmp_path / "work"), "--out", str(out)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=1200)
    print(done.stdout[-6000:], done.stderr[-3000:])
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    results = json.loads(out.read_text())
    assert results["passed"] and results["smoke"]
    families = {row["family"] for row in results["rows"]}
    assert families == {"llama", "llama-fp8-static", "gemma4-e2b", "qwen3_5"}
    kinds = {check["kind"] for row in results["rows"] for check in row["checks"]}
    assert {"options", "<*>", "<n>", "<$>", "<gen>", "chat", "completions", "decisions", "image", "audio", "video",
            "packed"} <= kinds
    assert [row["shape"] for row in results["timed"]] == ["qwen3_5-27b"]
