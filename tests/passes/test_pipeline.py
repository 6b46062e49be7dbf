"""The ordered, named pipeline: `run` stops where asked and verifies after every pass."""

from __future__ import annotations

import pytest

from spinfc.ir import IRVerifyError
from spinfc.ir.nodes import Content, Program
from spinfc.passes import PIPELINE, run

from spinfc.passes import PassContext
from spinfc.registry import load_tokenizer
from spinfc.shapes import Shapes

from .programs import option_query

CTX = PassContext(tokenizer=load_tokenizer("gemma3-270m"), shapes=Shapes(256, 16))


def program() -> Program:
    return Program("gemma3-270m", (Content("m", "Charged twice."),),
                   (option_query("refund", "\n\nRefund? Answer:", [" yes", " no"]),), budget=256, block=16)


def test_pipeline_order():
    assert [name for name, _ in PIPELINE] == [
        "expand-placeholders", "add-floor", "read-media", "tokenize", "dedupe-prefixes", "segment", "plan-packing",
        "layout",
    ]


@pytest.mark.parametrize("until, filled", [
    ("expand-placeholders", "questions"), ("add-floor", "questions"), ("tokenize", "questions"),
    ("dedupe-prefixes", "trie"), ("segment", "segments"), ("plan-packing", "plan"), ("layout", "layouts"),
])
def test_run_stops_after_the_named_pass(until, filled):
    out = run(program(), CTX, until=until, verify=True)
    order = ["questions", "trie", "segments", "plan", "layouts"]
    for field in order[order.index(filled) + 1:]:
        assert getattr(out, field) is None
    assert getattr(out, filled)
    assert (len(out.contents) == 2) == (until != "expand-placeholders")
    assert any(q.tokens for q in out.questions) == (order.index(filled) > 0 or until == "tokenize")


def test_run_everything_is_the_same_as_each_step():
    assert run(program(), CTX) == run(program(), CTX, until="layout", verify=True)


def test_unknown_pass_name():
    with pytest.raises(ValueError, match="unknown pass 'tokenise'"):
        run(program(), CTX, until="tokenise")


def test_verify_names_the_pass_after_which_the_program_broke():
    bad = program()
    bad = Program(bad.model, bad.contents, bad.queries + bad.queries, budget=256, block=16)  # duplicated query id
    with pytest.raises(IRVerifyError, match="after pass 'expand-placeholders'") as caught:
        run(bad, CTX, verify=True)
    assert any("query id 'refund' is used 2 times" in p for p in caught.value.problems)
