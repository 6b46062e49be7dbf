"""Tree attention (Triton, interpreted) against the PyTorch reference on fresh random trees, and its batch
invariance: a content's rows alone and packed with others at another offset.

Under the interpreter the products are NumPy on the host CPU, whose rounding follows the host's BLAS (one float32
step differs on some AMD CPUs when a query block straddles two contents), so alone-vs-packed is compared within
`INVARIANCE_TOL`; a mask that let a row see another content's keys moves it by far more. Bit-identity is promised
on CUDA and checked there (the acceptance run's `packed`, benchmarks/acceptance/kinds.py)."""

from __future__ import annotations

import random

import pytest
import torch

from spinfc.backend.kernels import tree_attention as kernel

from .trees import place, random_layout

# |alone - packed| allowed under the interpreter: a few float32 rounding steps of values of order 1
INVARIANCE_TOL = 1e-6


def qkv(rows: int, heads: int, kv_heads: int, dim: int, generator: torch.Generator):
    q = torch.randn(rows, heads, dim, generator=generator)
    k = torch.randn(rows, kv_heads, dim, generator=generator)
    v = torch.randn(rows, kv_heads, dim, generator=generator)
    return q, k, v


@pytest.mark.parametrize(
    "heads, kv_heads, dim, window, blocks, rows",
    [
        (4, 2, 16, None, (16, 16, 1), 192),  # GQA, many small blocks
        (2, 2, 24, 7, (16, 16, 1), 192),  # a head dim that is not a power of two, sliding window in positions
        (3, 1, 16, 5, (32, 16, 1), 192),  # query blocks larger than key blocks, one kv head shared by three
        (2, 1, 32, None, None, 192),  # the launcher's own blocks (192 rows)
        (2, 1, 32, 9, None, 256),  # the launcher's own blocks, with a window (256 rows)
        (4, 2, 16, None, (16, 16, 1, 3, True), 192),  # a program per key/value head: its two query heads at once
        (8, 2, 24, 7, (32, 16, 2, 3, True), 192),  # four query heads a program, with a window
        (8, 1, 16, None, (16, 16, 1, 2, True), 192),  # a group of eight: four query heads a program, two programs
        (2, 2, 256, None, None, 192),  # Gemma's 256-wide heads in float32: the launcher's smaller float32 tiles
        (4, 1, 512, 5, None, 192),  # Gemma 4's 512-wide full-attention heads, with a window
    ],
)
def test_matches_reference_on_random_trees(heads, kv_heads, dim, window, blocks, rows, seed):
    rng, generator = random.Random(seed), torch.Generator().manual_seed(seed)
    ends, positions, spans = random_layout(rng, rows, align=64, contents=4)
    assert len(spans) >= 1
    q, k, v = qkv(rows, heads, kv_heads, dim, generator)
    scale = dim**-0.5
    got = kernel.tree_attention(q, k, v, ends, positions, spans, scale=scale, window=window, blocks=blocks)
    want = kernel.reference(q, k, v, ends, positions, spans, scale=scale, window=window)
    torch.testing.assert_close(got, want, atol=2e-5, rtol=2e-5, msg=lambda m: f"seed {seed}: {m}")


def test_padding_rows_see_only_themselves(seed):
    rows, generator = 64, torch.Generator().manual_seed(seed)
    ends = torch.arange(1, rows + 1, dtype=torch.int32)
    q, k, v = qkv(rows, 2, 1, 16, generator)
    got = kernel.tree_attention(q, k, v, ends, torch.zeros(rows, dtype=torch.int64), (), scale=0.25, window=None,
                                blocks=(16, 16, 1))
    torch.testing.assert_close(got, v.repeat_interleave(2, dim=1))


def test_visible_key_blocks_skip_other_contents_and_ended_subtrees():
    # content 0 at rows [0, 40) (a chain), content 1 at [64, 100): rows 64..69 its content, then two branches
    # [70, 85) and [85, 100); padding elsewhere. Query blocks of 32 rows, key blocks of 16.
    ends = torch.arange(1, 129, dtype=torch.int32)
    ends[0:40] = 40
    ends[64:70] = 100
    ends[70:85] = 85
    ends[85:100] = 100
    positions = torch.zeros(128, dtype=torch.int64)
    block_list, count = kernel.visible_key_blocks(ends, positions, None, 32, 16)
    listed = [block_list[q, : count[q]].tolist() for q in range(4)]
    # query block 1 (rows 32..63) still sees content 0; block 2 starts content 1 (key blocks 4, 5);
    # block 3 (rows 96..127) sees content 1's content rows (block 4) and the second branch (block 5: 80..95
    # holds rows 85..95 of it), and itself (6, 7); nothing of content 0
    assert listed == [[0, 1], [0, 1, 2, 3], [4, 5], [4, 5, 6, 7]]
    # a window drops key blocks whose every position is at least `window` behind the whole query block
    positions[64:96] = torch.arange(32)
    positions[96:128] = 50
    block_list, count = kernel.visible_key_blocks(ends, positions, 30, 32, 16)
    assert block_list[3, : count[3]].tolist() == [5, 6, 7]  # block 4's positions 0..15 are 35+ behind


