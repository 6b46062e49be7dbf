"""The reference ops against independent formulations: a dense mask built from the rule, and transformers' own
norm, rope and activation code."""

from __future__ import annotations

import pytest
import torch

from spinfc.backend import reference as ops


def dense_tree_attention(q, k, v, ends, positions, spans, scale, window):
    """The rule written as one dense [T, T] mask, for small T only."""
    T, H, D = q.shape
    group = H // k.shape[1]
    span_of = torch.full((T,), -1)
    for index, (start, stop) in enumerate(spans):
        span_of[start:stop] = index
    i = torch.arange(T)[:, None]
    j = torch.arange(T)[None, :]
    mask = (j <= i) & (i < ends.long()[None, :]) & (span_of[:, None] == span_of[None, :]) & (span_of[:, None] >= 0)
    if window is not None:
        mask &= (positions[:, None] - positions[None, :]) < window
    mask |= (span_of[:, None] < 0) & (i == j)
    kk = k.float().repeat_interleave(group, dim=1)
    vv = v.float().repeat_interleave(group, dim=1)
    scores = torch.einsum("ihd,jhd->hij", q.float(), kk) * scale
    scores = scores.masked_fill(~mask[None], float("-inf"))
    return torch.einsum("hij,jhd->ihd", scores.softmax(-1), vv).to(q.dtype)


def tree_case():
    """Two spans (a content with two branches; a content with one) and padding rows between and after."""
    # span A rows 0..9: content 0..5 (positions 0..5), branch rows 6..7 (pos 6,7), branch rows 8..9 (pos 6,7)
    # row 10, 11: padding; span B rows 12..16: a plain sequence; rows 17..19: padding
    ends = [10] * 6 + [8, 8, 10, 10] + [11, 12] + [17] * 5 + [18, 19, 20]
    positions = list(range(6)) + [6, 7, 6, 7] + [0, 0] + list(range(5)) + [0, 0, 0]
    spans = ((0, 10), (12, 17))
    return torch.tensor(ends, dtype=torch.int32), torch.tensor(positions), spans


@pytest.mark.parametrize("window", [None, 3])
@pytest.mark.parametrize("block", [1024, 4])
def test_tree_attention_matches_the_dense_rule(window, block, monkeypatch):
    monkeypatch.setattr(ops, "QUERY_BLOCK", block)
    torch.manual_seed(0)
    ends, positions, spans = tree_case()
    T, H, Hk, D = 20, 4, 2, 8
    q, k, v = torch.randn(T, H, D), torch.randn(T, Hk, D), torch.randn(T, Hk, D)
    got = ops.tree_attention(q, k, v, ends, positions, spans, scale=D**-0.5, window=window)
    want = dense_tree_attention(q, k, v, ends, positions, spans, D**-0.5, window)
    torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-6)
    # A branch never sees its sibling: row 8 (second branch) equals attention over rows 0..5 and 8 alone.
    keep = [0, 1, 2, 3, 4, 5, 8]
    alone = dense_tree_attention(
        q[keep], k[keep], v[keep], torch.tensor([7] * 7, dtype=torch.int32), positions[keep], ((0, 7),),
        D**-0.5, window,
    )
    torch.testing.assert_close(got[8], alone[6], atol=1e-6, rtol=1e-6)
    # Padding rows return their own value.
    torch.testing.assert_close(got[10], v[10].repeat_interleave(2, dim=0))


def test_short_spans_side_by_side_share_their_products_and_keep_the_rule(monkeypatch):
    """Prompts packed row to row (/v1/completions' echo, issue 47 item 4): 60 spans of 1 to 9 rows in 300 rows, one
    fused attention product per 128 rows or so, not one per span (main made 60 a layer), each span masked from
    the others; spans at the 128-row block (every score pass's contents) stay alone."""
    torch.manual_seed(1)
    lengths = torch.randint(1, 10, (60,)).tolist()
    starts = [sum(lengths[:k]) for k in range(len(lengths))]
    spans = tuple((start, start + n) for start, n in zip(starts, lengths))
    T, H, Hk, D = spans[-1][1] + 3, 4, 2, 8  # three padding rows after the last
    ends = torch.tensor([stop for start, stop in spans for _ in range(start, stop)] + [T - 2, T - 1, T],
                        dtype=torch.int32)
    positions = torch.tensor([row - start for start, stop in spans for row in range(start, stop)] + [0, 0, 0])
    q, k, v = torch.randn(T, H, D), torch.randn(T, Hk, D), torch.randn(T, Hk, D)
    calls = []
    fused = ops.F.scaled_dot_product_attention
    monkeypatch.setattr(ops.F, "scaled_dot_product_attention", lambda *a, **kw: calls.append(1) or fused(*a, **kw))
    got = ops.tree_attention(q, k, v, ends, positions, spans, scale=D**-0.5, window=None)
    torch.testing.assert_close(got, dense_tree_attention(q, k, v, ends, positions, spans, D**-0.5, None),
                               atol=1e-6, rtol=1e-6)
    assert len(calls) <= 2 * T // ops.QUERY_BLOCK + 1 < len(spans)
    assert [len(members) for members in ops._ranges(((0, 50), (128, 200), (256, 300)))] == [1, 1, 1]


