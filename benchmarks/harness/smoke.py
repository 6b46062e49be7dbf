"""A GPU study's `--smoke` mode runs its Triton kernels in Triton's interpreter on the CPU, which must be switched
on before any kernel is defined: `interpreted(...)` replaces this process with the same command under
TRITON_INTERPRET=1 (nothing to do when it is already set), so the study's imports can stay at the top."""

from __future__ import annotations

import os
import sys


def interpreted(module: str, argv: list[str] | None) -> None:
    if os.environ.get("TRITON_INTERPRET") != "1":
        argv = sys.argv[1:] if argv is None else argv
        os.execve(sys.executable, [sys.executable, "-m", module, *argv], {**os.environ, "TRITON_INTERPRET": "1"})
