"""The torch version of `kernels.quantize` (no Triton import, so the CPU path runs without Triton installed)."""

from __future__ import annotations

import torch


def quantize_reference(x: torch.Tensor, inv_scale: torch.Tensor, storage: torch.dtype, q_min: float,
                       q_max: float) -> torch.Tensor:
    """x (any float dtype) -> clamp(x * inv_scale, q_min, q_max) in `storage`, computed in float32; rounded half
    to even first when `storage` is an integer type."""
    v = (x.float() * inv_scale).clamp_(q_min, q_max)
    if not storage.is_floating_point:
        v = v.round_()
    return v.to(storage)
