"""Static activation quantization in one pass: x (any float dtype) -> clamp(x * (1 / scale)) in float8 e4m3 or
int8 (rounded half to even), reading x once and writing one byte per element. The torch version (`reference`)
reads and writes float32 three times, which at the Llama-3-8B shape costs more than the 8-bit GEMMs save.

`quantize` is checked once per device against `reference` on a probe tensor (bit for bit) and falls back to it
where the kernel fails or differs, so a Triton build that converts differently never changes a score."""

from __future__ import annotations

import logging

import torch
import triton
import triton.language as tl

from spinfc.backend.kernels.quant_store import quantized
from spinfc.backend.kernels.quantize_reference import quantize_reference as reference

log = logging.getLogger("spinfc.kernels")
BLOCK = 4096


@triton.jit
def _quantize_kernel(X, OUT, INV_SCALE, n, q_min, q_max, IS_INT: tl.constexpr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ok = offsets < n
    x = tl.load(X + offsets, mask=ok, other=0.0).to(tl.float32)
    tl.store(OUT + offsets, quantized(x, INV_SCALE, q_min, q_max, IS_INT).to(OUT.dtype.element_ty), mask=ok)


def _launch(x, inv_scale, storage, q_min, q_max):
    x = x.contiguous()
    out = torch.empty(x.shape, dtype=storage, device=x.device)
    n = x.numel()
    _quantize_kernel[(triton.cdiv(n, BLOCK),)](x, out, inv_scale, n, q_min, q_max,
                                               IS_INT=not storage.is_floating_point, BLOCK=BLOCK, num_warps=8)
    return out


_CHECKED: dict[tuple, bool] = {}  # (device, storage) -> the kernel matched the reference


def _kernel_ok(device: torch.device, storage: torch.dtype, q_min: float, q_max: float) -> bool:
    key = (device, storage)
    if key not in _CHECKED:
        g = torch.Generator(device=device).manual_seed(0)
        probe = torch.randn(3, 5000, generator=g, device=device) * 40  # beyond the range too: the clamp is checked
        probe[0, :8] = torch.tensor([0.5, 1.5, 2.5, -0.5, -1.5, 300.0, -300.0, 0.0])
        inv = torch.tensor(1.0, device=device)
        try:
            ok = all(torch.equal(_launch(p, inv, storage, q_min, q_max).view(torch.uint8),
                                 reference(p, inv, storage, q_min, q_max).view(torch.uint8))
                     for p in (probe, probe.to(torch.bfloat16)))
        except Exception as error:  # a Triton build that cannot compile it: the torch version runs instead
            log.warning("the quantize kernel failed on %s (%s); using the torch version", device, error)
            ok = False
        if not ok:
            log.warning("the quantize kernel does not match the torch version on %s; using the torch version", device)
        _CHECKED[key] = ok
    return _CHECKED[key]


def quantize(x: torch.Tensor, inv_scale: torch.Tensor, storage: torch.dtype, q_min: float, q_max: float):
    """x: any shape, float -> the same shape in `storage`; inv_scale: a float32 scalar tensor on x's device.
    The first call per device and storage checks the kernel (outside any graph capture: a warm-up's eager
    forward reaches it first)."""
    if _kernel_ok(x.device, storage, q_min, q_max):
        return _launch(x, inv_scale, storage, q_min, q_max)
    return reference(x, inv_scale, storage, q_min, q_max)
