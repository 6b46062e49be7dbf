"""The torch versions of `kernels.quantize` and `kernels.quantize_tokens` (no Triton import, so the CPU path runs
without Triton installed), and
`ActivationQuant`: how a kernel that produces a linear layer's input quantizes it in its own store."""

from __future__ import annotations

import attrs
import torch


@attrs.frozen(eq=False)
class ActivationQuant:
    """What a norm or activation kernel needs to write the next linear layer's input in 8 bits itself:
    clamp(y * inv_scale, q_min, q_max) in `storage` (rounded half to even first for an integer `storage`), with y
    the kernel's float32 result. `inv_scale` is the layer's own [] float32 tensor, on the device."""

    inv_scale: torch.Tensor
    storage: torch.dtype
    q_min: float
    q_max: float

    def reference(self, y: torch.Tensor) -> torch.Tensor:
        return quantize_reference(y, self.inv_scale, self.storage, self.q_min, self.q_max)


def quantize_reference(x: torch.Tensor, inv_scale: torch.Tensor, storage: torch.dtype, q_min: float,
                       q_max: float) -> torch.Tensor:
    """x (any float dtype) -> clamp(x * inv_scale, q_min, q_max) in `storage`, computed in float32; rounded half
    to even first when `storage` is an integer type."""
    v = (x.float() * inv_scale).clamp_(q_min, q_max)
    if not storage.is_floating_point:
        v = v.round_()
    return v.to(storage)


def token_scales(x: torch.Tensor, chosen) -> torch.Tensor:
    """x [M, K] -> one float32 scale per row [M, 1], max |x_row| / (range / 2) (a zero row gets float32's eps), as
    compressed-tensors computes a dynamic per-token scale. A maximum is exact, so a row's scale is the same bits
    whatever else is in the pass."""
    amax = x.abs().amax(dim=1, keepdim=True).float()  # [M, 1]
    scale = amax / chosen.q_max
    return torch.where(scale == 0, torch.finfo(torch.float32).eps, scale)


def quantize_tokens_reference(x: torch.Tensor, chosen) -> tuple[torch.Tensor, torch.Tensor]:
    """x [M, K] -> (x / its row's scale, clamped, in `storage` [M, K]; the scales [M, 1] float32), computed in float32
    with a division, as compressed-tensors' `quantize` does (`chosen`: a `quant.schemes.Scheme`)."""
    scale = token_scales(x, chosen)
    return chosen.quantize(x, scale), scale
