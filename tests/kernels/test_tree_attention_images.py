"""Tree attention with image blocks (`firsts`: the rows of a block see each other both ways), Triton (interpreted)
against the PyTorch reference on fresh random trees with random image blocks inside their contents, and the
reference against a dense mask written from the rule (first[j] <= i < end[j])."""

from __future__ import annotations

import random

import pytest
import torch

from spinfc.backend.kernels import tree_attention as kernel

from .trees import random_layout


def with_image_blocks(rng: random.Random, ends: torch.Tensor, spans) -> tuple[torch.Tensor, list]:
    """firsts [T] int32: j, except inside one or two random blocks of each span's content rows (where the end is the
    span's stop), whose rows share their block's first row."""
    firsts = torch.arange(ends.shape[0], dtype=torch.int32)
    blocks = []
    for start, stop in spans:
        content = start
        while content < stop and ends[content] == stop:
            content += 1
        for _ in range(rng.randint(1, 2)):
            if content - start < 3:
                break
            a = rng.randrange(start, content - 1)
            b = rng.randint(a + 2, min(content, a + 40))
            firsts[a:b] = a
            blocks.append((a, b))
    return firsts, blocks


def dense(q, k, v, ends, positions, firsts, scale, window):
    T, H, D = q.shape
    group = H // k.shape[1]
    i = torch.arange(T)[:, None]
    seen = (firsts.long()[None, :] <= i) & (i < ends.long()[None, :])
    if window is not None:
        seen &= (positions[:, None] - positions[None, :]) < window
    scores = torch.einsum("ihd,jhd->hij", q, k.repeat_interleave(group, dim=1)) * scale
    weights = torch.softmax(scores.masked_fill(~seen[None], float("-inf")), dim=-1)
    return torch.einsum("hij,jhd->ihd", weights, v.repeat_interleave(group, dim=1))


@pytest.mark.parametrize("heads, kv_heads, dim, window, blocks", [
    (4, 2, 16, None, (16, 16, 1)),
    (2, 1, 32, 40, None),
    (8, 2, 24, None, (32, 16, 2, 3, True)),
])
def test_image_blocks_match_the_reference_and_the_rule(heads, kv_heads, dim, window, blocks, seed):
    rng, generator = random.Random(seed), torch.Generator().manual_seed(seed)
    rows = 256
    ends, positions, spans = random_layout(rng, rows, align=64, contents=3)
    firsts, placed = with_image_blocks(rng, ends, spans)
    assert placed
    q, k, v = (torch.randn(rows, h, dim, generator=generator) for h in (heads, kv_heads, kv_heads))
    scale = dim**-0.5
    want = kernel.reference(q, k, v, ends, positions, spans, scale=scale, window=window, firsts=firsts)
    torch.testing.assert_close(want, dense(q, k, v, ends, positions, firsts, scale, window), atol=2e-5, rtol=2e-5)
    got = kernel.tree_attention(q, k, v, ends, positions, spans, scale=scale, window=window, blocks=blocks,
                                firsts=firsts)
    torch.testing.assert_close(got, want, atol=2e-5, rtol=2e-5, msg=lambda m: f"seed {seed}: {m}")
    causal = kernel.reference(q, k, v, ends, positions, spans, scale=scale, window=window)
    a, b = placed[0]
    assert (causal[a:b - 1] - want[a:b - 1]).abs().max() > 1e-4  # the block's rows see later rows of it


def test_the_block_list_keeps_key_blocks_an_image_reaches_back_into(seed):
    rng = random.Random(seed)
    ends, positions, spans = random_layout(rng, 256, align=64, contents=3)
    firsts, _ = with_image_blocks(rng, ends, spans)
    got = kernel.visible_key_blocks(ends, positions, None, 16, 16, firsts)
    want = kernel.visible_key_blocks_reference(ends, positions, None, 16, 16, firsts)
    assert torch.equal(got[1], want[1])
    for q in range(got[1].shape[0]):
        assert torch.equal(got[0][q, :got[1][q]], want[0][q, :want[1][q]])
