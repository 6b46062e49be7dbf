"""The per-token fp8 quantization kernel (interpreted) against the scheme's torch arithmetic: every row's scale and
its scaled values bit for bit (zero rows, rows of very different magnitude, a strided input). The float8 cast itself
is left to the GPU (Triton's interpreter rounds float8 conversions differently from the hardware): there the kernel
checks its bytes once per device and falls back to the torch version where they differ."""

from __future__ import annotations

import attrs
import torch

from spinfc.backend.kernels import quantize_tokens
from spinfc.runtime.quant.schemes import SCHEMES

DYNAMIC = SCHEMES["fp8-dynamic"]


def test_scales_and_scaled_values_match_bit_for_bit():
    """Every row's scale, and the row divided by it and clamped (stored as float32 here, so the interpreter's float8
    rounding is not what is compared), are the torch arithmetic's bits."""
    g = torch.Generator().manual_seed(5)
    wide = torch.randn(9, 700, generator=g) * torch.logspace(-4, 4, 9)[:, None]
    wide[2] = 0.0
    x = wide[:, :300]  # rows with a stride: the kernel reads each row where it is
    q, scale = quantize_tokens._launch(x, DYNAMIC)
    want_q, want_scale = quantize_tokens.reference(x, DYNAMIC)
    assert q.dtype == DYNAMIC.storage and scale.shape == (9, 1)
    assert torch.equal(scale, want_scale) and float(scale[2]) == quantize_tokens.EPS
    scaled, _ = quantize_tokens._launch(x, attrs.evolve(DYNAMIC, storage=torch.float32))
    assert torch.equal(scaled, (x.float() / want_scale).clamp(-448.0, 448.0))


def test_a_kernel_that_differs_falls_back_to_the_torch_version(monkeypatch):
    monkeypatch.setattr(quantize_tokens, "_CHECKED", {})
    monkeypatch.setattr(quantize_tokens, "_launch", lambda x, chosen: (torch.zeros(x.shape, dtype=chosen.storage),
                                                                       torch.ones(x.shape[0], 1)))
    x = torch.full((4, 8), 3.0)
    q, scale = quantize_tokens.quantize_tokens(x, DYNAMIC)
    assert torch.equal(scale, torch.full((4, 1), 3.0 / 448)) and quantize_tokens._CHECKED == {
        (x.device, DYNAMIC.storage): False}
