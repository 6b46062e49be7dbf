"""A decision model's code distribution through the real engine (compile, pack, run, results) against transformers'
`AutoModelForSequenceClassification` softmax on the same random weights (255 labels) and the same prefix: the
content and the question's text up to its slot, for every family spinfc serves a decision head of."""

from __future__ import annotations

import asyncio
import math

import pytest
import torch

from spinfc.runtime.deliver.results import query_results
from spinfc.runtime.engine import Engine
from spinfc.runtime.load.loader import load_model
from spinfc.shapes import Shapes

from .random_decider import FAMILIES, labels

pytestmark = pytest.mark.slow  # a packaged tokenizer, four random models saved and loaded

TOLERANCE = 1e-4
TEXTS = ("Customer support message:\nI was charged twice for September, please refund one of the charges.",
         "The app crashes every time I open the settings page.")
SUBSET = ["L3", "code_004", "code_200", "L252"]
BODY = {
    "inputs": [{"messages": [{"role": "user", "content": text}]} for text in TEXTS],
    "scoring": {"queries": [
        {"id": "route", "template": "\n\nWhich queue should take this message?\nCode:<?>", "codes": "all"},
        {"id": "some", "template": "\n\nWhich of these fits best?<?>", "codes": SUBSET},
        {"id": "aspect", "template": "\n\nHow does it read on {aspect}?<?>", "codes": "all",
         "placeholders": {"aspect": ["tone", "urgency"]}},
    ]},
}


@pytest.fixture(scope="module", params=FAMILIES)
def pair(request, tmp_path_factory):
    from transformers import AutoModelForSequenceClassification

    from .random_decider import random_decider

    directory = tmp_path_factory.mktemp(f"decider-{request.param}")
    random_decider(request.param, directory)
    theirs = AutoModelForSequenceClassification.from_pretrained(directory, dtype=torch.float32,
                                                                attn_implementation="eager").eval()
    return load_model(str(directory), dtype=torch.float32), theirs


def _scored(model):
    engine = Engine(model, Shapes.for_device("cpu", 1024)).start()
    try:
        compiled = engine.compile(BODY)
        return asyncio.run(engine.score(compiled))
    finally:
        engine.close()


def _softmax(theirs, tokens) -> list[float]:
    with torch.no_grad():
        logits = theirs(input_ids=torch.tensor([tokens])).logits[0].float()  # pooled at the last token
    return torch.softmax(logits, -1).tolist()


def test_the_code_distribution_is_transformers_softmax(pair):
    ours, theirs = pair
    assert type(theirs).__name__.endswith("ForSequenceClassification") and theirs.config.num_labels == 255
    scored = _scored(ours)
    program = scored.compiled.program
    floor = program.contents[scored.compiled.floor]
    codes = list(labels().values())
    worst = 0.0
    for index in scored.compiled.inputs:
        content = program.contents[index]
        results = {r.id: r for r in query_results(program, scored.scores[index], scored.scores[scored.compiled.floor])}
        for question in program.questions:
            combination = next(c for c in results[question.query_id].combinations
                               if tuple(c.values.items()) == question.values)
            want = _softmax(theirs, content.tokens + question.tokens)
            want_floor = _softmax(theirs, floor.tokens + question.tokens)
            texts = [o.text for o in combination.options]
            asked = codes if question.query_id != "some" else SUBSET
            assert texts == asked
            rows = [codes.index(code) for code in asked]
            total, floor_total = sum(want[r] for r in rows), sum(want_floor[r] for r in rows)
            for option, row in zip(combination.options, rows):
                worst = max(worst, abs(math.exp(option.logprob) - want[row]), abs(option.p - want[row] / total),
                            abs(option.floor_p - want_floor[row] / floor_total))
            assert abs(combination.residual - (1 - total)) < TOLERANCE
    print(f"{ours.family}: max |p - transformers softmax| = {worst:.2e}")
    assert worst < TOLERANCE
