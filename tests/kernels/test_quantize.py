"""The one-pass activation quantization kernel (interpreted) against its torch version, bit for bit, and the
check that makes a kernel which converts differently fall back to the torch version. (fp8 is left to the GPU:
Triton's interpreter rounds float8 conversions differently from the hardware, which the check guards.)"""

from __future__ import annotations

import torch

from spinfc.backend.kernels import quantize


def test_int8_quantize_matches_the_torch_version():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(37, 300, generator=g) * 50
    x[0, :6] = torch.tensor([0.5, 1.5, 2.5, -0.5, 1000.0, -1000.0])
    inv = torch.tensor(1 / 0.7)
    got = quantize._launch(x, inv, torch.int8, -128.0, 127.0)
    assert torch.equal(got, quantize.reference(x, inv, torch.int8, -128.0, 127.0))
    assert quantize.reference(torch.tensor([0.5, 1.5, 2.5]), torch.tensor(1.0), torch.int8, -128.0,
                              127.0).tolist() == [0, 2, 2]


def test_a_kernel_that_differs_falls_back_to_the_torch_version(monkeypatch):
    monkeypatch.setattr(quantize, "_CHECKED", {})
    monkeypatch.setattr(quantize, "_launch", lambda x, *args: torch.zeros(x.shape, dtype=torch.int8))
    x = torch.full((4, 8), 3.0)
    got = quantize.quantize(x, torch.tensor(1.0), torch.int8, -128.0, 127.0)
    assert got.tolist() == [[3] * 8] * 4 and quantize._CHECKED == {(x.device, torch.int8): False}
