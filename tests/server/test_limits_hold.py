"""The limits /v1/models reports are ones a request can meet, at default settings on the CPU default model
(issue: "What a new user hits in the first hour": a pass held 2,048 tokens while max_content_tokens said 4,096,
and a choice of 255 options, NInfer's maximum, was refused with content_too_long).

A content at exactly the reported max_content_tokens is answered (alone in a pass longer than the budget), one
token over is refused by that limit's name, and a 255-option choice answers."""

from __future__ import annotations

import pytest
from litestar.testing import TestClient

from spinfc.config import EngineSettings, Limits, Settings
from spinfc.passes.tokenize import encode_text
from spinfc.server.app import create_app

from packaged import load_shared
from .live import wait_ready

pytestmark = pytest.mark.slow  # loads the packaged model and runs passes of a few thousand rows

QUESTION = {"id": "refund", "template": "\n\nDoes the customer ask for a refund?\nAnswer:<?>",
            "options": [" yes", " no"]}


@pytest.fixture(scope="module")
def client():
    settings = Settings(engine=EngineSettings(model="gemma3-270m", device="cpu", warmup="short"))  # the defaults
    with TestClient(create_app(settings, load_model=load_shared), timeout=900) as client:
        wait_ready(client)
        yield client


@pytest.fixture(scope="module")
def limits(client) -> dict:
    (card,) = client.get("/v1/models").json()["data"]
    return card["limits"]


def text_of_tokens(client, count: int) -> str:
    """A customer message whose content (as /v1/score counts it: the text encoded with its BOS) has `count`
    tokens."""
    tokenizer = client.app.state.service.engine.tokenizer
    size = lambda text: len(encode_text(tokenizer, text, bos=True))  # noqa: E731
    text = "I was charged twice for January. Please refund one of the charges."
    sentence = " Order {} was also charged twice."
    per = size(text + sentence.format(100) * 10) - size(text + sentence.format(100) * 9)
    text += "".join(sentence.format(100 + i % 900) for i in range((count - size(text)) // per))  # 3 digits each
    while size(text) < count:
        text += " x"
    assert size(text) == count, size(text)
    return text


def test_the_card_reports_a_content_limit_one_pass_holds(limits) -> None:
    assert limits["token_budget"] == 2048 and limits["max_content_tokens"] == 4096
    assert limits["max_pass_rows"] >= limits["max_content_tokens"] + limits["max_query_tokens"]


def test_a_content_at_the_reported_limit_is_answered_and_one_token_over_is_refused_by_name(client, limits) -> None:
    most = limits["max_content_tokens"]
    text = text_of_tokens(client, most)
    response = client.post("/v1/score", json={"messages": [{"role": "user", "content": text}],
                                              "scoring": {"queries": [QUESTION]}})
    assert response.status_code == 200, response.text
    (result,) = response.json()["results"]
    options = result["combinations"][0]["options"]
    assert sum(option["p"] for option in options) == pytest.approx(1.0)

    over = client.post("/v1/score", json={"messages": [{"role": "user", "content": text_of_tokens(client, most + 1)}],
                                          "scoring": {"queries": [QUESTION]}})
    assert over.status_code == 400, over.text
    error = over.json()["error"]
    assert error["code"] == "max_content_tokens_exceeded" and error["param"] == "messages", error
    assert f"{most + 1:,}" in error["message"] and f"{most:,}" in error["message"]


def test_a_choice_of_255_options_answers_at_the_defaults(client) -> None:
    criteria = {f"team-{i:03d}": f"questions for support team {i}" for i in range(255)}
    criteria["team-007"] = "refunds and charges made twice"
    body = {"state": "I was charged twice for January. Please refund one of the charges.",
            "questions": {"team": {"type": "choice", "instructions": "Which support team should answer?",
                                   "criteria": criteria}}}
    response = client.post("/v1/decisions", json=body)
    assert response.status_code == 200, response.text
    answer = response.json()["answers"]["team"]
    assert answer["answer"] in criteria and len(answer["probabilities"]) == 255
    assert sum(answer["probabilities"].values()) == pytest.approx(1.0, abs=1e-6)
    assert response.json()["rounds"] == 1


def test_a_content_limit_no_pass_holds_is_lowered_to_one_that_does_and_reported() -> None:
    """--max-content-tokens 20,000 on the CPU, where a content alone may take 16,384 rows: the server serves (and
    reports, and enforces) the largest content that fits beside one question."""
    settings = Settings(engine=EngineSettings(model="gemma3-270m", device="cpu", warmup="none"),
                        limits=Limits(max_content_tokens=20_000))
    with TestClient(create_app(settings, load_model=load_shared), timeout=900) as client:
        wait_ready(client)
        (card,) = client.get("/v1/models").json()["data"]
        limits = card["limits"]
        held = limits["max_pass_rows"] - limits["max_query_tokens"] - limits["max_option_tokens"]
        assert limits["max_pass_rows"] == 16384 and limits["max_content_tokens"] == held == 16123
        text = text_of_tokens(client, held + 1)
        over = client.post("/v1/score", json={"messages": [{"role": "user", "content": text}],
                                              "scoring": {"queries": [QUESTION]}})
        assert over.status_code == 400, over.text
        assert over.json()["error"]["code"] == "max_content_tokens_exceeded"
