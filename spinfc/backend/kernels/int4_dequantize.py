"""A group-wise int4 weight dequantized in one pass, for the W4A16 products of many rows: the weight is written once
in the activations' dtype ([N, K], as a half linear layer holds its weight) and multiplied by the same cuBLAS GEMM
a half layer of that shape runs, so a pass's products run at the half GEMM's rate.

Why two ways: dequantizing inside the GEMM (`int4_matmul`) reads four bits a weight, which is what a product of few
rows (a decode step) is bound by; a product of thousands of rows is bound by its multiplies, where the in-register
dequantization costs the tiles their rate (352 TFLOP/s against cuBLAS's 550 on the 27B's products, an H200,
benchmarks/NOTES.md 2026-12-04). One pass over the weight here writes 2 bytes and reads half a byte an element: at
16,384 rows of gate_up (5120 x 34816) about 0.2 ms against the GEMM's 8 ms.

Layout read (`int4_matmul`'s): packed [K / 8, N] int32 (nibble j of word (w, n) is q[n, 8 w + j] + 8), scales and
zeros [K / G, N]. Written: [N, K] in `dtype`, each element (q - zero) * scale computed in float32 and rounded once,
the reference's `dequantize` bit for bit.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from spinfc.backend.kernels.int4_reference import dequantize as reference  # noqa: F401  (the reference)

BLOCK_K, BLOCK_N = 64, 64


@triton.jit
def _dequantize_kernel(PACKED, SCALES, ZEROS, OUT, N, K, stride_p, stride_s, GROUP: tl.constexpr,
                       HAS_ZEROS: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_N: tl.constexpr):
    # reads packed[k0 / 8 : (k0 + BK) / 8, n0 : n0 + BN] and its scales (zeros); writes out[n0 : n0 + BN, k0 : k0 + BK]
    ks = tl.program_id(0) * BLOCK_K + tl.arange(0, BLOCK_K)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    k_ok, col_ok = ks < K, cols < N
    words_at = tl.program_id(0) * (BLOCK_K // 8) + tl.arange(0, BLOCK_K // 8)
    words = tl.load(PACKED + words_at[:, None] * stride_p + cols[None, :],
                    mask=(words_at < K // 8)[:, None] & col_ok[None, :], other=0)
    shifts = tl.arange(0, 8) * 4
    q = tl.reshape((words[:, None, :] >> shifts[None, :, None]) & 0xF, (BLOCK_K, BLOCK_N)) - 8  # [-8, 7]
    where = (ks // GROUP)[:, None] * stride_s + cols[None, :]
    ok = k_ok[:, None] & col_ok[None, :]
    scale = tl.load(SCALES + where, mask=ok, other=0.0).to(tl.float32)
    zero = tl.load(ZEROS + where, mask=ok, other=0.0).to(tl.float32) if HAS_ZEROS else 0.0
    w = ((q.to(tl.float32) - zero) * scale).to(OUT.dtype.element_ty)  # [BK, BN]
    tl.store(OUT + cols[None, :].to(tl.int64) * K + ks[:, None], w, mask=ok)


def dequantize(packed: torch.Tensor, scales: torch.Tensor, zeros: torch.Tensor | None, group: int,
               dtype: torch.dtype) -> torch.Tensor:
    """packed: [K / 8, N] int32, scales (and zeros): [K / G, N] -> the weight [N, K] in `dtype`."""
    K, N = packed.shape[0] * 8, packed.shape[1]
    if packed.dtype != torch.int32 or K % group or scales.shape != (K // group, N) or \
            (zeros is not None and zeros.shape != scales.shape):
        raise ValueError(f"int4 dequantize: packed [K / 8, N] int32 and scales/zeros [K / G, N] (group {group}) "
                         f"expected; got {tuple(packed.shape)} {packed.dtype}, {tuple(scales.shape)}, "
                         f"{None if zeros is None else tuple(zeros.shape)}")
    if packed.stride(1) != 1 or scales.stride(1) != 1 or (zeros is not None and zeros.stride() != scales.stride()):
        raise ValueError("int4 dequantize: packed, scales and zeros must have contiguous rows (zeros as scales)")
    out = torch.empty((N, K), dtype=dtype, device=packed.device)
    grid = (triton.cdiv(K, BLOCK_K), triton.cdiv(N, BLOCK_N))
    _dequantize_kernel[grid](packed, scales, scales if zeros is None else zeros, out, N, K, packed.stride(0),
                             scales.stride(0), GROUP=group, HAS_ZEROS=zeros is not None, BLOCK_K=BLOCK_K,
                             BLOCK_N=BLOCK_N, num_warps=4)
    return out
