"""`spinfc serve DIR` on a random-weight 255-label decision model (transformers' LlamaForSequenceClassification,
SmolLM2's tokenizer), over HTTP, one server for the module: /v1/models says it is a decision model and lists its codes;
/v1/decisions answers a choice over its codes (every code, or the criteria's, in rounds where the questions do not
fit one pass); /v1/score returns the code distribution with floor_p; a pack naming codes is answered; what a decision
model cannot answer (text options, <*> <n> <gen>, noul, /v1/completions, generation) is a named 400."""

from __future__ import annotations

import math

import httpx
import pytest

from spinfc.config import EngineSettings, FeatureSettings, Settings
from spinfc.server.app import create_app

from tests.server.live import live_server
from .random_decider import labels

pytestmark = pytest.mark.slow  # a packaged tokenizer and a live server

CODES = list(labels().values())
STATE = "Customer support message:\nI was charged twice for September, please refund one of the charges."
PACK = '''id = "acme/routing"
version = "1.0.0"
description = "Route support mail with a decision model's codes."
models = ["{model}"]
presentation = "Customer support message:\\n{{content}}"

[[questions]]
id = "queue"
template = "\\n\\nQueue:<?>"
codes = "all"

[[questions]]
id = "billing"
template = "\\n\\nBilling or not?<?>"
codes = ["L3", "code_004"]

[[categories]]
id = "billing_like"
combine = "noisy_or"
members = [{{ question = "billing", option = "L3" }}, {{ question = "queue", option = "code_004" }}]
'''


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    from .random_decider import random_decider

    snapshot = tmp_path_factory.mktemp("decider-serve")
    random_decider("llama", snapshot)
    packs = tmp_path_factory.mktemp("decider-packs")
    (packs / "routing.toml").write_text(PACK.format(model=snapshot))
    settings = Settings(engine=EngineSettings(model=str(snapshot), device="cpu", token_budget=512, warmup="short"),
                        features=FeatureSettings(packs=(str(packs),), no_official_packs=True))
    with live_server(create_app(settings)) as base:
        yield base


def post(url: str, path: str, body: dict) -> httpx.Response:
    return httpx.post(f"{url}{path}", json=body, timeout=300)


def test_models_says_decision_and_lists_its_codes(url):
    (card,) = httpx.get(f"{url}/v1/models", timeout=30).json()["data"]
    assert card["kind"] == "decision" and card["codes"] == CODES
    assert card["features"]["extraction"] is False and card["features"]["generation"] is False


def test_a_choice_over_every_code(url):
    response = post(url, "/v1/decisions", {"state": STATE, "questions": {
        "route": {"type": "choice", "instructions": "Which queue should take this message?"},
        "some": {"type": "choice", "instructions": "Which fits?", "criteria": {"L3": "billing", "code_004": ""}}}})
    assert response.status_code == 200, response.text
    answers = response.json()["answers"]
    route = answers["route"]
    assert list(route["probabilities"]) == CODES
    assert abs(sum(route["probabilities"].values()) - 1) < 1e-5 and abs(route["residual"]) < 1e-5
    assert route["answer"] == max(CODES, key=lambda code: route["probabilities"][code])
    assert set(route["floor"]) == set(CODES) and abs(sum(route["floor"].values()) - 1) < 1e-5
    some = answers["some"]
    assert list(some["probabilities"]) == ["L3", "code_004"] and 0 < some["residual"] < 1


def test_many_choices_run_in_rounds(url):
    instructions = "Which queue should take this message, given everything the customer wrote above? " * 4
    questions = {f"q{i}": {"type": "choice", "instructions": f"({i}) {instructions}"} for i in range(24)}
    response = post(url, "/v1/decisions", {"state": STATE, "questions": questions})
    assert response.status_code == 200, response.text
    # 24 questions of ~70 tokens each (none shares more than its first words) do not fit one pass of 512 rows
    assert response.json()["rounds"] > 1
    for answer in response.json()["answers"].values():
        assert len(answer["probabilities"]) == len(CODES)


def test_score_returns_the_code_distribution(url):
    response = post(url, "/v1/score", {"messages": [{"role": "user", "content": STATE}], "scoring": {"queries": [
        {"id": "route", "template": "\n\nQueue:<?>", "codes": "all"},
        {"id": "pair", "template": "\n\nBilling?<?>", "codes": ["L3", "code_004"]}]}})
    assert response.status_code == 200, response.text
    results = {r["id"]: r["combinations"][0] for r in response.json()["results"]}
    route = results["route"]
    assert [o["text"] for o in route["options"]] == CODES and abs(route["residual"]) < 1e-5
    for option in route["options"]:
        assert abs(option["p"] - math.exp(option["logprob"])) < 1e-5 and 0 < option["floor_p"] < 1
    pair = results["pair"]
    assert abs(sum(o["p"] for o in pair["options"]) - 1) < 1e-6 and 0 < pair["residual"] < 1


def test_a_pack_naming_codes_is_answered(url):
    response = post(url, "/v1/score", {"messages": [{"role": "user", "content": STATE}],
                                       "packs": [{"id": "acme/routing"}]})
    assert response.status_code == 200, response.text
    (pack,) = response.json()["packs"]
    results = {r["id"]: r["combinations"][0] for r in pack["results"]}
    assert [o["text"] for o in results["queue"]["options"]] == CODES
    billing = {o["text"]: o["p"] for o in results["billing"]["options"]}
    queue = {o["text"]: o["p"] for o in results["queue"]["options"]}
    noisy_or = 1 - (1 - billing["L3"]) * (1 - queue["code_004"])
    assert abs(pack["categories"]["billing_like"] - noisy_or) < 1e-6


@pytest.mark.parametrize(("path", "body", "code"), [
    ("/v1/score", {"template": "\n\nRefund?<?>", "options": [" yes", " no"]}, "options_on_decision_model"),
    ("/v1/score", {"template": "\n\nWhich month? \"<*>\""}, "extraction_on_decision_model"),
    ("/v1/score", {"template": "\n\nHow many? <n>"}, "extraction_on_decision_model"),
    ("/v1/score", {"template": "\n\nReply: <gen>"}, "extraction_on_decision_model"),
    ("/v1/score", {"template": "\n\nQueue:<?>", "codes": ["billing"]}, "unknown_code"),
    ("/v1/decisions", {"type": "noul", "instructions": "Refund?"}, "options_on_decision_model"),
    ("/v1/decisions", {"type": "choice", "instructions": "Which?", "criteria": {"billing": ""}}, "unknown_code"),
])
def test_what_a_decision_model_cannot_answer_is_a_named_400(url, path, body, code):
    if path == "/v1/score":
        request = {"messages": [{"role": "user", "content": STATE}], "scoring": {"queries": [{"id": "q", **body}]}}
    else:
        request = {"state": STATE, "questions": {"q": body}}
    response = post(url, path, request)
    assert response.status_code == 400 and response.json()["error"]["code"] == code, response.text


def test_completions_and_generation_are_refused(url):
    response = post(url, "/v1/completions", {"prompt": STATE, "max_tokens": 0, "echo": True, "logprobs": 1})
    assert response.status_code == 400 and response.json()["error"]["code"] == "not_a_language_model", response.text
    response = post(url, "/v1/chat/completions", {"messages": [{"role": "user", "content": STATE}]})
    assert response.status_code == 400 and response.json()["error"]["code"] == "generation_not_available", \
        response.text
