"""Extraction answers without a model: every string the number and amount grammars accept parses to its value,
and a content's extraction entries become the response's answers (p and floor_p normalised over the answers
returned, coverage the mass they hold) or a generation's text."""

from __future__ import annotations

import math
import re

from hypothesis import given, settings, strategies as st

from spinfc.ir.nodes import GenerateSlot, NumberSlot, Program, Question, TextSlot
from spinfc.passes.decode_plan import CURRENCY, NUMBER, slot_regex, terminator
from spinfc.runtime.extract.answers import Answer, Generated, Searched, make_answer
from spinfc.runtime.results import query_results


@settings(max_examples=200, deadline=None)
@given(st.from_regex(re.compile(slot_regex("number", '"')), fullmatch=True))
def test_every_number_the_grammar_accepts_parses(text: str) -> None:
    answer = make_answer(NumberSlot(stop='"'), text[:-1], (), -1.0, -1.0)
    cleaned = text[:-1].strip().replace(",", "")
    assert answer.value == (float(cleaned) if "." in cleaned else int(cleaned))
    assert isinstance(answer.value, float) == ("." in text)


@settings(max_examples=200, deadline=None)
@given(st.from_regex(re.compile(slot_regex("amount", "\n") + r"\Z"), fullmatch=True))
def test_every_amount_the_grammar_accepts_parses(text: str) -> None:
    from spinfc.ir.nodes import AmountSlot

    body = text.rstrip("\n")
    answer = make_answer(AmountSlot(stop="\n"), body, (), -1.0, -1.0)
    assert re.fullmatch(CURRENCY, answer.currency)
    digits = re.search(NUMBER, body.lstrip(" -$€£¥₹₩")).group(0)
    cleaned = digits.replace(",", "")
    assert abs(answer.value) == abs(float(cleaned) if "." in cleaned else int(cleaned))


def test_the_terminator_is_the_first_character_after_the_slot() -> None:
    assert terminator('"') == '"' and terminator('" (a month)') == '"' and terminator("") == ""
    assert re.fullmatch(slot_regex("text", ""), "September\n") and re.fullmatch(slot_regex("text", ""), "Sept")
    assert not re.fullmatch(slot_regex("text", '"'), 'Sep"t"') and not re.fullmatch(slot_regex("text", '"'), '"')


def test_entries_become_answers_and_generations() -> None:
    questions = (Question("month", (), "Which month?", TextSlot(stop='"'), (1,)),
                 Question("say", (), "Say:", GenerateSlot(), (2,)))
    program = Program(model="m", contents=(), queries=(), questions=questions)
    program = attrs_queries(program)
    searched = Searched((Answer("September", (5, 6), math.log(0.3), math.log(0.1)),
                         Answer("Sept", (7, 6), math.log(0.1), math.log(0.3))))
    generated = Generated("a refund", (8, 9), -2.5, "length")
    month, say = query_results(program, (searched, generated), (None, None))
    (combination,) = month.combinations
    assert combination.options is None and combination.coverage == 0.4
    assert [a.text for a in combination.answers] == ["September", "Sept"]
    assert [round(a.p, 6) for a in combination.answers] == [0.75, 0.25]
    assert [round(a.floor_p, 6) for a in combination.answers] == [0.25, 0.75]
    (text,) = say.combinations
    assert (text.text, text.logprob, text.finish_reason, text.answers) == ("a refund", -2.5, "length", None)


def attrs_queries(program: Program) -> Program:
    """The program with one query per question id (query_results reports queries in order)."""
    import attrs

    from spinfc.ir.nodes import Query, SlotRef, SourceLoc, Template, Text

    loc = SourceLoc("<test>")
    queries = tuple(Query(q.query_id, Template(q.prompt, (Text(q.prompt), SlotRef("text", loc)), loc), q.slot)
                    for q in program.questions)
    return attrs.evolve(program, queries=queries)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(["text", "number", "amount"]), st.sampled_from(['"', "\n", ")"]), st.data())
def test_a_terminated_answer_is_complete_only_at_its_terminator(kind: str, stop: str, data) -> None:
    """What the search relies on to skip a mask per candidate (beams.Search, `terminated`): with a terminator, a
    whole answer ends with it and holds it nowhere else, so only a token holding the terminator (an ending token,
    checked on its own path) can complete the grammar."""
    text = data.draw(st.from_regex(re.compile(slot_regex(kind, stop)), fullmatch=True))
    assert text.endswith(stop) and stop not in text[:-1]
