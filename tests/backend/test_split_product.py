"""The split product (`spinfc.backend.split_product`) on the CPU: a float32 activation times half weights, as two half
parts with float32 sums, is float32-class against float64, far closer than one half product; it adds into a
float32 residual as the GPU's GEMM does; the LM head's logits take it only where the activation is float32."""

from __future__ import annotations

import pytest
import torch

from spinfc.backend import split_product
from tests.rounding import assert_same_across_launches

# (half dtype, relative bound of the split product, at least this many times closer than one half product)
CASES = {torch.float16: (2e-6, 100), torch.bfloat16: (2e-5, 100)}


def _inputs(seed: int, dtype: torch.dtype, M: int = 37, K: int = 256, N: int = 96):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(M, K, generator=g) * torch.rand(M, 1, generator=g) * 4  # rows of different scales
    w = (torch.randn(N, K, generator=g) * K**-0.5).to(dtype)
    return x, w, x.double() @ w.double().t()


@pytest.mark.parametrize("dtype", list(CASES), ids=["fp16", "bf16"])
def test_the_split_product_is_float32_class_and_beats_one_half_product(seed, dtype):
    x, w, exact = _inputs(seed, dtype)
    bound, factor = CASES[dtype]
    scale = exact.abs().max()
    split = split_product.split_mm(x, w)
    assert split.dtype == torch.float32 and split.shape == exact.shape
    split_error = float((split.double() - exact).abs().max() / scale)
    one_half = split_product.mm_float32(x.to(dtype), w)  # the activation rounded once to the half dtype
    half_error = float((one_half.double() - exact).abs().max() / scale)
    assert split_error < bound
    assert split_error * factor < half_error


def test_the_halves_hold_the_activation(seed):
    x, _, _ = _inputs(seed, torch.float16)
    hi, lo = split_product.halves(x, torch.float16)
    assert hi.dtype == lo.dtype == torch.float16
    assert float(((hi.double() + lo.double()) - x.double()).abs().max() / x.abs().max()) < 2**-21


def test_a_row_of_the_split_product_is_that_rows_alone(seed):
    x, w, _ = _inputs(seed, torch.float16)
    full = split_product.split_mm(x, w)
    other = torch.randn_like(x)
    other[5] = x[5]
    assert torch.equal(split_product.split_mm(other, w)[5], full[5])
    assert_same_across_launches(split_product.split_mm(x[:6], w)[5], full[5], x.device)  # fewer rows: another kernel


@pytest.mark.parametrize("activation", ["half", "float32"])
def test_add_product_adds_into_the_residual_in_place(seed, activation):
    x, w, exact = _inputs(seed, torch.float16)
    a = x.to(torch.float16) if activation == "half" else x
    exact = a.double() @ w.double().t()
    residual = torch.randn(exact.shape, generator=torch.Generator().manual_seed(seed + 1))
    before = residual.clone()
    out = split_product.add_product(residual, a, w)
    assert out is residual and out.dtype == torch.float32
    assert float((out.double() - before.double() - exact).abs().max()) < 1e-5 * float(exact.abs().max() + 1)


def test_head_logits_split_only_a_float32_activation(seed):
    x, w, _ = _inputs(seed, torch.bfloat16)
    assert torch.equal(split_product.head_logits(x, w), split_product.split_mm(x, w))
    same = x.to(torch.bfloat16)
    assert torch.equal(split_product.head_logits(same, w), torch.matmul(same, w.t()).float())
    w32 = w.float()
    assert torch.equal(split_product.head_logits(x, w32), torch.matmul(x, w32.t()))
