"""The norms, the gated activation and tree attention writing the next linear layer's 8-bit input themselves
(Triton, interpreted) against the PyTorch reference on fresh random inputs, and the one-pass GEMM epilogue
(`scale_columns`).

Kernel and reference compute the same float32 result in a different order, so a value next to a rounding boundary
may land one quantization step apart: the outputs are compared with the float32 reference's own quantization
within one step (fp8: a step is 2^-3 of the value's power of two; int8: one unit of the scale), nearly all of them
equal, and every value the reference saturates is saturated by the kernel too. The residual sum a fused norm
writes is compared exactly. Triton's interpreter converts float32 to float8 wrongly where the mantissa carries into
the exponent (127.7 becomes 64), so for fp8 the reference's float32 result is converted by the interpreted
one-pass quantize kernel (`kernels.quantize`, the same conversion); on a GPU, `kernels.quantize`'s start-up check
holds the hardware's conversion to torch's bit for bit."""

from __future__ import annotations

import pytest
import torch

from spinfc.backend import reference
from spinfc.backend.kernels import gated_act, quantize, rms_norm, scale_columns, tree_attention
from spinfc.backend.kernels.quantize_reference import ActivationQuant
from spinfc.runtime.quant.schemes import SCHEMES

STORAGES = {"fp8": SCHEMES["fp8-static"], "int8": SCHEMES["int8-static"]}


@pytest.fixture
def g(seed) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def spec(name: str, y: torch.Tensor, headroom: float) -> ActivationQuant:
    """A static scale that puts max |y| at `headroom` times the range (above 1: some values saturate)."""
    s = STORAGES[name]
    inv = torch.tensor(s.q_max * headroom / float(y.abs().max()))
    return ActivationQuant(inv, s.storage, s.q_min, s.q_max)


def step(name: str, scaled: torch.Tensor) -> torch.Tensor:
    """The spacing of the 8-bit grid at each |value| (in units of the scale)."""
    if name == "int8":
        return torch.ones_like(scaled)
    exponent = torch.floor(torch.log2(scaled.abs().clamp(min=2.0**-6)))  # e4m3: subnormals below 2^-6
    return torch.exp2(exponent - 3)


def assert_within_a_step(name: str, got: torch.Tensor, y: torch.Tensor, quant: ActivationQuant):
    s = STORAGES[name]
    assert got.dtype == s.storage and got.shape == y.shape
    if name == "int8":
        want = quant.reference(y)
    else:  # the interpreter's own float8 conversion (see the module's docstring)
        want = quantize._launch(y, quant.inv_scale, quant.storage, quant.q_min, quant.q_max)
    off = (got.float() - want.float()).abs()
    if name == "fp8":  # the interpreter's carry: a kernel value that rounds up to a power of two (its mantissa
        doubled = 2 * got.float()  # carrying) is written as half of it (0.1215 -> 0.0625; a GPU gives 0.125)
        carried = (doubled.abs().log2() == doubled.abs().log2().round()) & \
            ((doubled - want.float()).abs() <= step(name, want.float()) * 1.0001)
        off = torch.where(carried, (doubled - want.float()).abs(), off)
    worst = float((off / step(name, want.float())).max())
    assert worst <= 1.0001, f"{worst} steps apart"
    saturated = want.float().abs() >= s.q_max
    assert torch.equal(got.float()[saturated], want.float()[saturated])
    assert float((got.float() != want.float()).float().mean()) < 0.02  # one rounding apart at most, nearly never


@pytest.mark.parametrize("name", list(STORAGES))
@pytest.mark.parametrize("unit_offset", [False, True])
def test_add_rms_norm_writes_the_quantized_input(name, unit_offset, g):
    x, residual = torch.randn(9, 72, generator=g) * 2, torch.randn(9, 72, generator=g)
    w = torch.randn(72, generator=g)
    y, want_sum = reference.add_rms_norm(x, residual, w, 1e-6, unit_offset, torch.float32)
    quant = spec(name, y, headroom=1.2)
    got, got_sum = rms_norm.add_rms_norm(x, residual, w, 1e-6, unit_offset, quant=quant)
    torch.testing.assert_close(got_sum, want_sum, rtol=0, atol=0)
    assert_within_a_step(name, got, y, quant)
    # the reference op with the same quant is the float32 result quantized in torch
    assert torch.equal(reference.add_rms_norm(x, residual, w, 1e-6, unit_offset, quant=quant)[0].float(),
                       quant.reference(y).float())


@pytest.mark.parametrize("name", list(STORAGES))
def test_rms_norm_writes_the_quantized_input(name, g):
    x, w = torch.randn(6, 40, generator=g) * 5, torch.randn(40, generator=g)
    y = reference.rms_norm(x, w, 1e-5, False, torch.float32)
    quant = spec(name, y, headroom=0.9)
    assert_within_a_step(name, rms_norm.rms_norm(x, w, 1e-5, False, quant=quant), y, quant)


@pytest.mark.parametrize("name", list(STORAGES))
@pytest.mark.parametrize("kind", ["silu", "gelu_tanh"])
def test_gated_act_writes_the_quantized_input_from_a_fused_view(name, kind, g):
    F = 1100  # more than one column block
    fused = torch.randn(5, 2 * F, generator=g) * 3
    gate, up = fused[:, :F], fused[:, F:]
    y = reference.gated_act(gate, up, kind)
    quant = spec(name, y, headroom=1.1)
    assert_within_a_step(name, gated_act.gated_act(gate, up, kind, quant=quant), y, quant)
    assert torch.equal(reference.gated_act(gate, up, kind, quant=quant).float(), quant.reference(y).float())


@pytest.mark.parametrize("name", list(STORAGES))
def test_tree_attention_writes_the_output_projections_quantized_input(name, g, seed):
    import random

    from .trees import random_layout

    ends, positions, spans = random_layout(random.Random(seed), 128, align=64, contents=3)
    q, k, v = (torch.randn(128, heads, 16, generator=g) * 2 for heads in (4, 2, 2))
    y = reference.tree_attention(q, k, v, ends, positions, spans, scale=0.25, window=None)  # float32
    quant = spec(name, y, headroom=1.1)
    got = tree_attention.tree_attention(q, k, v, ends, positions, spans, scale=0.25, window=None, quant=quant)
    assert_within_a_step(name, got, y, quant)
    assert torch.equal(reference.tree_attention(q, k, v, ends, positions, spans, scale=0.25, window=None,
                                                quant=quant).float(), quant.reference(y).float())


@pytest.mark.parametrize("acc_dtype", [torch.int32, torch.float32])
@pytest.mark.parametrize("out_dtype", [torch.float32, torch.float16])
def test_scale_columns_is_torchs_arithmetic_bit_for_bit(acc_dtype, out_dtype, g):
    if acc_dtype == torch.int32:
        acc = torch.randint(-(1 << 20), 1 << 20, (7, 300), generator=g, dtype=torch.int32)
    else:
        acc = torch.randn(7, 300, generator=g) * 1000
    scale = torch.rand(300, generator=g) * 1e-3
    got = scale_columns.scale_columns(acc, scale, out_dtype)
    assert got.dtype == out_dtype and torch.equal(got, scale_columns.reference(acc, scale, out_dtype))
