"""Packing segments from many programs into shared passes, as the engine's scheduler does (`fill`, `assemble`)."""

from __future__ import annotations

import random

import attrs

from hypothesis import given, settings
from hypothesis import strategies as st

from spinfc.ir.nodes import Content, Option, OptionSlot, Program, Query, Question, SlotRef, SourceLoc, Template, Text
from spinfc.passes.layout import assemble
from spinfc.passes.plan_packing import admits, fill, round_up
from spinfc.shapes import Shapes

from passes.programs import segmented

LOC = SourceLoc("<test>")


def segments_of(contents: list[list[int]], questions: list[tuple[list[int], list[list[int]]]], budget: int,
                block: int) -> list:
    """The segments of a program as tokenize leaves it (the last content is the floor)."""
    queries, qs = [], []
    for i, (prompt, options) in enumerate(questions):
        slot = OptionSlot(tuple(Option(f"o{j}", tuple(o)) for j, o in enumerate(options)))
        template = Template(f"p{i}<?>", (Text(f"p{i}"), SlotRef("options", LOC)), LOC)
        queries.append(Query(f"q{i}", template, slot))
        qs.append(Question(f"q{i}", (), f"p{i}", slot, tuple(prompt)))
    cs = tuple(Content(f"c{i}", "x", is_floor=i == len(contents) - 1, tokens=tuple(t)) for i, t in enumerate(contents))
    program = Program("test", cs, tuple(queries), tuple(qs), budget=budget, block=block)
    return list(segmented(program).segments)


token = st.integers(1, 6)
question = st.tuples(st.lists(token, min_size=1, max_size=4),
                     st.lists(st.lists(token, min_size=1, max_size=3), min_size=1, max_size=3, unique_by=tuple))
programs = st.tuples(
    st.lists(st.lists(st.integers(7, 50), min_size=1, max_size=20), min_size=2, max_size=5),
    st.lists(question, min_size=1, max_size=4),
    st.sampled_from([4, 8, 16]),
)


def cut(layout_, program_segments) -> list:
    """The segments back out of an assembled pass: each span's rows, ends and reads shifted to start at 0."""
    out = []
    for (start, stop), segment in zip(layout_.spans, program_segments):
        reads = tuple(attrs.evolve(r, row=r.row - start) for r in layout_.reads if start <= r.row < stop)
        prompts = tuple(attrs.evolve(r, row=r.row - start) for r in layout_.prompt_rows if start <= r.row < stop)
        out.append((tuple(layout_.tokens[start:stop]), tuple(layout_.positions[start:stop]),
                    tuple(e - start for e in layout_.ends[start:stop]), reads, prompts))
    return out


def rows_of(segment) -> tuple:
    """What `cut` gives back for a segment: its rows as laid out from 0."""
    return segment.tokens, segment.positions, segment.ends, segment.reads, segment.prompt_rows


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
    """Segments of several programs, packed together in a shuffled order at new offsets, cut out again unchanged:
    same tokens, positions, relative ends and reads; the mask never crosses a segment."""
    segments = []
    for contents, questions, block in specs:
        made = segments_of(contents, questions, budget=512, block=block)
        assert [s.content for s in made] == list(range(len(contents)))
        for segment in made:
            assert len(segment.reads) == sum(len(o) for _, opts in questions for o in opts)
        segments.extend(made)
    rng.shuffle(segments)
    shape = Shapes(budget=4096, block=rng.choice([8, 16, 32]))
    remaining = list(segments)
    while remaining:
        chosen = fill(remaining, shape)
        assert chosen, "a segment that fits an empty pass must be chosen"
        packed = [remaining[i] for i in chosen]
        layout_ = assemble(packed, shape)
        check_mask_stays_inside(layout_)
        assert all(start % shape.block == 0 for start, _ in layout_.spans)
        assert cut(layout_, packed) == [rows_of(s) for s in packed]
        remaining = [s for i, s in enumerate(remaining) if i not in set(chosen)]


def test_fill_is_first_fit_in_order_within_the_budget() -> None:
    by_content = segments_of([[9] * 20, [9] * 100, [9] * 10, [9] * 3], [([1, 2], [[3], [4]])], budget=512, block=16)
    lengths = [s.length for s in by_content]
    assert lengths == [22, 102, 12, 5]  # content + the prompt's 2 tokens (one-token options read at the last)
    shape = Shapes(budget=128, block=16)
    # 22 at 0; next start 32: 102 does not fit (32 + 102 > 128); 12 at 32; 5 at 48
    assert fill(by_content, shape) == [0, 2, 3]
    used = assemble([by_content[i] for i in (0, 2, 3)], shape).spans
    assert used == ((0, 22), (32, 44), (48, 53))
    assert fill(by_content, Shapes(budget=128, block=16, reads=2)) == [0]  # two reads per segment
    assert not admits(by_content[1], Shapes(budget=64, block=16))
    assert round_up(23, 16) == 32 and round_up(32, 16) == 32


def test_a_trimmed_pass_launches_only_the_blocks_it_uses() -> None:
    segments = segments_of([[9] * 20, [9] * 10, [9] * 3], [([1, 2], [[3], [4]])], budget=512, block=16)
    trimmed = assemble(segments[:2], Shapes(budget=128, block=16, trim=True))
    full = assemble(segments[:2], Shapes(budget=128, block=16))
    assert trimmed.budget == 48 and full.budget == 128  # 22 rows, then 12 at 32 -> 44 -> 48
    assert trimmed.tokens == full.tokens[:48] and trimmed.ends == full.ends[:48] and trimmed.reads == full.reads
