"""`fingerprint`: which engine, weights, numeric scheme and device produced a score."""

from __future__ import annotations

import torch

from spinfc import __version__


def fingerprint(model, device: str) -> str:
    """`spinfc-<version>-<family>-<weights hash>-<scheme>-<kernels>-<arch>`, e.g. spinfc-0.1.0-gemma3-a5fd3b62230a-
    float32-reference-cpu or ...-fp8-static-mixed-triton-sm90. The family is the model stack's (llama, qwen3,
    gemma3, gemma4); the scheme the model's (`Model.scheme`: float32, bf16, bf16-mixed, fp8-static,
    int8-static-mixed, ...). Scores are comparable only under the same fingerprint."""
    arch = "cpu"
    if str(device).startswith("cuda"):
        major, minor = torch.cuda.get_device_capability(torch.device(device))
        arch = f"sm{major}{minor}"
    weights = str(getattr(model, "weights_hash", "") or "unknown")[:12]
    ops = getattr(getattr(model, "ops", None), "__name__", "spinfc.backend.reference").rsplit(".", 1)[-1]
    kernels = "triton" if "triton" in ops else "reference"
    scheme = getattr(model, "scheme", None) or "float32"
    family = getattr(getattr(model, "config", None), "family", None) or getattr(model, "family", None) or "unknown"
    return f"spinfc-{__version__}-{family}-{weights}-{scheme}-{kernels}-{arch}"
