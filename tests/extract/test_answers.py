"""Extraction answers without a model: every string the number and amount grammars accept parses to its value,
and a content's extraction entries become the response's answers (p and floor_p normalised over the answers
returned, coverage the mass they hold) or a generation's text."""

from __future__ import annotations

import math
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from spinfc.ir.decode_plan import CURRENCY, NUMBER, slot_regex, terminator
from spinfc.ir.nodes import GenerateSlot, NumberSlot, Program, Question, TextSlot
from spinfc.runtime.deliver.results import query_results
from spinfc.runtime.extract.answers import Answer, Generated, Searched, make_answer


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
    assert answer.currency is None or re.fullmatch(r"[A-Z]{3}", answer.currency)
    assert isinstance(answer.value, (int, float))


NATURAL = {"$1,250": ("USD", 1250), "€1,250": ("EUR", 1250), "1,250 euros": ("EUR", 1250),
           "USD 1,250": ("USD", 1250), "1.250,00 €": ("EUR", 1250), "EUR 1,250": ("EUR", 1250),
           " 1250": (None, 1250), "£12.50": ("GBP", 12.5), "12,50 €": ("EUR", 12.5), "-$5": ("USD", -5),
           "1.250.000 Euro": ("EUR", 1250000), "1,250.50 dollars": ("USD", 1250.5), "1.25 EUR": ("EUR", 1.25)}


def test_natural_amounts_are_accepted_and_read_as_a_value_and_a_currency_code() -> None:
    from spinfc.ir.nodes import AmountSlot
    from spinfc.runtime.extract.amounts import parse_amount

    for text, want in NATURAL.items():
        assert re.fullmatch(slot_regex("amount", ""), text), text
        assert parse_amount(text) == want, text
        assert make_answer(AmountSlot(), text, (), -1.0, -1.0).currency == want[0]


def test_answers_with_the_same_value_and_currency_are_one_answer() -> None:
    from spinfc.runtime.extract.answers import merged

    found = (Answer("1,250", (1,), math.log(0.2), math.log(0.1), value=1250),
             Answer("$1,250", (2,), math.log(0.15), math.log(0.3), value=1250, currency="USD"),
             Answer("1250", (3,), math.log(0.1), math.log(0.05), value=1250),
             Answer("1,250 USD", (4,), math.log(0.3), math.log(0.1), value=1250.0, currency="USD"),
             Answer("1,250 USD", (5,), math.log(0.05), math.log(0.01), value=1250, currency="USD"))
    answers = merged(found)
    assert [(a.text, a.currency) for a in answers] == [("1,250 USD", "USD"), ("1,250", None)]
    assert [a.forms for a in answers] == [("1,250 USD", "$1,250"), ("1,250", "1250")]
    assert math.isclose(math.exp(answers[0].logprob), 0.5) and math.isclose(math.exp(answers[1].logprob), 0.3)
    assert math.isclose(math.exp(answers[0].floor_logprob), 0.41)
    assert math.isclose(Searched(answers).coverage, Searched(found).coverage)
    texts = (Answer("May", (1,), -1.0, -1.0), Answer("May", (2,), -2.0, -2.0))
    assert merged(texts) == texts  # text answers have no value to merge on


def test_an_empty_search_says_why() -> None:
    questions = (Question("amount", (), "Amount:", TextSlot(stop='"'), (1,)),)
    program = attrs_queries(Program(model="m", contents=(), queries=(), questions=questions))
    (result,) = query_results(program, (Searched((), reason="no answer finished"),), (None,))
    (combination,) = result.combinations
    assert combination.answers == [] and combination.coverage == 0 and combination.reason == "no answer finished"


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
