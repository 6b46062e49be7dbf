"""`<$>` and `<n>` answer among what the content writes (issue 47 item 5), on held-out contents (none of them in
test_amount_forms.py) through the engine on SmolLM2-135M: before, "Pay USD 45 now." came back with `100`, `1000`
and `10.00` beside `USD 45`, "Refund of £12.99 issued on 3 May." with `12` first, and "Nothing is owed." with `100`.
Now every answer is a value the content writes, ranked by the model; a content that writes none has no answer and a
reason naming `free`; `free: true` is the search alone, any value the model answers."""

from __future__ import annotations

import asyncio

import pytest

from spinfc.runtime.engine import Engine
from spinfc.shapes import Shapes

pytestmark = pytest.mark.slow

AMOUNT = "\n\nQ: How much money?\nA: <$>"
NUMBER = "\n\nQ: What number is given?\nA: <n>"
# content, template, the values the content writes (value, currency or None), the top answer's text
CASES = [
    ("Pay USD 45 now.", AMOUNT, {(45, "USD")}, "USD 45"),
    ("Invoice 2231: $1,250 due.", AMOUNT, {(1250, "USD")}, "$1,250"),
    ("The bill came to 80 euros for two nights.", AMOUNT, {(80, "EUR")}, "80 euros"),
    ("Invoice 2231 is due on Friday.", AMOUNT, {(2231, None)}, "2231"),  # no currency written: its number
    ("Refund of £12.99 issued on 3 May.", NUMBER, {(12.99, None), (3, None)}, None),
    ("It took two days and 5 calls.", NUMBER, {(2, None), (5, None)}, None),
]
NOTHING = "Nothing is owed."


def _score(model, queries: list[dict], contents: list[str]) -> list[list]:
    """Each content's entries, one per query, from one request."""
    body = {"inputs": [{"messages": [{"role": "user", "content": c}]} for c in contents],
            "scoring": {"queries": queries}}

    async def go():
        engine = Engine(model, Shapes.for_device("cpu", 2048)).start()
        try:
            scored = await engine.score(engine.compile(body))
            return [scored.scores[c] for c in scored.compiled.inputs]
        finally:
            engine.close()

    return asyncio.run(go())


@pytest.fixture(scope="module")
def entries(packaged_model):
    """Every case with both queries, the content that writes nothing, and the first case again with `free`."""
    queries = [{"id": "amount", "template": AMOUNT}, {"id": "number", "template": NUMBER},
               {"id": "free", "template": AMOUNT, "free": True}]
    return _score(packaged_model("smollm2-135m"), queries, [c for c, *_ in CASES] + [NOTHING])


@pytest.mark.parametrize("case", range(len(CASES)), ids=[c for c, *_ in CASES])
def test_every_answer_is_a_value_the_content_writes(entries, case) -> None:
    _, template, written, top = CASES[case]
    searched = entries[case][0 if template == AMOUNT else 1]
    answers = [(a.text, a.value, a.currency) for a in searched.answers]
    assert answers, searched.reason
    assert all(any(v == value and c in (None, currency) for value, currency in written) for _, v, c in answers), \
        answers
    if top is not None:
        assert answers[0][0] == top, answers


def test_a_content_that_writes_no_amount_has_no_answer_and_says_free(entries) -> None:
    for searched in entries[-1][:2]:
        assert searched.answers == () and "set `free` true" in searched.reason


def test_free_answers_what_the_model_finds_beside_what_is_written(entries) -> None:
    """`free`: the search's own answers too (here values the content does not write), and the written amount
    still read and ranked among them."""
    free, kept = entries[0][2], entries[0][0]
    assert {(a.value, a.currency) for a in free.answers} > {(a.value, a.currency) for a in kept.answers}
    assert (45, "USD") in {(a.value, a.currency) for a in free.answers}
    assert entries[-1][2].answers  # and on a content that writes none
