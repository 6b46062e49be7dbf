"""segment: each content with its copy of the question tree, as rows counted from 0 (`Segment`)."""

from __future__ import annotations

import attrs

from spinfc.ir.nodes import AnswerRead, ContentRow, Program, PromptRow, Segment, preorder
from spinfc.passes.context import PassContext


def segment(program: Program, ctx: PassContext) -> Program:
    """Fill `program.segments`, one per content in content order.

    A content of L tokens takes rows [0, L) with positions 0..L-1 and `end` = the segment's length, so every row of
    the segment sees it. The trie follows in depth-first preorder: a node at depth d (0 for a root) has position
    L + d and `end = row + its subtree size`, so query i sees key j iff j <= i < end[j] exactly when j is i's
    ancestor-or-self. `reads` has one `AnswerRead` per trie read, `prompt_rows` one row per question (its prompt's
    last token), both in row order. The trie's rows are the same for every content but for the offset L, so they
    are laid out once. Guarantees: no `end` reaches past the segment. Stats: segment_rows (all segments' rows).
    """
    tree_tokens, depths, sizes, reads, prompts = _tree_rows(program, ctx.memo)
    segments = []
    for index, content in enumerate(program.contents):
        length = len(content.tokens)
        total = length + len(tree_tokens)
        segments.append(Segment(
            content=index,
            tokens=content.tokens + tree_tokens,
            positions=tuple(range(length)) + tuple(length + d for d in depths),
            ends=(total,) * length + tuple(length + k + size for k, size in enumerate(sizes)),
            reads=tuple(AnswerRead(length + k, index, r.question, r.option, r.step, r.token) for k, r in reads),
            prompt_rows=tuple(PromptRow(length + k, index, q) for k, q in prompts),
            content_rows=tuple(ContentRow(k, index, k) for k in range(length)) if program.read_contents else (),
        ))
    program = attrs.evolve(program, segments=tuple(segments))
    return program.with_stat("segment_rows", sum(s.length for s in segments))


def _tree_rows(program: Program, memo: dict) -> tuple:
    """The trie in preorder as (tokens, depths, subtree sizes, (row, read)s, (row, question)s): the same for every
    content, and for every request with the same trie object (the engine's dedupe-prefixes memo hands it back), so
    kept in `memo` under the trie's identity (the entry holds the trie, so the identity is not reused)."""
    key = ("tree rows", id(program.trie))
    entry = memo.get(key)
    if entry is not None and entry[0] is program.trie:
        return entry[1]
    rows = preorder(program.trie)
    value = (tuple(row.node.token for row in rows), [row.depth for row in rows], [row.size for row in rows],
             [(k, r) for k, row in enumerate(rows) for r in row.node.reads],
             [(k, q) for k, row in enumerate(rows) for q in row.node.prompts])
    memo[key] = (program.trie, value)
    return value
