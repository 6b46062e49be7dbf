"""A CPU server needs no Triton (the gpu extra): the server, the engine, the loader, quantization, the bulk job and
the router import with triton and flash-linear-attention unimportable. The kernels are imported where a launch is
on CUDA (runtime/load/loader.py, quant/linear.py, quant/int4.py, models/state_flow.py, backend/invariance.py)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CODE = textwrap.dedent("""
    import importlib.abc, sys
    BLOCKED = {"triton", "fla"}
    class Blocked(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ModuleNotFoundError(f"No module named {name!r} (blocked in this test)", name=name)
    sys.meta_path.insert(0, Blocked())
    import spinfc.bulk.command, spinfc.router, spinfc.runtime.load.loader, spinfc.runtime.quant.quantize
    import spinfc.runtime.start, spinfc.server.app
    print("imported", sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED))
""")


def test_the_server_and_the_engine_import_without_triton():
    result = subprocess.run([sys.executable, "-c", CODE], cwd=ROOT, capture_output=True, text=True, timeout=300,
                            env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
    assert "imported []" in result.stdout
