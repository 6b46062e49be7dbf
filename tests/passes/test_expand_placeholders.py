"""expand-placeholders: one question per combination, prompts filled, text after a slot becomes its stop."""

from __future__ import annotations

import attrs
import pytest

from spinfc.errors import CompileError
from spinfc.ir import verify
from spinfc.ir.nodes import (
    NumberSlot, OptionSlot, Placeholder, Program, Query, SlotRef, Template, Text, TextSlot,
)
from spinfc.passes import expand_placeholders
from spinfc.passes.expand_placeholders import grid_size

from .programs import LOC, option_query, text_query


def grid_query() -> Query:
    parts = (Text("Is "), Placeholder("aspect", LOC), Text(" for "), Placeholder("who", LOC), Text("?"),
             SlotRef("options", LOC))
    template = Template("Is {aspect} for {who}?<?>", parts, LOC)
    return Query("q", template, option_query("x", "", [" yes", " no"]).slot,
                 (("aspect", ("price", "quality", "speed")), ("who", ("me", "you"))))


def test_one_question_per_combination_in_grid_order():
    program = verify(expand_placeholders(Program("m", (), (grid_query(),))))
    assert [q.values for q in program.questions] == [
        (("aspect", a), ("who", w)) for a in ("price", "quality", "speed") for w in ("me", "you")
    ]
    assert [q.prompt for q in program.questions[:2]] == ["Is price for me?", "Is price for you?"]
    assert all(isinstance(q.slot, OptionSlot) and q.query_id == "q" for q in program.questions)


def test_questions_keep_query_order_and_queries_without_placeholders_give_one():
    program = verify(expand_placeholders(Program("m", (), (option_query("a", "A?", [" y"]), grid_query(),
                                                            option_query("b", "B?", [" y"])))))
    assert [q.query_id for q in program.questions] == ["a"] + ["q"] * 6 + ["b"]
    assert program.questions[0].values == () and program.questions[0].prompt == "A?"


def test_text_after_an_extraction_slot_becomes_its_stop():
    program = verify(expand_placeholders(Program("m", (), (text_query("month", 'Month: "', after='"'),))))
    (question,) = program.questions
    assert question.prompt == 'Month: "' and question.slot == TextSlot(stop='"')


def test_placeholders_after_the_slot_are_filled_into_the_stop():
    parts = (Text("Price in "), Placeholder("cur", LOC), Text(": "), SlotRef("number", LOC), Text(" "),
             Placeholder("cur", LOC))
    query = Query("price", Template("Price in {cur}: <n> {cur}", parts, LOC), NumberSlot(), (("cur", ("EUR",)),))
    (question,) = expand_placeholders(Program("m", (), (query,))).questions
    assert question.prompt == "Price in EUR:" and question.slot.stop == " EUR"
    assert question.slot.lead == " "  # the space before a searched slot begins its answers


def test_option_slot_ignores_text_after_it():
    query = option_query("a", "A?", [" y"], after=" ignored")
    (question,) = expand_placeholders(Program("m", (), (query,))).questions
    assert question.prompt == "A?" and question.slot == query.slot


def test_placeholder_without_values_is_an_error_at_its_place():
    where = LOC.__class__("pack.toml", 3, 14)
    template = Template("Is {x}?<?>", (Text("Is "), Placeholder("x", where), Text("?"), SlotRef("options", LOC)), LOC)
    query = Query("q", template, option_query("x", "", [" y"]).slot)
    with pytest.raises(CompileError, match=r"placeholder \{x\} of query 'q' has no values") as caught:
        expand_placeholders(Program("m", (), (query,)))
    assert str(caught.value).startswith("pack.toml:3:14: error:")


def test_template_without_slot_is_an_error():
    query = Query("q", Template("no slot", (Text("no slot"),), LOC), TextSlot())
    with pytest.raises(CompileError, match="has no slot"):
        expand_placeholders(Program("m", (), (query,)))


def test_a_grid_over_the_cap_is_refused_before_any_question_is_built():
    values = tuple(f"v{i}" for i in range(1001))
    huge = attrs.evolve(grid_query(), placeholders=(("aspect", values), ("who", values)))  # 1,002,001 questions
    with pytest.raises(CompileError) as caught:
        expand_placeholders(Program("m", (), (huge,)))
    assert caught.value.code == "grid_too_large" and "1,002,001" in caught.value.message
    assert grid_size(grid_query()) == 6
