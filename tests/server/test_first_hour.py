"""What a new user meets first, over HTTP on the packaged models (issue: "What a new user hits in the first hour"):
amounts in their natural forms found and merged by value and currency, an empty search that says why, and a
`<gen>` with nothing after it ending at a newline."""

from __future__ import annotations

import logging

import pytest
from litestar.testing import TestClient

from spinfc.config import EngineSettings, Settings
from spinfc.server.app import create_app

from packaged import load_shared
from .live import wait_ready

pytestmark = pytest.mark.slow  # loads packaged models

FORMS = ["$1,250", "€1,250", "1,250 euros", "USD 1,250", "1.250,00 €", "EUR 1,250"]
AMOUNT = {"id": "amount", "template": "\n\nQ: What amount is due?\nA: <$>"}


class Recorded(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.fixture(scope="module", params=["smollm2-135m", "gemma3-270m"])
def started(request):
    """A ready app on each packaged model, and what spinfc logged while it started (each engine builds its own
    grammars' tables, as a fresh process does)."""
    settings = Settings(engine=EngineSettings(model=request.param, device="cpu", warmup="short"))
    recorded, logger = Recorded(), logging.getLogger("spinfc")
    logger.addHandler(recorded)
    level, logger.level = logger.level, logging.INFO
    try:
        with TestClient(create_app(settings, load_model=load_shared), timeout=600) as client:
            wait_ready(client)
            yield client, list(recorded.messages)
    finally:
        logger.removeHandler(recorded)
        logger.setLevel(level)


@pytest.fixture(scope="module")
def client(started):
    return started[0]


def test_the_start_says_what_it_is_doing_step_by_step(started) -> None:
    """Each slow step of a start is announced before it runs, and the extraction tables are built before ready
    (not on the first request)."""
    messages = started[1]
    steps = ["loading ", "loaded ", "reading the tokenizer", "warming up: one small pass", "warm-up pass done",
             "warming up extraction", "built the extraction grammars", "extraction warm-up done"]
    at = [next((i for i, m in enumerate(messages) if m.startswith(step)), None) for step in steps]
    assert None not in at and at == sorted(at), messages


def combination(client: TestClient, content: str, query: dict) -> dict:
    response = client.post("/v1/score", json={"messages": [{"role": "user", "content": content}],
                                              "scoring": {"queries": [query]}})
    assert response.status_code == 200, response.text
    (result,) = response.json()["results"]
    (only,) = result["combinations"]
    return only


@pytest.fixture(scope="module")
def amounts(client) -> dict[str, dict]:
    """Each form's answer, from one request with every form an input (an input's answers are the same alone or
    packed with others: one server round of extraction instead of six)."""
    body = {"inputs": [{"messages": [{"role": "user", "content": f"Invoice 7741: the total due is {form}"}]}
                       for form in FORMS], "scoring": {"queries": [AMOUNT]}}
    response = client.post("/v1/score", json=body)
    assert response.status_code == 200, response.text
    found = {}
    for form, item in zip(FORMS, response.json()["inputs"], strict=True):
        (result,) = item["results"]
        (found[form],) = result["combinations"]
    return found


@pytest.mark.parametrize("form", FORMS)
def test_an_amount_in_its_natural_form_is_found_once(amounts, form) -> None:
    found = amounts[form]
    answers = found["answers"]
    assert found["coverage"] > 0.01 and 1250 in [a["value"] for a in answers], answers
    keys = [(a["value"], a.get("currency")) for a in answers]
    assert len(keys) == len(set(keys)), f"two answers with one value and currency: {answers}"
    assert abs(sum(a["p"] for a in answers) - 1) < 1e-9
    for answer in answers:
        assert answer.get("currency") in (None, "USD", "EUR") and answer["text"] in answer.get("forms", [answer["text"]])


def test_an_empty_search_says_why(client) -> None:
    found = combination(client, "Invoice 7741: the total due is $1,250", {**AMOUNT, "max_tokens": 2})
    assert found["answers"] == [] and found["coverage"] == 0
    assert "max_tokens (2)" in found["reason"]


def test_gen_with_nothing_after_the_slot_ends_at_a_newline(client) -> None:
    found = combination(client, "Invoice 7741: the total due is $1,250",
                        {"id": "say", "template": "\n\nQ: What amount is due?\nA: <gen>"})
    assert found["finish_reason"] == "stop" and "\n" not in found["text"] and found["text"].strip(), found
