"""Extraction on the packaged models (Gemma 3 270M, SmolLM2-135M, float32 on the CPU) against transformers on the
same GGUF weights: every answer's logprob (and its floor logprob) is transformers' logprob of the same continuation;
the first text and (`free`) number answers are what transformers' own beam search (same width, same grammar,
answers ranked by their logprob) ranks first; <gen> is transformers' greedy decode; number answers parse."""

from __future__ import annotations

import asyncio

import pytest
import torch

from spinfc.ir.nodes import GenerateSlot, NumberSlot, TextSlot
from spinfc.runtime.engine import Engine
from spinfc.runtime.extract.answers import Generated, Searched
from spinfc.runtime.extract.grammars import Vocabulary, slot_regex, terminator
from spinfc.shapes import Shapes

pytestmark = pytest.mark.slow
TOLERANCE = 1e-4
WIDTH = 3
CONTENTS = (
    "Customer support message:\nI was charged twice for September, please refund one of the charges.",
    "Delivery note:\nThe parcel from Berlin arrived on Tuesday with 3 broken cups.",
)
QUERIES = [
    {"id": "what", "template": "\n\nQ: Which word names a month, a city or a weekday?\nA: \"{*}\"", "beam_width": WIDTH,
     "max_tokens": 8},
    {"id": "count", "template": "\n\nQ: How many items are mentioned?\nA: <n>\n", "beam_width": WIDTH,
     "max_tokens": 6, "free": True},  # the search alone (not only the numbers the content writes): transformers' beams
    {"id": "gen", "template": "\n\nQ: Say it in a few words.\nA:<gen>", "max_tokens": 6},
]


@pytest.fixture(scope="module", params=["smollm2-135m", "gemma3-270m"])
def pair(request, packaged_model, reference_model):
    return packaged_model(request.param), reference_model(request.param)


@pytest.fixture(scope="module")
def scored(pair):
    ours, _ = pair
    body = {"inputs": [{"messages": [{"role": "user", "content": t}]} for t in CONTENTS],
            "scoring": {"queries": QUERIES}}

    async def go():
        engine = Engine(ours, Shapes.for_device("cpu", 512)).start()
        try:
            compiled = engine.compile(body)
            return await engine.score(compiled)
        finally:
            engine.close()

    return asyncio.run(go())


@torch.inference_mode()
def hf_logprob(model, prefix, continuation) -> float:
    ids = torch.tensor([list(prefix) + list(continuation)])
    logprobs = torch.log_softmax(model(input_ids=ids).logits[0].float(), dim=-1)
    return sum(float(logprobs[len(prefix) - 1 + k, t]) for k, t in enumerate(continuation))


def _entries(scored):
    program, compiled = scored.compiled.program, scored.compiled
    for c in compiled.inputs:
        for q, question in enumerate(program.questions):
            yield program.contents[c], program.contents[compiled.floor], question, scored.scores[c][q]


def test_every_answer_logprob_is_transformers(pair, scored):
    _, theirs = pair
    checked = 0
    for content, floor, question, entry in _entries(scored):
        prefix = content.tokens + question.tokens
        if isinstance(entry, Searched):
            assert entry.answers, f"no answer for {question.query_id}"
            for answer in entry.answers:
                assert abs(answer.logprob - hf_logprob(theirs, prefix, answer.tokens)) < TOLERANCE
                floor_prefix = floor.tokens + question.tokens
                assert abs(answer.floor_logprob - hf_logprob(theirs, floor_prefix, answer.tokens)) < TOLERANCE
                checked += 1
        if isinstance(entry, Generated):
            assert abs(entry.logprob - hf_logprob(theirs, prefix, entry.tokens)) < TOLERANCE
            checked += 1
    assert checked >= 2 * (2 * 1 + 1)


def test_number_answers_parse(scored):
    for _, _, question, entry in _entries(scored):
        if isinstance(question.slot, NumberSlot):
            assert all(isinstance(a.value, (int, float)) for a in entry.answers)
            assert all(float(a.text.strip().replace(",", "")) == a.value for a in entry.answers)


def test_gen_is_transformers_greedy(pair, scored):
    _, theirs = pair
    for content, _, question, entry in _entries(scored):
        if isinstance(question.slot, GenerateSlot):
            prefix = torch.tensor([list(content.tokens + question.tokens)])
            out = theirs.generate(prefix, do_sample=False, max_new_tokens=question.slot.max_tokens,
                                  attention_mask=torch.ones_like(prefix), pad_token_id=0)
            assert list(entry.tokens) == out[0, prefix.shape[1]:].tolist()[: len(entry.tokens)]


class _Grammar:
    """A transformers logits processor allowing what the slot's grammar allows after each beam's tokens, and the
    tokens that hold the terminator after text the grammar accepts (they end the answer)."""

    def __init__(self, grammars, regex: str, prompt_length: int, end: str, ending):
        self.grammars, self.regex, self.prompt_length, self.end = grammars, regex, prompt_length, end
        self.ending_mask, self.ending_texts = ending

    def __call__(self, input_ids, scores):
        for row in range(input_ids.shape[0]):
            matcher = self.grammars.matcher(self.regex)
            for token in input_ids[row, self.prompt_length:].tolist():
                assert matcher.accept_token(token)
            mask = self.grammars.masks([matcher]) | self.ending_mask[None, :]
            self.grammars.apply(scores[row:row + 1], mask)
            for token, text in self.ending_texts.items():
                if self.grammars.ends_with(matcher, text[: text.index(self.end) + len(self.end)]) is None:
                    scores[row, token] = -float("inf")
        return scores


def test_first_answer_is_transformers_beam_search(pair, scored):
    from transformers import LogitsProcessorList

    ours, theirs = pair
    vocabulary = Vocabulary.of(ours)
    tokenizer, grammars = vocabulary.tokenizer, vocabulary.grammars
    compared = 0
    for content, _, question, entry in _entries(scored):
        if not isinstance(question.slot, (TextSlot, NumberSlot)):
            continue
        end = terminator(question.slot.stop) or "\n"
        ending = grammars.ending_tokens(tokenizer, end)
        finishing = sorted(ending[1])
        prefix = torch.tensor([list(content.tokens + question.tokens)])
        kind = "text" if isinstance(question.slot, TextSlot) else "number"
        regex = slot_regex(kind, question.slot.stop, question.slot.lead)
        processor = _Grammar(grammars, regex, prefix.shape[1], end, ending)
        out = theirs.generate(
            prefix, attention_mask=torch.ones_like(prefix), num_beams=WIDTH, num_return_sequences=1,
            do_sample=False, length_penalty=0.0, early_stopping=False, max_new_tokens=question.slot.max_tokens,
            eos_token_id=finishing, pad_token_id=0, logits_processor=LogitsProcessorList([processor]))
        theirs_first = out[0, prefix.shape[1]:].tolist()
        theirs_first = theirs_first[: next((k + 1 for k, t in enumerate(theirs_first) if t in ending[1]),
                                           len(theirs_first))]
        assert entry.answers, (question.query_id, "no answer")
        assert list(entry.answers[0].tokens) == theirs_first, (question.query_id, entry.answers[0].text)
        compared += 1
    assert compared == 4
