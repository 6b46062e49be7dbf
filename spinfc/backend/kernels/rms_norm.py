"""RMSNorm, optionally fused with the residual add that precedes it: one program per row reads x (and the
residual) once and writes the normed row (and the sum). A row's result depends on that row alone.

With `quant` (an `ActivationQuant`: the next linear layer's static input scale), the normed row is written as that
layer's 8-bit input (float8 e4m3 or int8) straight from float32, so no separate quantize pass reads it again; the
sum keeps its dtype."""

from __future__ import annotations

import triton
import triton.language as tl
import torch

from spinfc.backend import reference as _reference
from spinfc.backend.kernels.quant_store import quantized

# Warps per row program: None picks one warp per 256 columns (at most 16). Module-level so a tuning script can try
# others; the warp count changes only the order of one row's own sum, never mixes rows.
NUM_WARPS: int | None = None


@triton.jit
def _rms_norm_kernel(
    X, RES, W, OUT, RES_OUT,  # x, res, out, res_out: [T, D] rows with a unit last stride; w: [D]
    INV_SCALE, q_min, q_max,  # QUANT: out = clamp(normed * inv_scale) in OUT's 8-bit dtype (INV_SCALE: [] float32)
    stride_x, stride_res, stride_out, stride_res_out, D, eps,
    HAS_RESIDUAL: tl.constexpr, UNIT_OFFSET: tl.constexpr, QUANT: tl.constexpr, IS_INT: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_D)
    ok = cols < D
    x = tl.load(X + row * stride_x + cols, mask=ok, other=0.0).to(tl.float32)
    if HAS_RESIDUAL:
        res = tl.load(RES + row * stride_res + cols, mask=ok, other=0.0).to(tl.float32)
        # The sum is rounded to the output dtype before it is normed, as the reference does.
        summed = (x + res).to(RES_OUT.dtype.element_ty)
        tl.store(RES_OUT + row * stride_res_out + cols, summed, mask=ok)
        x = summed.to(tl.float32)
    mean_square = tl.sum(x * x, axis=0) / D
    normed = x * tl.rsqrt(mean_square + eps)
    w = tl.load(W + cols, mask=ok, other=0.0).to(tl.float32)
    if UNIT_OFFSET:
        w = w + 1.0
    y = normed * w
    if QUANT:  # the arithmetic of kernels.quantize, on the float32 result
        y = quantized(y, INV_SCALE, q_min, q_max, IS_INT)
    tl.store(OUT + row * stride_out + cols, y.to(OUT.dtype.element_ty), mask=ok)


def _launch(x, residual, weight, eps, unit_offset, out_dtype=None, quant=None):
    if x.dim() != 2 or weight.shape != (x.shape[1],):
        raise ValueError(f"rms_norm: x must be [T, D] and weight [D]; got {tuple(x.shape)} and {tuple(weight.shape)}")
    if residual is not None and residual.shape != x.shape:
        raise ValueError(f"add_rms_norm: residual {tuple(residual.shape)} differs from x {tuple(x.shape)}")
    for name, t in (("x", x), ("residual", residual), ("weight", weight)):
        if t is not None and t.stride(-1) != 1:
            raise ValueError(f"rms_norm: {name} must have a unit stride in its last dimension")
    T, D = x.shape
    # The sum in the wider of the two dtypes (a float32 residual stream stays float32), as the reference's x + r.
    summed_dtype = torch.promote_types(x.dtype, residual.dtype) if residual is not None else x.dtype
    out = torch.empty((T, D), dtype=quant.storage if quant is not None else out_dtype or summed_dtype, device=x.device)
    res_out = torch.empty((T, D), dtype=summed_dtype, device=x.device) if residual is not None else out
    block_d = triton.next_power_of_2(D)
    inv_scale, q_min, q_max = (quant.inv_scale, quant.q_min, quant.q_max) if quant is not None else (weight, 0.0, 0.0)
    _rms_norm_kernel[(T,)](
        x, residual if residual is not None else x, weight, out, res_out, inv_scale, q_min, q_max,
        x.stride(0), residual.stride(0) if residual is not None else 0, out.stride(0), res_out.stride(0), D, eps,
        HAS_RESIDUAL=residual is not None, UNIT_OFFSET=unit_offset, QUANT=quant is not None,
        IS_INT=quant is not None and not quant.storage.is_floating_point, BLOCK_D=block_d,
        num_warps=NUM_WARPS or min(16, max(1, block_d // 256)),
    )
    return out, res_out


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float, unit_offset: bool,
             out_dtype: torch.dtype | None = None, quant=None) -> torch.Tensor:
    """x: [T, D], weight: [D] -> [T, D] in `out_dtype` (default x.dtype): x / sqrt(mean(x^2) + eps) * w (or
    * (1 + w)); with `quant`, in its 8-bit storage dtype."""
    return _launch(x, None, weight, eps, unit_offset, out_dtype, quant)[0]


def add_rms_norm(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float, unit_offset: bool,
    out_dtype: torch.dtype | None = None, quant=None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """x, residual: [T, D] -> (rms_norm(x + residual), x + residual), in one pass over the rows; the sum in the
    wider dtype of the two, the normed rows in `out_dtype` (default: the sum's; with `quant`, its 8-bit dtype)."""
    return _launch(x, residual, weight, eps, unit_offset, out_dtype, quant)


reference = _reference.rms_norm
reference_add = _reference.add_rms_norm
