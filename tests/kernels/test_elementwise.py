"""RMSNorm (with and without the fused residual add), RoPE in place, and the gated activation (Triton,
interpreted) against the PyTorch reference on fresh random inputs, including strided views."""

from __future__ import annotations

import pytest
import torch

from spinfc.backend.kernels import gated_act, rms_norm, rope


@pytest.fixture
def g(seed) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@pytest.mark.parametrize("dim", [64, 48])
@pytest.mark.parametrize("unit_offset", [False, True])
def test_rms_norm(dim, unit_offset, g):
    x, w = torch.randn(7, dim, generator=g) * 3, torch.randn(dim, generator=g)
    torch.testing.assert_close(rms_norm.rms_norm(x, w, 1e-6, unit_offset), rms_norm.reference(x, w, 1e-6, unit_offset))


@pytest.mark.parametrize("unit_offset", [False, True])
def test_add_rms_norm_returns_the_sum_and_its_norm(unit_offset, g):
    x, residual, w = torch.randn(5, 40, generator=g), torch.randn(5, 40, generator=g), torch.randn(40, generator=g)
    normed, summed = rms_norm.add_rms_norm(x, residual, w, 1e-5, unit_offset)
    want_normed, want_summed = rms_norm.reference_add(x, residual, w, 1e-5, unit_offset)
    torch.testing.assert_close(summed, want_summed)
    torch.testing.assert_close(normed, want_normed)


def test_add_rms_norm_keeps_a_wider_residual_and_writes_the_dtype_asked(g):
    """The mixed precision policy's case, one step wider (the interpreter gets bf16 wrong): a float32 block output
    added to a float64 residual stream stays float64; the normed rows come out in the dtype asked."""
    x, residual = torch.randn(5, 40, generator=g), torch.randn(5, 40, generator=g).double()
    w = torch.randn(40, generator=g)
    normed, summed = rms_norm.add_rms_norm(x, residual, w, 1e-5, False, torch.float32)
    want_normed, want_summed = rms_norm.reference_add(x, residual, w, 1e-5, False, torch.float32)
    assert summed.dtype == torch.float64 and normed.dtype == torch.float32
    torch.testing.assert_close(summed, want_summed)
    torch.testing.assert_close(normed, want_normed)
    alone = rms_norm.rms_norm(residual, w, 1e-5, False, torch.float32)
    assert alone.dtype == torch.float32
    torch.testing.assert_close(alone, rms_norm.reference(residual, w, 1e-5, False, torch.float32))


@pytest.mark.parametrize("heads, dim", [(3, 16), (2, 12)])
def test_rope_in_place_on_a_view(heads, dim, g):
    rows = 9
    fused = torch.randn(rows, (heads + 1) * dim, generator=g)  # q and one kv head side by side, as a qkv output
    q = fused[:, : heads * dim].view(rows, heads, dim)
    positions = torch.randint(0, 600, (rows,), generator=g)
    want = rope.reference(q.clone(), positions, 10000.0)
    untouched = fused[:, heads * dim :].clone()
    out = rope.apply_rope(q, positions, 10000.0)
    assert out.data_ptr() == q.data_ptr()
    torch.testing.assert_close(q, want, atol=1e-4, rtol=1e-4)
    assert torch.equal(fused[:, heads * dim :], untouched)


def test_mrope_matches_the_reference_and_plain_rope_where_the_positions_agree(g):
    """M-RoPE (positions [3, T], Qwen3.5's interleaved sections): the kernel matches the reference; rows whose three
    positions are equal (text) are the same bits as plain rope at that position."""
    rows, heads, dim, sections = 10, 3, 16, (4, 2, 2)
    q = torch.randn(rows, heads, dim, generator=g)
    positions = torch.randint(0, 600, (3, rows), generator=g)
    positions[:, :4] = positions[0, :4]  # text rows: t = h = w
    want = rope.reference(q.clone(), positions, 10000.0, None, sections)
    out = rope.apply_rope(q.clone(), positions, 10000.0, None, sections)
    torch.testing.assert_close(out, want, atol=1e-4, rtol=1e-4)
    plain = rope.apply_rope(q[:4].clone(), positions[0, :4].contiguous(), 10000.0)
    assert torch.equal(out[:4], plain)
    assert torch.equal(want[:4], rope.reference(q[:4].clone(), positions[0, :4].contiguous(), 10000.0))


@pytest.mark.filterwarnings("ignore:overflow encountered in exp")  # exp(-x) -> inf is how sigmoid reaches 0
@pytest.mark.parametrize("kind", ["silu", "gelu_tanh"])
def test_gated_act_on_views_of_a_fused_output(kind, g):
    rows, width = 6, 1500  # more than one column block, and a ragged last one
    fused = torch.randn(rows, 2 * width, generator=g) * 4
    gate, up = fused[:, :width], fused[:, width:]
    torch.testing.assert_close(gated_act.gated_act(gate, up, kind), gated_act.reference(gate, up, kind))


def test_gated_act_rejects_an_unknown_kind():
    with pytest.raises(ValueError, match="unknown activation"):
        gated_act.gated_act(torch.zeros(2, 4), torch.zeros(2, 4), "relu")
