"""segment: each content with its copy of the question tree, as rows counted from 0 (`Segment`)."""

from __future__ import annotations

import attrs

from spinfc.ir.nodes import Program, Segment, TreeRows
from spinfc.passes.context import PassContext, recalled, remember


def segment(program: Program, ctx: PassContext) -> Program:
    """Fill `program.segments`, one per content in content order.

    A content of L tokens takes rows [0, L) with positions 0..L-1 and `end` = the segment's length, so every row of
    the segment sees it. The trie follows in depth-first preorder (`TreeRows`): a node at depth d (0 for a root) has
    position L + d and `end = row + its subtree size`, so query i sees key j iff j <= i < end[j] exactly when j is
    i's ancestor-or-self. `reads` has one `AnswerRead` per trie read, `prompt_rows` one row per question (its
    prompt's last token), both in row order. The trie's rows are the same for every content but for the offset L, so
    they are laid out once, and each segment holds its content's tokens and that one layout. Guarantees: no `end`
    reaches past the segment. Stats: segment_rows (all segments' rows).
    """
    tree = _tree_rows(program, ctx.memo)
    segments = tuple(Segment(index, content.tokens, tree, program.read_contents, content.media)
                     for index, content in enumerate(program.contents))
    program = attrs.evolve(program, segments=segments)
    return program.with_stat("segment_rows", sum(s.length for s in segments))


def _tree_rows(program: Program, memo: dict) -> TreeRows:
    """The trie's `TreeRows`: the same for every content, and for every request with the same trie object (the
    engine's dedupe-prefixes memo hands it back), so kept in `memo` under the trie's identity (the entry holds the
    trie, so the identity is not reused)."""
    key = ("tree rows", id(program.trie))
    entry = recalled(memo, key)
    if entry is not None and entry[0] is program.trie:
        return entry[1]
    tree = TreeRows.of(program.trie)
    remember(memo, key, (program.trie, tree), len(program.questions))
    return tree
