"""Programs built directly, already tokenized (no tokenizer), for the pass, layout and verifier tests."""

from __future__ import annotations

import attrs
from hypothesis import strategies as st

from spinfc.passes import PassContext, dedupe_prefixes, layout, plan_packing, segment
from spinfc.shapes import Shapes
from spinfc.ir.nodes import (
    Content, Option, OptionSlot, Program, Query, Question, SlotRef, SourceLoc, Template, Text, TextSlot,
)

LOC = SourceLoc("<test>")


def option_query(qid: str, prompt: str, options: list[str], after: str = "", placeholders=()) -> Query:
    parts = (Text(prompt), SlotRef("options", LOC)) + ((Text(after),) if after else ())
    template = Template(prompt + "<?>" + after, parts, LOC)
    return Query(qid, template, OptionSlot(tuple(Option(o) for o in options)), tuple(placeholders))


def text_query(qid: str, prompt: str, after: str = "") -> Query:
    parts = (Text(prompt), SlotRef("text", LOC)) + ((Text(after),) if after else ())
    return Query(qid, Template(prompt + "<*>" + after, parts, LOC), TextSlot())


def tokenized(contents: list[list[int]], questions: list[tuple[list[int], list[list[int]] | None]],
              budget: int = 256, block: int = 16, pad: int = 0) -> Program:
    """A program as tokenize leaves it: `questions` are (prompt tokens, options' tokens), None for a text slot.
    The last content is the floor when `contents` has more than one."""
    queries, qs = [], []
    for i, (prompt, options) in enumerate(questions):
        if options is None:
            query = text_query(f"q{i}", f"prompt {i}")
            slot = query.slot
        else:
            query = option_query(f"q{i}", f"prompt {i}", [f"o{j}" for j in range(len(options))])
            slot = OptionSlot(tuple(Option(f"o{j}", tuple(o)) for j, o in enumerate(options)))
        queries.append(query)
        qs.append(Question(query.id, (), f"prompt {i}", slot, tuple(prompt)))
    cs = tuple(
        Content(f"c{i}", "" if floor else f"content {i}", is_floor=floor, tokens=tuple(tokens))
        for i, tokens in enumerate(contents)
        for floor in [len(contents) > 1 and i == len(contents) - 1]
    )
    return Program("test", cs, tuple(queries), tuple(qs), budget=budget, block=block, pad=pad)


# ---- hypothesis: random question sets and contents, over a tiny alphabet so that prefixes are shared -------------

_token = st.integers(1, 4)
_options = st.lists(st.lists(_token, min_size=1, max_size=3).map(tuple), min_size=1, max_size=4, unique=True)
_question = st.tuples(st.lists(_token, min_size=1, max_size=5), st.one_of(st.none(), _options, _options, _options))


@st.composite
def random_programs(draw) -> Program:
    questions = draw(st.lists(_question, min_size=1, max_size=6))
    questions = [(prompt, None if options is None else [list(o) for o in options]) for prompt, options in questions]
    contents = draw(st.lists(st.lists(st.integers(5, 60), max_size=12), min_size=1, max_size=5))
    block = draw(st.sampled_from([1, 2, 4, 8, 16]))
    program = tokenized(contents, questions, block=block)
    tree = sum(len(p) + (sum(len(o) - 1 for o in opts) if opts else 0) for p, opts in questions)  # >= trie size
    longest = -(-(max(len(c) for c in contents) + tree) // block) * block
    budget = longest + block * draw(st.integers(0, 4))
    return attrs.evolve(program, budget=budget)


def ctx_of(program: Program, tokenizer=None) -> PassContext:
    """The pass context for `program`'s own budget and block (and a tokenizer, for programs not yet tokenized)."""
    return PassContext(tokenizer=tokenizer, shapes=Shapes(program.budget, program.block))


def segmented(program: Program) -> Program:
    """A tokenized program through dedupe-prefixes and segment."""
    return segment(dedupe_prefixes(program), ctx_of(program))


def planned(program: Program) -> Program:
    """... and plan-packing."""
    return plan_packing(segmented(program), ctx_of(program))


def laid_out(program: Program) -> Program:
    """... and layout: every pass after tokenize."""
    return layout(planned(program), ctx_of(program))
