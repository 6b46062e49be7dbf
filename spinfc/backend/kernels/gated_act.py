"""The gated MLP activation: act(gate) * up, with act SiLU or GELU (tanh approximation), elementwise in float32.
gate and up may be views into one fused gate/up matmul output (any row stride, unit last stride).

With `quant` (an `ActivationQuant`: the down projection's static input scale), the result is written as the down
projection's 8-bit input straight from float32, so no separate quantize pass reads it again."""

from __future__ import annotations

from typing import Literal

import triton
import triton.language as tl
import torch

from spinfc.backend import reference as _reference
from spinfc.backend.kernels.quant_store import quantized

BLOCK_F = 1024
NUM_WARPS = 4  # module-level, with BLOCK_F, so a tuning script can try others (neither changes a result)


@triton.jit
def _gated_act_kernel(
    GATE, UP, OUT,  # gate, up, out: [T, F] rows with a unit last stride
    INV_SCALE, q_min, q_max,  # QUANT: out = clamp(act(g) * u * inv_scale) in OUT's 8-bit dtype
    stride_gate, stride_up, stride_out, F, GELU_TANH: tl.constexpr, QUANT: tl.constexpr, IS_INT: tl.constexpr,
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    ok = cols < F
    g = tl.load(GATE + row * stride_gate + cols, mask=ok, other=0.0).to(tl.float32)
    u = tl.load(UP + row * stride_up + cols, mask=ok, other=0.0).to(tl.float32)
    if GELU_TANH:
        # 0.5 * (1 + tanh(y)) == sigmoid(2y)
        y = 0.7978845608028654 * (g + 0.044715 * g * g * g)
        activated = g * tl.sigmoid(2.0 * y)
    else:
        activated = g * tl.sigmoid(g)
    y = activated * u
    if QUANT:  # the arithmetic of kernels.quantize, on the float32 result
        y = quantized(y, INV_SCALE, q_min, q_max, IS_INT)
    tl.store(OUT + row * stride_out + cols, y.to(OUT.dtype.element_ty), mask=ok)


def gated_act(gate: torch.Tensor, up: torch.Tensor, kind: Literal["silu", "gelu_tanh"], quant=None) -> torch.Tensor:
    """gate, up: [T, F] -> act(gate) * up: [T, F] in gate.dtype, or with `quant` in its 8-bit storage dtype (a new
    contiguous tensor)."""
    if kind not in ("silu", "gelu_tanh"):
        raise ValueError(f"gated_act: unknown activation {kind!r}; use 'silu' or 'gelu_tanh'")
    if gate.dim() != 2 or gate.shape != up.shape:
        raise ValueError(f"gated_act: gate {tuple(gate.shape)} and up {tuple(up.shape)} must both be [T, F]")
    if gate.stride(1) != 1 or up.stride(1) != 1:
        raise ValueError("gated_act: gate and up must have a unit stride in their last dimension")
    T, F = gate.shape
    out = torch.empty((T, F), dtype=quant.storage if quant is not None else gate.dtype, device=gate.device)
    inv_scale, q_min, q_max = (quant.inv_scale, quant.q_min, quant.q_max) if quant is not None else (gate, 0.0, 0.0)
    _gated_act_kernel[(T, triton.cdiv(F, BLOCK_F))](
        gate, up, out, inv_scale, q_min, q_max, gate.stride(0), up.stride(0), out.stride(0), F,
        GELU_TANH=kind == "gelu_tanh", QUANT=quant is not None,
        IS_INT=quant is not None and not quant.storage.is_floating_point, BLOCK=BLOCK_F, num_warps=NUM_WARPS,
    )
    return out


reference = _reference.gated_act
