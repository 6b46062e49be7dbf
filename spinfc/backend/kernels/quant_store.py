"""The static activation quantization as a Triton function, for every kernel that writes a linear layer's 8-bit
input in its own store (the norms, the gated activation, tree attention) and for the quantize pass itself: one
arithmetic, so a value quantizes to the same byte whichever kernel wrote it."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def quantized(y, INV_SCALE, q_min, q_max, IS_INT: tl.constexpr):
    """y (float32) -> clamp(y * inv_scale, q_min, q_max), rounded half to even for an integer storage dtype (the
    caller stores the result in that dtype). INV_SCALE: a [] float32 tensor, the layer's 1 / input_scale."""
    y = tl.minimum(tl.maximum(y * tl.load(INV_SCALE), q_min), q_max)
    if IS_INT:  # (v + 1.5 * 2^23) - 1.5 * 2^23 rounds |v| < 2^22 to the nearest integer, ties to even
        y = (y + 12582912.0) - 12582912.0
    return y
