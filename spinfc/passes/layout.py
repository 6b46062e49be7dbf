"""layout: each pass as rows: token ids, positions, `end[]` for the tree mask, and the answer rows."""

from __future__ import annotations

import attrs

from spinfc.ir.nodes import AnswerRead, ContentRow, PassLayout, Placement, Program, PromptRow, TrieRow, preorder


def layout(program: Program) -> Program:
    """Fill `program.layouts`, one `PassLayout` per pass of the plan.

    A placed content of L tokens at rows [s, s + L) has positions 0..L-1 and `end = stop` (the span's stop, s +
    its length), so every row of its span sees it. The trie follows in depth-first preorder: a node at depth d
    (0 for a root) has position L + d and `end = row + its subtree size`, so query i sees key j iff j <= i <
    end[j] exactly when j is i's ancestor-or-self in the same content. Rows outside every span are padding:
    token `program.pad`, position 0, end = row + 1 (each sees only itself). `reads` has one `AnswerRead` per
    trie read per placed content, and `prompt_rows` one row per question per placed content (its prompt's last
    token), both in row order. Spans are the placements' [start, start + length). With `program.read_contents`,
    `content_rows` lists every content row (its content and position), in row order.
    """
    rows = preorder(program.trie)
    layouts = tuple(
        _layout_pass(program, p.index, p.placements, rows) for p in program.plan.passes
    )
    return attrs.evolve(program, layouts=layouts)


def _layout_pass(program: Program, index: int, placements: tuple[Placement, ...], trie: list[TrieRow]) -> PassLayout:
    budget = program.plan.budget
    tokens = [program.pad] * budget  # [T]
    positions = [0] * budget  # [T]
    ends = list(range(1, budget + 1))  # [T] padding rows see only themselves
    reads: list[AnswerRead] = []
    prompt_rows: list[PromptRow] = []
    content_rows: list[ContentRow] = []
    for placement in placements:
        content = program.contents[placement.content].tokens
        start, length = placement.start, len(content)
        stop = placement.start + placement.length
        for k, token in enumerate(content):
            tokens[start + k], positions[start + k], ends[start + k] = token, k, stop
        if program.read_contents:
            content_rows.extend(ContentRow(start + k, placement.content, k) for k in range(length))
        base = start + length
        for k, row in enumerate(trie):
            at = base + k
            tokens[at], positions[at], ends[at] = row.node.token, length + row.depth, at + row.size
            reads.extend(
                AnswerRead(at, placement.content, r.question, r.option, r.step, r.token) for r in row.node.reads
            )
            prompt_rows.extend(PromptRow(at, placement.content, q) for q in row.node.prompts)
    spans = tuple((p.start, p.start + p.length) for p in placements)
    return PassLayout(
        index=index, budget=budget, tokens=tuple(tokens), positions=tuple(positions), ends=tuple(ends),
        spans=spans, reads=tuple(reads), prompt_rows=tuple(prompt_rows), content_rows=tuple(content_rows),
    )
