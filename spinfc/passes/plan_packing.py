"""plan-packing: which content (with its copy of the question tree) goes in which pass, and where."""

from __future__ import annotations

import attrs

from spinfc.errors import CompileError
from spinfc.ir.nodes import Pass, Placement, Plan, Program
from spinfc.passes.dedupe_prefixes import trie_size


def plan_packing(program: Program) -> Program:
    """Bin-pack the contents into passes of `program.budget` rows, first-fit decreasing.

    Each content needs `len(content.tokens) + trie size` rows and starts at a multiple of `program.block`, so it
    occupies its length rounded up to the block. Guarantees: every content is placed exactly once and never split;
    every placement starts at a multiple of the block and ends within the budget; placements in a pass do not
    overlap and are ordered by content index, each starting at the first block after the one before. The plan
    depends only on the lengths (contents are taken longest first, ties by index, each into the first pass with
    room), so it is deterministic. Stats: passes, rows_used. Raises `CompileError` for a budget that is not a
    positive multiple of the block, or a content longer than the budget.
    """
    budget, block = program.budget, program.block
    if block < 1 or budget < block or budget % block:
        raise CompileError(
            f"the token budget {budget:,} is not a positive multiple of the block {block}",
            code="bad_budget", hint=f"pass --token-budget as a multiple of {max(block, 1)} (default 16384)",
        )
    tree = trie_size(program.trie)
    lengths = [len(content.tokens) + tree for content in program.contents]
    for content, length in zip(program.contents, lengths):
        if length > budget:
            raise CompileError(
                f"content {content.id!r} needs {length:,} rows ({len(content.tokens):,} content tokens + {tree:,} "
                f"question-tree tokens), more than the pass budget of {budget:,}",
                code="content_too_long",
                hint=f"raise the budget with --token-budget (a multiple of {block}, at least "
                f"{-(-length // block) * block}), shorten the content, or ask fewer questions",
            )
    bins: list[list[int]] = []  # content indices per pass
    free: list[int] = []  # rows left per pass, counted in whole blocks
    for index in sorted(range(len(lengths)), key=lambda i: (-lengths[i], i)):
        need = -(-lengths[index] // block) * block
        target = next((b for b, room in enumerate(free) if room >= need), None)
        if target is None:
            bins.append([])
            free.append(budget)
            target = len(bins) - 1
        bins[target].append(index)
        free[target] -= need
    passes = tuple(Pass(i, _place(sorted(members), lengths, block)) for i, members in enumerate(bins))
    program = attrs.evolve(program, plan=Plan(budget, block, passes))
    return program.with_stat("passes", len(passes)).with_stat("rows_used", sum(lengths))


def _place(members: list[int], lengths: list[int], block: int) -> tuple[Placement, ...]:
    placements, start = [], 0
    for index in members:
        placements.append(Placement(index, start, lengths[index]))
        start += -(-lengths[index] // block) * block
    return tuple(placements)