@pytest.mark.parametrize("window", [None, 5])
def test_block_list_kernel_matches_the_sorted_reference(window, seed):
    rng = random.Random(seed)
    for block_m, block_n in ((32, 16), (64, 32), (16, 16)):
        ends, positions, _ = random_layout(rng, 320, align=32, contents=7)
        got_list, got_count = kernel.visible_key_blocks(ends, positions, window, block_m, block_n)
        want_list, want_count = kernel.visible_key_blocks_reference(ends, positions, window, block_m, block_n)
        assert torch.equal(got_count, want_count), f"seed {seed}, blocks {(block_m, block_n)}"
        assert int(want_count.min()) >= 1  # every query block sees at least its own rows
        for q in range(got_count.shape[0]):
            n = int(want_count[q])
            assert got_list[q, :n].tolist() == want_list[q, :n].tolist(), f"seed {seed}, query block {q}"


@pytest.mark.parametrize("window", [None, 6])
@pytest.mark.parametrize("align, blocks", [(32, (32, 16, 1)), (16, (64, 16, 1)),  # 2nd: query blocks straddle
                                           (32, (32, 16, 1, 3, True))])  # both query heads in one program
def test_same_alone_and_packed(window, align, blocks, seed):
    rng, generator = random.Random(seed), torch.Generator().manual_seed(seed)
    rows, dim = 256, 16
    ends, positions, spans = random_layout(rng, rows, align=align, contents=6)
    q, k, v = qkv(rows, 2, 1, dim, generator)
    packed = kernel.tree_attention(q, k, v, ends, positions, spans, scale=0.25, window=window, blocks=blocks)
    for a, b in spans:
        for start in (0, rows - align * -(-(b - a) // align)):  # first and last aligned place it fits
            alone_ends, alone_positions, alone_spans = place(ends, positions, (a, b), rows, start)
            moved = [torch.randn(rows, *t.shape[1:], generator=generator) for t in (q, k, v)]
            for t, m in zip((q, k, v), moved):
                m[start : start + b - a] = t[a:b]
            alone = kernel.tree_attention(*moved, alone_ends, alone_positions, alone_spans, scale=0.25,
                                          window=window, blocks=blocks)
            torch.testing.assert_close(alone[start : start + b - a], packed[a:b], atol=INVARIANCE_TOL, rtol=0,
                                       msg=lambda m: f"seed {seed}, span {(a, b)} at {start}: {m}")


def test_rejects_bad_shapes():
    q = torch.zeros(64, 4, 16)
    kv = torch.zeros(64, 3, 16)
    ends = torch.arange(1, 65, dtype=torch.int32)
    with pytest.raises(ValueError, match="multiple of Hk"):
        kernel.tree_attention(q, kv, kv, ends, torch.zeros(64, dtype=torch.int64), scale=1.0, window=None)
    with pytest.raises(ValueError, match="not a multiple of the blocks"):
        kernel.tree_attention(q[:48], q[:48], q[:48], ends[:48], torch.zeros(48, dtype=torch.int64), scale=1.0,
                              window=None)


def test_a_block_seen_by_one_row_only_is_visited(seed):
    # One chain of 33 rows: with 32-row query blocks, row 32 alone sees key block 0 (its ends are all 33).
    rows, generator = 64, torch.Generator().manual_seed(seed)
    ends = torch.arange(1, rows + 1, dtype=torch.int32)
    ends[:33] = 33
    positions = torch.zeros(rows, dtype=torch.int64)
    positions[:33] = torch.arange(33)
    q, k, v = qkv(rows, 2, 2, 16, generator)
    got = kernel.tree_attention(q, k, v, ends, positions, ((0, 33),), scale=0.25, window=None, blocks=(32, 16, 1))
    want = kernel.reference(q, k, v, ends, positions, ((0, 33),), scale=0.25, window=None)
    torch.testing.assert_close(got, want, atol=2e-5, rtol=2e-5)
