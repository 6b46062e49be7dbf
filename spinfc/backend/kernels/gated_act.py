"""The gated MLP activation: act(gate) * up, with act SiLU or GELU (tanh approximation), elementwise in float32.
gate and up may be views into one fused gate/up matmul output (any row stride, unit last stride)."""

from __future__ import annotations

from typing import Literal

import triton
import triton.language as tl
import torch

from spinfc.backend import reference as _reference

BLOCK_F = 1024


@triton.jit
def _gated_act_kernel(
    GATE, UP, OUT,  # gate, up, out: [T, F] rows with a unit last stride
    stride_gate, stride_up, stride_out, F, GELU_TANH: tl.constexpr, BLOCK: tl.constexpr,
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
    tl.store(OUT + row * stride_out + cols, (activated * u).to(OUT.dtype.element_ty), mask=ok)


def gated_act(gate: torch.Tensor, up: torch.Tensor, kind: Literal["silu", "gelu_tanh"]) -> torch.Tensor:
    """gate, up: [T, F] -> act(gate) * up: [T, F] in gate.dtype (a new contiguous tensor)."""
    if kind not in ("silu", "gelu_tanh"):
        raise ValueError(f"gated_act: unknown activation {kind!r}; use 'silu' or 'gelu_tanh'")
    if gate.dim() != 2 or gate.shape != up.shape:
        raise ValueError(f"gated_act: gate {tuple(gate.shape)} and up {tuple(up.shape)} must both be [T, F]")
    if gate.stride(1) != 1 or up.stride(1) != 1:
        raise ValueError("gated_act: gate and up must have a unit stride in their last dimension")
    T, F = gate.shape
    out = torch.empty((T, F), dtype=gate.dtype, device=gate.device)
    _gated_act_kernel[(T, triton.cdiv(F, BLOCK_F))](
        gate, up, out, gate.stride(0), up.stride(0), out.stride(0), F,
        GELU_TANH=kind == "gelu_tanh", BLOCK=BLOCK_F, num_warps=4,
    )
    return out


reference = _reference.gated_act
