"""`<$>` amounts with the currency before the number (issue 38, item 1): `$30`, `US$30`, `USD 45`, `€1,250`,
`EUR 1.250,00`, `£7.50`, `¥300`, and after it (`30 USD`, `1,250 euros`).

A leading currency never came back because the template's `A: <$>` ended the prompt with a lone space token, after
which a model almost never writes `$` (it writes ` $` as one token after `A:`); the spaces before a searched slot
are now the slot's `lead`, the start of every answer. Checked on both packaged models: the prompt and the grammar
with each tokenizer (every form, as the model's own tokens), and the answers through the engine."""

from __future__ import annotations

import asyncio

import pytest
import torch

from spinfc.runtime.admit.chat_format import end_tokens
from spinfc.runtime.extract.amounts import parse_amount
from spinfc.runtime.extract.grammars import grammars_for, slot_regex

QUESTION = "\n\nQ: How much money?\nA: <$>"
# content, the form the top answer must have (value, currency)
FORMS = [
    ("The repair cost $30 and took two days.", "$30", (30, "USD")),
    ("It cost US$30 in the end.", "US$30", (30, "USD")),
    ("The fee is USD 45.", "USD 45", (45, "USD")),
    ("The ticket was €1,250.", "€1,250", (1250, "EUR")),
    ("Price: EUR 1.250,00 incl. VAT.", "EUR 1.250,00", (1250, "EUR")),
    ("The sandwich was £7.50.", "£7.50", (7.5, "GBP")),
    ("Price: ¥300 per bowl.", "¥300", (300, "JPY")),
    ("The fee is 30 USD.", "30 USD", (30, "USD")),
    ("We paid 1,250 euros.", "1,250 euros", (1250, "EUR")),
]
# what SmolLM2-135M ranks first (measured, docs/api.md): for the other forms its own probability is higher for a
# bare number (" 200\n" -6.38 against " $30\n" -7.51 for the first), which no search changes
SMOLLM2_TOP = {"USD 45": "\n\nQ: How much money, with its currency?\nA: <$>", "EUR 1.250,00": QUESTION,
               "30 USD": QUESTION}
MODELS = ["gemma3-270m", "smollm2-135m"]


def _body(content: str, template: str = QUESTION) -> dict:
    return {"inputs": [{"messages": [{"role": "user", "content": content}]}],
            "scoring": {"queries": [{"id": "amount", "template": template}]}}


@pytest.fixture(scope="module", params=MODELS)
def model(request):
    from spinfc.runtime.load.loader import load_model

    return load_model(request.param, dtype=torch.float32, device="cpu")


def test_the_spaces_before_the_slot_begin_every_answer(model) -> None:
    """The prompt ends at `A:` (no lone space token), and the space is the slot's lead."""
    from spinfc.runtime.engine import Engine
    from spinfc.shapes import Shapes

    engine = Engine(model, Shapes.for_device("cpu", 512))
    (question,) = engine.compile(_body("The fee is $30.")).program.questions
    assert question.prompt.endswith("A:") and question.slot.lead == " "
    assert model.tokenizer.decode(list(question.tokens[-1:])) == ":"


@pytest.mark.parametrize("form", [f for _, f, _ in FORMS] + ["$1,250.00", "1.250,00 €", "30 dollars", "C$12"])
def test_every_form_is_the_model_own_tokens_under_the_grammar(model, form) -> None:
    """Each form, tokenized as the model writes it after `A:` (with its space), is accepted token by token by the
    slot's grammar, ends there, and reads as its value and currency."""
    tokenizer = model.tokenizer
    grammars = grammars_for(tokenizer, model.config.vocab, end_tokens(tokenizer))
    matcher = grammars.matcher(slot_regex("amount", "", " "))
    tokens = tokenizer(" " + form + "\n", add_special_tokens=False).input_ids
    assert all(matcher.accept_token(t) for t in tokens), (form, tokenizer.convert_ids_to_tokens(tokens))
    assert matcher.is_completed()
    assert parse_amount(form)[0] is not None


def _top_answers(model, bodies: list[dict]) -> list:
    from spinfc.runtime.engine import Engine
    from spinfc.shapes import Shapes

    async def go():
        engine = Engine(model, Shapes.for_device("cpu", 512)).start()
        try:
            out = []
            for body in bodies:
                scored = await engine.score(engine.compile(body))
                out.append(scored.scores[scored.compiled.inputs[0]][0])
            return out
        finally:
            engine.close()

    return asyncio.run(go())


@pytest.mark.slow
def test_each_form_is_the_top_answer_with_its_currency(model) -> None:
    """The reproductions through the engine: the top answer is the amount with its currency, and one value
    written two ways (`$30` and `US$30`) is one answer."""
    if model.name == "gemma3-270m":
        cases = [(_body(content), form, want) for content, form, want in FORMS]
    else:
        cases = [(_body(content, SMOLLM2_TOP[form]), form, want) for content, form, want in FORMS
                 if form in SMOLLM2_TOP]
        cases.append((_body("Total: $1,250.00"), "$1,250.00", (1250, "USD")))
    results = _top_answers(model, [body for body, _, _ in cases])
    for (_, form, want), searched in zip(cases, results):
        answers = searched.answers
        assert answers, (form, searched.reason)
        top = answers[0]
        assert (top.value, top.currency) == want, (form, [(a.text, a.logprob) for a in answers])
        keys = [(a.value, a.currency) for a in answers]
        assert len(keys) == len(set(keys)), (form, answers)
