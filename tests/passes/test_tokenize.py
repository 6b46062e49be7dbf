"""tokenize: piecewise, with the model's own tokenizer (the real Gemma 3 and SmolLM2 vocabularies)."""

from __future__ import annotations

import attrs
import pytest

from spinfc.errors import CompileError
from spinfc.ir import verify
from spinfc.ir.nodes import Content, Option, OptionSlot, Program
from spinfc.passes import add_floor, expand_placeholders, tokenize
from spinfc.registry import load_tokenizer

from spinfc.passes import PassContext

from .programs import option_query, text_query


def tokenized_by_model(program: Program) -> Program:
    """tokenize with the program's model's own tokenizer."""
    return tokenize(program, PassContext(tokenizer=load_tokenizer(program.model)))


def program(model: str, before: str = "Message:\n", after: str = "") -> Program:
    queries = (option_query("refund", "\n\nRefund?\nAnswer:", [" yes", " no", " not sure"]),
               text_query("month", '\n\nMonth: "', after='"'))
    p = Program(model, (Content("m", "Charged twice in September."),), queries, present_before=before,
                present_after=after)
    return add_floor(expand_placeholders(p))


def test_gemma_contents_get_bos_and_questions_and_options_none():
    tokenizer = load_tokenizer("gemma3-270m")
    out = verify(tokenized_by_model(program("gemma3-270m", after="\n--")))
    content, floor = out.contents
    assert content.tokens == tuple(tokenizer("Message:\nCharged twice in September.\n--").input_ids)
    assert content.tokens[0] == tokenizer.bos_token_id
    assert floor.tokens == tuple(tokenizer("Message:\n\n--").input_ids)
    refund = out.questions[0]
    assert refund.tokens == tuple(tokenizer("\n\nRefund?\nAnswer:", add_special_tokens=False).input_ids)
    assert tokenizer.bos_token_id not in refund.tokens
    assert [o.tokens for o in refund.slot.options] == [
        tuple(tokenizer(t, add_special_tokens=False).input_ids) for t in (" yes", " no", " not sure")
    ]
    assert len(refund.slot.options[2].tokens) == 2
    assert out.pad == tokenizer.pad_token_id
    assert dict(out.stats) == {
        "contents": 2, "content_tokens": len(content.tokens) + len(floor.tokens), "questions": 2,
        "prompt_tokens": sum(len(q.tokens) for q in out.questions), "option_tokens": 4,
    }


def test_smollm2_adds_no_bos_so_an_unpresented_floor_is_empty():
    out = verify(tokenized_by_model(program("smollm2-135m", before="", after="")))
    assert out.contents[1].is_floor and out.contents[1].tokens == ()
    assert out.contents[0].tokens == tuple(load_tokenizer("smollm2-135m")("Charged twice in September.").input_ids)


def test_a_question_with_nothing_before_its_slot_is_an_error():
    p = program("gemma3-270m")
    p = attrs.evolve(p, questions=(attrs.evolve(p.questions[0], prompt=""),))
    with pytest.raises(CompileError, match="no text before its slot") as caught:
        tokenized_by_model(p)
    assert caught.value.code == "empty_prompt" and str(caught.value).startswith("<test>:1:1: error:")


def test_an_option_without_tokens_is_an_error():
    p = program("gemma3-270m")
    question = attrs.evolve(p.questions[0], slot=OptionSlot((Option(" yes"), Option(""))))
    with pytest.raises(CompileError, match="encodes to no tokens"):
        tokenized_by_model(attrs.evolve(p, questions=(question,)))
