"""Per-token (dynamic) fp8 quantization in one pass: x [M, K] (any float dtype) -> (clamp(x / s_row) in float8
e4m3 [M, K], s_row [M, 1] float32) with s_row = max |x_row| / 448 (float32's eps for a zero row), compressed-tensors'
FP8_DYNAMIC arithmetic. One program per row reads it once, takes its maximum, and writes one byte per element and
its scale: the torch version (`reference`, from `quantize_reference`) reads and writes the activation four times.

A row's scale is its own maximum (exact in any order) and the division is IEEE's (`div_rn`), so the kernel's bytes
are the torch version's; `quantize_tokens` checks that once per device on a probe (bit for bit) and falls back to
the torch version where the kernel fails or differs, so a Triton build that converts differently never changes a
score. (Triton's interpreter rounds float8 conversions differently from the hardware: the CPU tests check the
scales, the GPU checks the bytes.)"""

from __future__ import annotations

import logging

import torch
import triton
import triton.language as tl

from spinfc.backend.kernels.quantize_reference import quantize_tokens_reference

log = logging.getLogger("spinfc.kernels")
EPS = float(torch.finfo(torch.float32).eps)  # compressed-tensors' scale of an all-zero row (`token_scales`)


@triton.jit
def _quantize_rows_kernel(X, OUT, SCALE, K, stride_x, q_max, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    ok = cols < K
    x = tl.load(X + row * stride_x + cols, mask=ok, other=0.0).to(tl.float32)  # the row, once
    scale = tl.max(tl.abs(x), axis=0) / q_max  # a division by 448 rounds as torch's (both IEEE)
    scale = tl.where(scale == 0.0, eps, scale)
    q = tl.minimum(tl.maximum(tl.math.div_rn(x, scale), -q_max), q_max)
    tl.store(OUT + row * K + cols, q.to(OUT.dtype.element_ty), mask=ok)
    tl.store(SCALE + row, scale)


def _launch(x: torch.Tensor, chosen) -> tuple[torch.Tensor, torch.Tensor]:
    """x: [M, K] -> (q [M, K] in the scheme's storage, scales [M, 1] float32)."""
    if x.stride(-1) != 1:
        x = x.contiguous()
    M, K = x.shape
    out = torch.empty((M, K), dtype=chosen.storage, device=x.device)
    scale = torch.empty((M, 1), dtype=torch.float32, device=x.device)
    block = triton.next_power_of_2(K)
    _quantize_rows_kernel[(M,)](x, out, scale, K, x.stride(0), chosen.q_max, EPS, BLOCK=block,
                                num_warps=4 if block <= 2048 else 8 if block <= 8192 else 16)
    return out, scale


reference = quantize_tokens_reference  # the same in torch: the scheme's own arithmetic


_CHECKED: dict[tuple, bool] = {}  # (device, storage) -> the kernel matched the reference


def _kernel_ok(device: torch.device, chosen) -> bool:
    key = (device, chosen.storage)
    if key not in _CHECKED:
        g = torch.Generator(device=device).manual_seed(0)
        probe = torch.randn(5, 5000, generator=g, device=device) * torch.logspace(-3, 3, 5, device=device)[:, None]
        probe[1] = 0.0  # a zero row: eps
        try:
            ok = True
            for p in (probe, probe.to(torch.bfloat16), probe.to(torch.float16)):
                (q, s), (want_q, want_s) = _launch(p, chosen), reference(p, chosen)
                ok &= torch.equal(q.view(torch.uint8), want_q.view(torch.uint8)) and torch.equal(s, want_s)
        except Exception as error:  # a Triton build that cannot compile it: the torch version runs instead
            log.warning("the per-token quantize kernel failed on %s (%s); using the torch version", device, error)
            ok = False
        if not ok:
            log.warning("the per-token quantize kernel does not match the torch version on %s; using the torch "
                        "version", device)
        _CHECKED[key] = ok
    return _CHECKED[key]


def quantize_tokens(x: torch.Tensor, chosen) -> tuple[torch.Tensor, torch.Tensor]:
    """x: [M, K] float -> (q [M, K] in `chosen.storage`, scales [M, 1] float32), `chosen` a dynamic
    `schemes.Scheme`. The first call per device and storage checks the kernel (outside any graph capture: a
    warm-up's eager forward reaches it first)."""
    if _kernel_ok(x.device, chosen):
        return _launch(x, chosen)
    return reference(x, chosen)
