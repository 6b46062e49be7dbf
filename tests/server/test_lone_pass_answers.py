"""A content longer than the token budget runs alone in a pass of its own length on the CPU (up to Shapes.largest,
16,384 rows), and what it answers there is what the same request answers where the budget holds it in an ordinary
pass (issue: "What a new user hits in the first hour", the limits that must be met): an extraction question (`<*>`,
decoded from the lone pass's keys and values) and a /v1/completions prompt scored token by token (echo, logprobs).

Two servers of the packaged smollm2-135m: the CPU default budget (2,048 rows) and one of 4,096, where a 2,100-token
content fits a pass beside its question. The lone pass and the ordinary one differ in which rows share a launch, so
the CPU reference's sums may differ in the last digits: numbers within CROSS_CPU_TOLERANCE, texts and tokens equal."""

from __future__ import annotations

import pytest
from litestar.testing import TestClient

from spinfc.config import EngineSettings, Settings
from spinfc.passes.tokenize import encode_text
from spinfc.runtime.parity import CROSS_CPU_TOLERANCE
from spinfc.server.app import create_app

from packaged import load_shared

from .live import wait_ready

pytestmark = pytest.mark.slow  # two engines, and passes of ~2,100 rows (each ~5-15 s on 2 shared cores)

MODEL = "smollm2-135m"
BUDGET = 2048  # the CPU default
LONG = 2100  # content tokens: over the default budget, within the larger one with its question
EXTRACT = {"id": "month", "template": "\n\nQ: Which month was charged twice?\nA: \"<*>\""}


def served(budget: int | None):
    engine = EngineSettings(model=MODEL, device="cpu", warmup="none",
                            **({} if budget is None else {"token_budget": budget}))
    return TestClient(create_app(Settings(engine=engine), load_model=load_shared), timeout=600)


@pytest.fixture(scope="module")
def default():
    with served(None) as client:
        wait_ready(client)
        (card,) = client.get("/v1/models").json()["data"]
        assert card["limits"]["token_budget"] == BUDGET  # the default this test is about
        yield client


@pytest.fixture(scope="module")
def larger():
    with served(2 * BUDGET) as client:
        wait_ready(client)
        yield client


@pytest.fixture(scope="module")
def long_text(default) -> str:
    """A customer message of LONG tokens (as /v1/score counts a content: encoded with its BOS): the fact asked
    about first, then orders that were not charged twice."""
    tokenizer = default.app.state.service.engine.tokenizer
    size = lambda text: len(encode_text(tokenizer, text, bos=True))  # noqa: E731
    text = "I was charged twice for September. Please refund one of the charges."
    k = 0
    while size(text) < LONG - 12:
        text += f" Order {100 + k % 900} was charged once, as it should be."
        k += 1
    while size(text) < LONG:
        text += " x"
    assert size(text) == LONG
    return text


def month_answers(client, text: str) -> list[dict]:
    response = client.post("/v1/score", json={"messages": [{"role": "user", "content": text}],
                                              "scoring": {"queries": [EXTRACT]}})
    assert response.status_code == 200, response.text
    (result,) = response.json()["results"]
    return result["combinations"][0]["answers"]


def test_an_extraction_over_a_content_longer_than_the_budget_answers_as_in_an_ordinary_pass(default, larger,
                                                                                              long_text):
    lone, ordinary = month_answers(default, long_text), month_answers(larger, long_text)
    assert lone and [a["text"] for a in lone] == [a["text"] for a in ordinary]
    for got, want in zip(lone, ordinary):
        assert {k: v for k, v in got.items() if k != "text"} == pytest.approx(
            {k: v for k, v in want.items() if k != "text"}, abs=CROSS_CPU_TOLERANCE), got["text"]


def prompt_logprobs(client, text: str) -> dict:
    response = client.post("/v1/completions", json={"model": MODEL, "prompt": text, "max_tokens": 0, "echo": True,
                                                    "logprobs": 1})
    assert response.status_code == 200, response.text
    (choice,) = response.json()["choices"]
    return choice["logprobs"]


def test_a_completions_prompt_longer_than_the_budget_scores_every_token_as_in_an_ordinary_pass(default, larger,
                                                                                                 long_text):
    tokenizer = default.app.state.service.engine.tokenizer
    count = len(tokenizer(long_text)["input_ids"])  # the prompt as /v1/completions encodes it
    assert count > BUDGET
    lone, ordinary = prompt_logprobs(default, long_text), prompt_logprobs(larger, long_text)
    assert len(lone["tokens"]) == len(lone["token_logprobs"]) == count
    assert lone["token_logprobs"][0] is None and all(x < 0 for x in lone["token_logprobs"][1:])
    assert lone["tokens"] == ordinary["tokens"] and lone["text_offset"] == ordinary["text_offset"]
    assert lone["token_logprobs"][1:] == pytest.approx(ordinary["token_logprobs"][1:], abs=CROSS_CPU_TOLERANCE)
    assert [list(top) for top in lone["top_logprobs"][1:]] == [list(top) for top in ordinary["top_logprobs"][1:]]
