"""Kernel tests run the Triton kernels through Triton's interpreter on the CPU (tiny float32 shapes: the
interpreter gets bf16 wrong). Triton decides interpreted-or-compiled when it and each kernel are imported (and
reads the variable again at run time), so the variable is set here, before anything imports Triton, and stays set
for the rest of the process. Only Triton reads it; the other test folders do not use Triton.

If Triton was imported earlier in this process without the variable (a test module collected before this folder
imported it), the kernels cannot be interpreted: that is reported here, with what to do, rather than as obscure
failures inside the interpreter."""

from __future__ import annotations

import os
import sys

if "triton" in sys.modules and os.environ.get("TRITON_INTERPRET") != "1":
    raise RuntimeError(
        "triton was imported before tests/kernels/conftest.py could set TRITON_INTERPRET=1, so the kernels would be "
        "compiled for a GPU rather than interpreted: run `TRITON_INTERPRET=1 pytest ...`, or keep other test "
        "folders from importing triton at collection time"
    )
os.environ["TRITON_INTERPRET"] = "1"
