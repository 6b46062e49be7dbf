"""The W4A16 product: x [M, K] (half or float32) times a group-wise int4 weight, dequantized inside the GEMM.

The weight is held in the kernel's layout, made once at load time from compressed-tensors' `pack-quantized` tensors
(`spinfc.runtime.quant.int4`):
    packed  [K / 8, N] int32   nibble j of word (w, n) is q[n, 8 w + j] + 8 (q in [-8, 7]): the checkpoint's
                               weight_packed [N, K / 8], transposed, so a tile's columns are read contiguously
    scales  [K / G, N]         one scale per group of G input channels and output channel, in x's dtype
    zeros   [K / G, N] or None the zero point (asymmetric) in x's dtype, exact (an integer in [-8, 7])
A weight element is (q - zero) * scale, rounded once to x's dtype (compressed-tensors' `dequantize` in the
scale's dtype does the same), and the tiles multiply in x's dtype with float32 accumulation.

Row invariance: one tile configuration for every launch (`CONFIG`: no choice by M, no split-K), so every output
element is the same sequence of the same tile products over K whatever the other rows are; a row's result depends
on that row alone, at every launch size (checked on the GPU by benchmarks/gpu_int4.py).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from spinfc.backend.kernels.int4_reference import dequantize, reference  # noqa: F401  (the reference, beside its kernel)

# The one configuration: 256 x 128 output tiles, 64 input channels a step (a multiple of 8: whole packed words).
# Measured on an H200 at the 27B's gate_up and down (16,384 rows): 360 TFLOP/s, against 324 at 128 x 128 and 268 at
# 128 x 128 x 128 (benchmarks/NOTES.md, 2026-12-04).
CONFIG = {"BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 8, "num_stages": 3}


@triton.jit
def _w4a16_kernel(X, PACKED, SCALES, ZEROS, OUT, M, N, K, stride_xm, stride_p, stride_s, stride_om,
                  GROUP: tl.constexpr, HAS_ZEROS: tl.constexpr, PRECISION: tl.constexpr, BLOCK_M: tl.constexpr,
                  BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # reads x[rows, :], packed/scales/zeros[:, cols]; writes out[rows, cols] (one BLOCK_M x BLOCK_N tile)
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    row_ok, col_ok = rows < M, cols < N
    shifts = tl.arange(0, 8) * 4
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        k_ok = ks < K
        a = tl.load(X + rows[:, None] * stride_xm + ks[None, :], mask=row_ok[:, None] & k_ok[None, :], other=0.0)
        words_at = k0 // 8 + tl.arange(0, BLOCK_K // 8)  # each packed word read once: [BK / 8, BN]
        words = tl.load(PACKED + words_at[:, None] * stride_p + cols[None, :],
                        mask=(words_at < K // 8)[:, None] & col_ok[None, :], other=0)
        q = tl.reshape((words[:, None, :] >> shifts[None, :, None]) & 0xF, (BLOCK_K, BLOCK_N)) - 8  # [-8, 7]
        if GROUP % BLOCK_K == 0:  # the tile lies in one group: one scale (and zero) per column
            where = (k0 // GROUP) * stride_s + cols
            scale = tl.load(SCALES + where, mask=col_ok, other=0.0).to(tl.float32)[None, :]
            zero = tl.load(ZEROS + where, mask=col_ok, other=0.0).to(tl.float32)[None, :] if HAS_ZEROS else 0.0
        else:  # several groups in the tile: a scale per element
            where = (ks // GROUP)[:, None] * stride_s + cols[None, :]
            tile_ok = k_ok[:, None] & col_ok[None, :]
            scale = tl.load(SCALES + where, mask=tile_ok, other=0.0).to(tl.float32)
            zero = tl.load(ZEROS + where, mask=tile_ok, other=0.0).to(tl.float32) if HAS_ZEROS else 0.0
        w = ((q.to(tl.float32) - zero) * scale).to(a.dtype)
        acc += tl.dot(a, w, input_precision=PRECISION)
    tl.store(OUT + rows[:, None] * stride_om + cols[None, :], acc.to(OUT.dtype.element_ty),
             mask=row_ok[:, None] & col_ok[None, :])


def w4a16_matmul(x: torch.Tensor, packed: torch.Tensor, scales: torch.Tensor, zeros: torch.Tensor | None,
                 group: int, out_dtype: torch.dtype) -> torch.Tensor:
    """x: [M, K], packed: [K / 8, N] int32, scales (and zeros): [K / G, N] in x's dtype -> [M, N] in `out_dtype`."""
    M, K = x.shape
    N = packed.shape[1]
    if packed.dtype != torch.int32 or packed.shape[0] * 8 != K or K % group or scales.shape != (K // group, N) \
            or (zeros is not None and zeros.shape != scales.shape):
        raise ValueError(f"w4a16_matmul: x {tuple(x.shape)} needs packed [{K // 8}, N] int32 and scales/zeros "
                         f"[{K // group}, N] (group {group}); got {tuple(packed.shape)} {packed.dtype}, "
                         f"{tuple(scales.shape)}, {None if zeros is None else tuple(zeros.shape)}")
    if packed.stride(1) != 1 or scales.stride(1) != 1 or (zeros is not None and zeros.stride() != scales.stride()):
        raise ValueError("w4a16_matmul: packed, scales and zeros must have contiguous rows (zeros laid out as scales)")
    x = x.contiguous()
    out = torch.empty((M, N), dtype=out_dtype, device=x.device)
    c = CONFIG
    grid = (triton.cdiv(M, c["BLOCK_M"]), triton.cdiv(N, c["BLOCK_N"]))
    _w4a16_kernel[grid](x, packed, scales, scales if zeros is None else zeros, out, M, N, K, x.stride(0),
                        packed.stride(0), scales.stride(0), out.stride(0), GROUP=group, HAS_ZEROS=zeros is not None,
                        PRECISION="ieee" if x.dtype == torch.float32 else "tf32", BLOCK_M=c["BLOCK_M"],
                        BLOCK_N=c["BLOCK_N"], BLOCK_K=c["BLOCK_K"], num_warps=c["num_warps"],
                        num_stages=c["num_stages"])
    return out
