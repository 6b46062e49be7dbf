"""layout: the tree mask (query i sees key j iff j <= i < end[j]) is exactly ancestor-or-self in one content."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings

from spinfc.ir import verify
from spinfc.ir.nodes import AnswerRead, OptionSlot, TrieNode
from spinfc.passes import dedupe_prefixes, layout, plan_packing, segment

from .programs import ctx_of, random_programs, tokenized


def compile_tokenized(program):
    ctx = ctx_of(program)
    program = verify(dedupe_prefixes(program))
    for transform in (segment, plan_packing, layout):
        program = verify(transform(program, ctx))
    return program


def mask_from_ends(ends) -> np.ndarray:
    T = len(ends)
    i = np.arange(T)[:, None]  # [T, 1] queries
    j = np.arange(T)[None, :]  # [1, T] keys
    return (j <= i) & (i < np.asarray(ends)[None, :])  # [T, T]


def brute_force(program, placements, T):
    """The mask built from the tree itself: rows assigned by a recursive walk, i sees j iff j is an
    ancestor-or-self of i in the same content (every content row is an ancestor of every later row)."""
    mask = np.eye(T, dtype=bool)  # [T, T] padding sees only itself
    tokens, positions = {}, {}

    def walk(node: TrieNode, row: int, ancestors: list[int], depth: int, length: int) -> int:
        tokens[row], positions[row] = node.token, length + depth
        for a in ancestors + [row]:
            mask[row, a] = True
        next_row = row + 1
        for child in node.children:
            next_row = walk(child, next_row, ancestors + [row], depth + 1, length)
        return next_row

    for pl in placements:
        content = program.contents[pl.content].tokens
        rows = list(range(pl.start, pl.start + len(content)))
        for k, row in enumerate(rows):
            tokens[row], positions[row] = content[k], k
            mask[row, rows[: k + 1]] = True
        at = pl.start + len(content)
        for root in program.trie:
            at = walk(root, at, rows, 0, len(content))
        assert at == pl.start + pl.length
    return mask, tokens, positions


@settings(max_examples=200, deadline=None)
@given(random_programs())
def test_mask_equals_ancestor_or_self(program):
    program = compile_tokenized(program)
    for pss, lay in zip(program.plan.passes, program.layouts):
        expected, tokens, positions = brute_force(program, pss.placements, lay.budget)
        assert np.array_equal(mask_from_ends(lay.ends), expected)
        for row, token in tokens.items():
            assert (lay.tokens[row], lay.positions[row]) == (token, positions[row])
        for row in set(range(lay.budget)) - set(tokens):
            assert (lay.tokens[row], lay.positions[row], lay.ends[row]) == (program.pad, 0, row + 1)


@settings(max_examples=200, deadline=None)
@given(random_programs())
def test_every_read_sees_content_prompt_and_option_prefix(program):
    """Read through the mask, the row of each read holds exactly the sequence its token continues, at positions
    0..n-1; and every (content, question, option, step) is read once."""
    program = compile_tokenized(program)
    seen = []
    for lay in program.layouts:
        mask = mask_from_ends(lay.ends)
        for r in lay.reads:
            visible = np.flatnonzero(mask[r.row])
            question = program.questions[r.question]
            option = question.slot.options[r.option]
            expect = program.contents[r.content].tokens + question.tokens + option.tokens[: r.step]
            assert tuple(lay.tokens[j] for j in visible) == expect
            assert [lay.positions[j] for j in visible] == list(range(len(expect)))
            assert r.token == option.tokens[r.step]
            seen.append((r.content, r.question, r.option, r.step))
        for pr in lay.prompt_rows:
            visible = np.flatnonzero(mask[pr.row])
            expect = program.contents[pr.content].tokens + program.questions[pr.question].tokens
            assert tuple(lay.tokens[j] for j in visible) == expect
    wanted = [
        (c, q, o, s)
        for c in range(len(program.contents))
        for q, question in enumerate(program.questions) if isinstance(question.slot, OptionSlot)
        for o, option in enumerate(question.slot.options) for s in range(len(option.tokens))
    ]
    assert sorted(seen) == sorted(wanted)


def test_small_layout_exactly():
    # content [7, 8]; questions: prompt [1, 2] options [3] and [4, 5]; prompt [1, 6] with a text slot
    program = compile_tokenized(tokenized([[7, 8]], [([1, 2], [[3], [4, 5]]), ([1, 6], None)], budget=16, block=8))
    (lay,) = program.layouts
    # rows: 0:7 1:8 | 2:1 3:2 4:4 5:6 | padding 6..15
    assert lay.tokens[:6] == (7, 8, 1, 2, 4, 6)
    assert lay.positions[:6] == (0, 1, 2, 3, 4, 3)
    assert lay.ends[:6] == (6, 6, 6, 5, 5, 6)
    assert lay.tokens[6:] == (0,) * 10 and lay.positions[6:] == (0,) * 10
    assert lay.ends[6:] == tuple(range(7, 17))
    assert lay.spans == ((0, 6),)
    assert lay.reads == (
        AnswerRead(3, 0, 0, 0, 0, 3), AnswerRead(3, 0, 0, 1, 0, 4), AnswerRead(4, 0, 0, 1, 1, 5),
    )
    assert [(p.row, p.question) for p in lay.prompt_rows] == [(3, 0), (5, 1)]


def test_padding_uses_the_programs_pad_token():
    program = compile_tokenized(tokenized([[7]], [([1], [[3]])], budget=8, block=4, pad=99))
    assert program.layouts[0].tokens == (7, 1) + (99,) * 6


def test_contents_of_a_pass_start_on_blocks_and_share_the_tree():
    program = compile_tokenized(tokenized([[7, 8, 9], [5]], [([1], [[3]])], budget=16, block=8))
    (lay,) = program.layouts
    assert lay.spans == ((0, 4), (8, 10))
    assert lay.tokens[8:10] == (5, 1) and lay.positions[8:10] == (0, 1) and lay.ends[8:10] == (10, 10)
    assert [(r.row, r.content) for r in lay.reads] == [(3, 0), (9, 1)]
