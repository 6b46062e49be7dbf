"""Cutting compiled passes into segments and packing segments from many programs into shared passes."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from spinfc.ir.nodes import Content, Option, OptionSlot, Program, Query, Question, SlotRef, SourceLoc, Template, Text
from spinfc.passes.dedupe_prefixes import dedupe_prefixes
from spinfc.passes.layout import layout
from spinfc.passes.plan_packing import plan_packing
from spinfc.runtime.scheduler import PassShape, assemble, cut_segments, fill, round_up

LOC = SourceLoc("<test>")


def laid_out(contents: list[list[int]], questions: list[tuple[list[int], list[list[int]]]], budget: int,
             block: int) -> Program:
    """A program as tokenize leaves it (the last content is the floor), run through the remaining passes."""
    queries, qs = [], []
    for i, (prompt, options) in enumerate(questions):
        slot = OptionSlot(tuple(Option(f"o{j}", tuple(o)) for j, o in enumerate(options)))
        template = Template(f"p{i}<?>", (Text(f"p{i}"), SlotRef("options", LOC)), LOC)
        queries.append(Query(f"q{i}", template, slot))
        qs.append(Question(f"q{i}", (), f"p{i}", slot, tuple(prompt)))
    cs = tuple(Content(f"c{i}", "x", is_floor=i == len(contents) - 1, tokens=tuple(t)) for i, t in enumerate(contents))
    program = Program("test", cs, tuple(queries), tuple(qs), budget=budget, block=block)
    return layout(plan_packing(dedupe_prefixes(program)))


token = st.integers(1, 6)
question = st.tuples(st.lists(token, min_size=1, max_size=4),
                     st.lists(st.lists(token, min_size=1, max_size=3), min_size=1, max_size=3, unique_by=tuple))
programs = st.tuples(
    st.lists(st.lists(st.integers(7, 50), min_size=1, max_size=20), min_size=2, max_size=5),
    st.lists(question, min_size=1, max_size=4),
    st.sampled_from([4, 8, 16]),
)


def check_mask_stays_inside(layout_) -> None:
    for start, stop in layout_.spans:
        for j in range(start, stop):
            assert j < layout_.ends[j] <= stop  # key j is seen only by rows of its own span
    inside = {j for start, stop in layout_.spans for j in range(start, stop)}
    for j in set(range(layout_.budget)) - inside:
        assert layout_.ends[j] == j + 1  # padding sees only itself


@settings(max_examples=60, deadline=None)
@given(st.lists(programs, min_size=1, max_size=3), st.randoms(use_true_random=False))
def test_segments_survive_repacking(specs, rng: random.Random) -> None:
    """Segments cut from several programs' passes, packed together in a shuffled order at new offsets, cut out
    again unchanged: same tokens, positions, relative ends and reads; the mask never crosses a segment."""
    segments = []
    for contents, questions, block in specs:
        program = laid_out(contents, questions, budget=512, block=block)
        cut = cut_segments(program.layouts)
        assert sorted(s.content for s in cut) == list(range(len(contents)))
        for segment in cut:
            assert len(segment.reads) == sum(len(o) for _, opts in questions for o in opts)
        segments.extend(cut)
    rng.shuffle(segments)
    shape = PassShape(budget=4096, block=rng.choice([8, 16, 32]))
    remaining = list(segments)
    while remaining:
        chosen = fill(remaining, shape)
        assert chosen, "a segment that fits an empty pass must be chosen"
        packed = [remaining[i] for i in chosen]
        layout_ = assemble(packed, shape)
        check_mask_stays_inside(layout_)
        assert all(start % shape.block == 0 for start, _ in layout_.spans)
        assert cut_segments([layout_]) == packed
        remaining = [s for i, s in enumerate(remaining) if i not in set(chosen)]


def test_fill_is_first_fit_in_order_within_the_budget() -> None:
    program = laid_out([[9] * 20, [9] * 100, [9] * 10, [9] * 3], [([1, 2], [[3], [4]])], budget=512, block=16)
    segments = cut_segments(program.layouts)
    by_content = sorted(segments, key=lambda s: s.content)
    lengths = [s.length for s in by_content]
    assert lengths == [22, 102, 12, 5]  # content + the prompt's 2 tokens (one-token options read at the last)
    shape = PassShape(budget=128, block=16)
    # 22 at 0; next start 32: 102 does not fit (32 + 102 > 128); 12 at 32; 5 at 48
    assert fill(by_content, shape) == [0, 2, 3]
    used = assemble([by_content[i] for i in (0, 2, 3)], shape).spans
    assert used == ((0, 22), (32, 44), (48, 53))
    assert fill(by_content, PassShape(budget=128, block=16, max_reads=2)) == [0]  # two reads per segment
    assert not PassShape(budget=64, block=16).admits(by_content[1])
    assert round_up(23, 16) == 32 and round_up(32, 16) == 32


def test_a_trimmed_pass_launches_only_the_blocks_it_uses() -> None:
    program = laid_out([[9] * 20, [9] * 10, [9] * 3], [([1, 2], [[3], [4]])], budget=512, block=16)
    segments = sorted(cut_segments(program.layouts), key=lambda s: s.content)
    trimmed = assemble(segments[:2], PassShape(budget=128, block=16, trim=True))
    full = assemble(segments[:2], PassShape(budget=128, block=16))
    assert trimmed.budget == 48 and full.budget == 128  # 22 rows, then 12 at 32 -> 44 -> 48
    assert trimmed.tokens == full.tokens[:48] and trimmed.ends == full.ends[:48] and trimmed.reads == full.reads