def test_rms_norm_matches_transformers():
    from transformers.models.gemma3.modeling_gemma3 import Gemma3RMSNorm
    from transformers.models.llama.modeling_llama import LlamaRMSNorm

    torch.manual_seed(0)
    x, w = torch.randn(5, 16), torch.randn(16)
    llama = LlamaRMSNorm(16, eps=1e-5)
    llama.weight.data.copy_(w)
    gemma = Gemma3RMSNorm(16, eps=1e-6)
    gemma.weight.data.copy_(w)
    torch.testing.assert_close(ops.rms_norm(x, w, 1e-5, False), llama(x))
    torch.testing.assert_close(ops.rms_norm(x, w, 1e-6, True), gemma(x))
    residual = torch.randn(5, 16)
    normed, summed = ops.add_rms_norm(x, residual, w, 1e-5, False)
    torch.testing.assert_close(summed, x + residual)
    torch.testing.assert_close(normed, llama(x + residual))


def test_apply_rope_matches_transformers():
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    torch.manual_seed(0)
    T, H, D, theta = 7, 3, 16, 10000.0
    positions = torch.tensor([0, 1, 2, 5, 3, 3, 100])
    q = torch.randn(T, H, D)
    inv_freq = 1.0 / theta ** (torch.arange(0, D, 2).float() / D)
    freqs = positions.float()[:, None] * inv_freq[None]
    emb = torch.cat((freqs, freqs), -1)
    want, _ = apply_rotary_pos_emb(q.transpose(0, 1)[None], q.transpose(0, 1)[None], emb.cos()[None], emb.sin()[None])
    torch.testing.assert_close(ops.apply_rope(q, positions, theta), want[0].transpose(0, 1))


def test_mrope_matches_transformers_qwen3_5():
    """Interleaved M-RoPE (positions [3, T]) against transformers' Qwen3_5TextRotaryEmbedding and its partial
    rotary apply: image rows with distinct (t, h, w), text rows with three equal positions."""
    from transformers import Qwen3_5TextConfig
    from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5TextRotaryEmbedding, apply_rotary_pos_emb

    torch.manual_seed(0)
    sections, rd, theta = (3, 3, 2), 16, 10000.0
    config = Qwen3_5TextConfig(head_dim=64, rope_parameters={"rope_type": "default", "rope_theta": theta,
                                                            "partial_rotary_factor": 0.25, "mrope_section": sections})
    positions = torch.tensor([[0, 1, 2, 2, 2, 2, 4, 5], [0, 1, 2, 2, 3, 3, 4, 5], [0, 1, 2, 3, 2, 3, 4, 5]])
    q = torch.randn(8, 3, rd)
    cos, sin = Qwen3_5TextRotaryEmbedding(config)(q, positions[:, None])
    want, _ = apply_rotary_pos_emb(q.transpose(0, 1)[None], q.transpose(0, 1)[None], cos, sin)
    torch.testing.assert_close(ops.apply_rope(q, positions, theta, None, sections), want[0].transpose(0, 1))


def test_gated_act_and_answer_logprobs():
    torch.manual_seed(0)
    gate, up = torch.randn(4, 6), torch.randn(4, 6)
    torch.testing.assert_close(ops.gated_act(gate, up, "silu"), torch.nn.functional.silu(gate) * up)
    gelu = torch.nn.functional.gelu(gate, approximate="tanh") * up
    torch.testing.assert_close(ops.gated_act(gate, up, "gelu_tanh"), gelu)
    with pytest.raises(ValueError, match="unknown activation"):
        ops.gated_act(gate, up, "relu")
    hidden, head = torch.randn(3, 8), torch.randn(50, 8)
    rows, tokens = torch.tensor([2, 0, 2]), torch.tensor([7, 49, 0])
    full = torch.log_softmax(hidden @ head.t(), -1)
    torch.testing.assert_close(ops.answer_logprobs(hidden, head, rows, tokens), full[rows, tokens])
