"""Kernel tests run the Triton kernels through Triton's interpreter on the CPU (tiny float32 shapes: the
interpreter gets bf16 wrong). Triton decides interpreted-or-compiled when a kernel is decorated (and reads the
variable again at run time), so the variable is set here, before any kernel module is imported, and stays set
for the rest of the process. Only Triton reads it; the other test folders do not use Triton."""

from __future__ import annotations

import os
import sys

_imported = sorted(name for name in sys.modules if name.startswith("spinfc.backend.kernels."))
if _imported and os.environ.get("TRITON_INTERPRET") != "1":
    raise RuntimeError(
        f"{_imported} were imported before tests/kernels/conftest.py set TRITON_INTERPRET=1, so they are compiled "
        "for a GPU rather than interpreted: run `TRITON_INTERPRET=1 pytest ...` or collect tests/kernels first"
    )
os.environ["TRITON_INTERPRET"] = "1"
