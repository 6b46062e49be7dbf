"""The torch version of `kernels.int4_matmul` (no Triton import, so the CPU path runs without Triton installed):
the weight dequantized from the kernel's layout, and the plain product the kernel is tested against."""

from __future__ import annotations

import torch


def dequantize(packed: torch.Tensor, scales: torch.Tensor, zeros: torch.Tensor | None, group: int,
               dtype: torch.dtype) -> torch.Tensor:
    """The weight the kernel multiplies with, [N, K] in `dtype`: (q - zero) * scale computed in float32 (exact:
    a 5-bit integer times a scale of at most 24 bits), rounded once to `dtype`."""
    nibbles = torch.arange(8, device=packed.device, dtype=torch.int32) * 4
    q = ((packed[:, None, :] >> nibbles[None, :, None]) & 0xF) - 8  # [K / 8, 8, N]
    q = q.reshape(-1, packed.shape[1]).float()  # [K, N]
    w = q if zeros is None else q - zeros.float().repeat_interleave(group, dim=0)
    return (w * scales.float().repeat_interleave(group, dim=0)).to(dtype).t()  # [N, K]


def reference(x: torch.Tensor, packed: torch.Tensor, scales: torch.Tensor, zeros: torch.Tensor | None, group: int,
              out_dtype: torch.dtype) -> torch.Tensor:
    """The plain PyTorch product: the dequantized weight in x's dtype, multiplied in float32."""
    return (x.float() @ dequantize(packed, scales, zeros, group, x.dtype).float().t()).to(out_dtype)
