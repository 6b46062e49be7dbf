"""The epilogue of an 8-bit GEMM that cannot scale inside itself: out[m, n] = float32(acc[m, n]) * scale[n], in
the output dtype, in one pass (read the accumulator once, write the result once). torch would take two: the
float32 product, then its cast. The arithmetic is torch's own (one int32-or-float32 to float32 conversion, one
float32 multiply, one rounding to the output dtype), so the kernel and `reference` agree bit for bit; each
element depends on its own accumulator alone, so rows stay independent."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

BLOCK = 4096


@triton.jit
def _scale_columns_kernel(ACC, SCALE, OUT, n, N, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ok = offsets < n
    acc = tl.load(ACC + offsets, mask=ok, other=0).to(tl.float32)
    scale = tl.load(SCALE + offsets % N, mask=ok, other=0.0)
    tl.store(OUT + offsets, (acc * scale).to(OUT.dtype.element_ty), mask=ok)


def scale_columns(acc: torch.Tensor, scale: torch.Tensor, out_dtype: torch.dtype) -> torch.Tensor:
    """acc: [M, N] int32 or float32 (contiguous), scale: [N] float32 -> (acc * scale) in `out_dtype`, [M, N]."""
    if acc.dim() != 2 or scale.shape != (acc.shape[1],) or scale.dtype != torch.float32:
        raise ValueError(f"scale_columns: acc must be [M, N] and scale [N] float32; got {tuple(acc.shape)} and "
                         f"{tuple(scale.shape)} {scale.dtype}")
    acc = acc.contiguous()
    out = torch.empty(acc.shape, dtype=out_dtype, device=acc.device)
    n = acc.numel()
    _scale_columns_kernel[(triton.cdiv(n, BLOCK),)](acc, scale, out, n, acc.shape[1], BLOCK=BLOCK, num_warps=8)
    return out


def reference(acc: torch.Tensor, scale: torch.Tensor, out_dtype: torch.dtype) -> torch.Tensor:
    return (acc.float() * scale).to(out_dtype)
