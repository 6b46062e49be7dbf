"""Rotary position embedding applied in place (Hugging Face's rotate_half convention: dimension i pairs with
i + D/2). One program per row rotates all its heads; the frequencies come from the same float32 table the
reference builds, so only the cos/sin evaluation differs. With M-RoPE (Qwen3.5 reading images: positions [3, T],
`sections`) each frequency reads one of its row's three positions (the axis table `reference.mrope_axes`); the
angle is the same product, so a row whose three positions are equal turns exactly as plain rope."""

from __future__ import annotations

from functools import lru_cache

import triton
import triton.language as tl
import torch

from spinfc.backend import reference as _reference


@triton.jit
def _rope_kernel(
    X, POS, INV_FREQ, AXES,  # x: [T, H, D] (read and written), pos: [T] (or [3, T]) int64, inv_freq: [D/2] float32,
    stride_t, stride_h, stride_axis, H,  # axes: [D/2] int64, the position each frequency reads (M-RoPE only)
    HALF: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_HALF: tl.constexpr, MROPE: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    heads = tl.arange(0, BLOCK_H)
    dims = tl.arange(0, BLOCK_HALF)
    dim_ok = dims < HALF
    ok = (heads[:, None] < H) & dim_ok[None, :]
    if MROPE:
        axis = tl.load(AXES + dims, mask=dim_ok, other=0)  # [BHALF]
        position = tl.load(POS + axis * stride_axis + row, mask=dim_ok, other=0).to(tl.float32)
    else:
        position = tl.load(POS + row).to(tl.float32)
    angle = position * tl.load(INV_FREQ + dims, mask=dim_ok, other=0.0)  # [BHALF]
    cos = tl.cos(angle)[None, :]
    sin = tl.sin(angle)[None, :]
    first = X + row * stride_t + heads[:, None] * stride_h + dims[None, :]
    x1 = tl.load(first, mask=ok, other=0.0).to(tl.float32)
    x2 = tl.load(first + HALF, mask=ok, other=0.0).to(tl.float32)
    tl.store(first, (x1 * cos - x2 * sin).to(X.dtype.element_ty), mask=ok)
    tl.store(first + HALF, (x2 * cos + x1 * sin).to(X.dtype.element_ty), mask=ok)


@lru_cache(maxsize=16)
def _inv_freq(head_dim: int, theta: float, rotated: int | None, device: torch.device) -> torch.Tensor:
    """[D/2] float32, computed exactly as the reference does (`reference.inv_freq`; cached: built once per model)."""
    return _reference.inv_freq(head_dim, theta, rotated, device)


@lru_cache(maxsize=16)
def _axes(half: int, sections: tuple[int, ...], device: torch.device) -> torch.Tensor:
    return _reference.mrope_axes(half, sections, device)


def apply_rope(x: torch.Tensor, positions: torch.Tensor, theta: float, rotated: int | None = None,
               sections: tuple[int, ...] | None = None) -> torch.Tensor:
    """x: [T, H, D] (a view is fine, e.g. q inside a fused qkv output; unit last stride), positions: [T] int64
    ([3, T] with `sections`: M-RoPE). Rotates x IN PLACE and returns it; with `rotated`, only the first `rotated`
    pairs turn (the others' frequency is 0: cos 1, sin 0, so they are written back unchanged)."""
    want = (x.shape[0],) if sections is None else (3, x.shape[0])
    if x.dim() != 3 or x.shape[2] % 2 or positions.shape != want:
        raise ValueError(f"apply_rope: x must be [T, H, D] with D even and positions {list(want)}; got "
                         f"{tuple(x.shape)}, {tuple(positions.shape)}")
    if x.stride(2) != 1:
        raise ValueError("apply_rope: x must have a unit stride in its last dimension")
    T, H, D = x.shape
    inv_freq = _inv_freq(D, float(theta), rotated, x.device)
    if sections is None:
        axes, stride_axis = inv_freq, 0  # not read
    else:
        positions = positions.contiguous()
        axes, stride_axis = _axes(D // 2, tuple(sections), x.device), positions.stride(0)
    block = triton.next_power_of_2(H) * triton.next_power_of_2(D // 2)
    _rope_kernel[(T,)](
        x, positions, inv_freq, axes, x.stride(0), x.stride(1), stride_axis, H,
        HALF=D // 2, BLOCK_H=triton.next_power_of_2(H), BLOCK_HALF=triton.next_power_of_2(D // 2),
        MROPE=sections is not None, num_warps=min(8, max(1, block // 512)),
    )
    return x


reference = _reference.apply_rope
