"""POST /v1/decisions (and /v1/systemone) end to end on gemma3-270m (CPU, 512-token passes): noul, choice and score
questions over one state, answered from one read; a question set too large for one pass runs in rounds; errors."""

from __future__ import annotations

import math

import pytest
from litestar.testing import TestClient

from spinfc.config import EngineSettings, Limits, ServerSettings, Settings
from spinfc.runtime.decisions import gini_confidence
from spinfc.server.app import create_app

from packaged import load_shared
from .live import wait_ready

pytestmark = pytest.mark.slow  # loads a packaged model

STATE = "Customer message: I was charged twice for my order and the parcel still has not arrived. Refund me now!"
TOPICS = {"billing": "charges, invoices and refunds", "delivery": "parcels, couriers and delays",
          "technical": "the app or the website is broken", "account": "logins and passwords",
          "returns": "sending an item back", "sales": "buying something new", "praise": "thanks and compliments",
          "privacy": "personal data", "fraud": "a stolen card", "cancellation": "ending a subscription",
          "warranty": "repairs under guarantee", "other": "anything else"}
QUESTIONS = {
    "refund": {"type": "noul", "instructions": "Does the customer ask for a refund?",
               "criteria": "asks for money back"},
    "topic": {"type": "choice", "instructions": "What is the message mainly about?", "criteria": TOPICS},
    "anger": {"type": "score", "instructions": "How angry is the customer?",
              "criteria": ["calm", "annoyed", "angry", "furious"]},
}
TRUSTED = {"Authorization": "Bearer front"}
# a 1 x 1 PNG
PNG = ("data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElF"
       "TkSuQmCC")


@pytest.fixture(scope="module")
def client():
    settings = Settings(engine=EngineSettings(model="gemma3-270m", device="cpu", token_budget=512, warmup="none"),
                        server=ServerSettings(trusted_token="front"), limits=Limits(max_query_tokens=64))
    with TestClient(create_app(settings, load_model=load_shared), timeout=600) as client:
        wait_ready(client)
        yield client


@pytest.fixture(scope="module")
def answered(client) -> dict:
    response = client.post("/v1/decisions", json={"model": "gemma3-270m", "state": STATE, "questions": QUESTIONS})
    assert response.status_code == 200, response.text
    return response.json()


def error(client, body, status: int = 400, path: str = "/v1/decisions") -> dict:
    response = client.post(path, json=body) if not isinstance(body, bytes) else \
        client.post(path, content=body, headers={"content-type": "application/json"})
    assert response.status_code == status, response.text
    assert set(response.json()) == {"error"}
    return response.json()["error"]


def test_noul_choice_and_score_are_answered_from_one_read(answered) -> None:
    body = answered
    assert body["object"] == "decision" and body["id"].startswith("decision-") and body["model"] == "gemma3-270m"
    assert body["system_fingerprint"].startswith("spinfc-0.1.0-") and body["system_fingerprint"].endswith("-cpu")
    assert body["rounds"] == 1 and "debug" not in body
    usage = body["usage"]
    assert usage["output_tokens"] == 0 and usage["input_tokens"] > 0 and usage["total_tokens"] == usage["input_tokens"]
    assert list(body["answers"]) == ["refund", "topic", "anger"]

    refund = body["answers"]["refund"]
    p = refund["probabilities"]
    assert refund["type"] == "noul" and refund["answer"] == p["true"] and p["true"] + p["false"] == pytest.approx(1)
    assert refund["confidence"] == pytest.approx((2 * p["true"] - 1) ** 2)
    assert 0 <= refund["floor"] <= 1 and 0 <= refund["residual"] <= 1

    topic = body["answers"]["topic"]
    assert topic["type"] == "choice" and list(topic["probabilities"]) == list(TOPICS)
    assert sum(topic["probabilities"].values()) == pytest.approx(1)
    assert topic["answer"] == max(topic["probabilities"], key=topic["probabilities"].get)
    assert topic["confidence"] == pytest.approx(gini_confidence(topic["probabilities"].values()))
    assert set(topic["floor"]) == set(TOPICS)

    anger = body["answers"]["anger"]
    levels = anger["probabilities"]
    assert anger["type"] == "score" and anger["legend"] == QUESTIONS["anger"]["criteria"] and len(levels) == 4
    assert sum(levels) == pytest.approx(1)
    assert anger["answer"] == pytest.approx(sum(i * q for i, q in enumerate(levels)))
    assert anger["level"] == max(range(4), key=levels.__getitem__) and 0 <= anger["floor"] <= 3
    # the state moved the answers away from those on empty content
    assert abs(refund["answer"] - refund["floor"]) > 1e-3


def test_a_choice_listing_many_options_passes_the_query_token_limit(answered) -> None:
    # the server's max_query_tokens is 64; the topic question's template lists 12 options, far more than 64
    # tokens: decision templates are exempt, each piece written by the client is counted instead
    assert len(answered["answers"]["topic"]["probabilities"]) == 12


def test_the_alias_and_messages_read_the_same_content(client, answered) -> None:
    body = {"messages": [{"role": "user", "content": [{"type": "text", "text": STATE}]}], "questions": QUESTIONS}
    response = client.post("/v1/systemone", json=body)
    assert response.status_code == 200, response.text
    again = response.json()["answers"]
    for qid, first in answered["answers"].items():
        values = first["probabilities"].values() if isinstance(first["probabilities"], dict) else first["probabilities"]
        other = again[qid]["probabilities"]
        other = other.values() if isinstance(other, dict) else other
        assert list(other) == pytest.approx(list(values), abs=1e-5), qid
        assert again[qid]["floor"] == first["floor"]  # the floor was cached by the first request


def test_a_large_question_set_runs_in_rounds_and_answers_every_question(client, answered) -> None:
    questions = dict(QUESTIONS)
    for i in range(14):
        questions[f"extra{i}"] = {"type": "noul", "instructions": f"Question {i}: does the customer mention item "
                                  f"number {i} of the order, and does that item come from warehouse {i}?"}
    response = client.post("/v1/decisions", json={"state": STATE, "questions": questions}, headers=TRUSTED)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["rounds"] >= 2 and len(body["debug"]["plan"]) == body["rounds"]
    assert all(segment["rows"] <= 512 for plan in body["debug"]["plan"] for segment in plan["segments"])
    assert sum(plan["questions"] for plan in body["debug"]["plan"]) == len(questions)
    assert list(body["answers"]) == list(questions) and body["usage"]["output_tokens"] == 0
    for qid in QUESTIONS:  # a question's answer does not depend on the questions asked beside it
        first, here = answered["answers"][qid], body["answers"][qid]
        assert here["confidence"] == pytest.approx(first["confidence"], abs=1e-4), qid
    for i in range(14):
        assert 0 < body["answers"][f"extra{i}"]["answer"] < 1


def test_a_single_question_too_large_for_a_pass_is_refused_by_name(client) -> None:
    """Too large, with a long state, for the longest pass a question may take alone (16,384 rows on the CPU): its
    255 options of some 60 tokens each and a state of some 3,000 tokens. Refused by name."""
    wording = " and ".join(f"the message is about subject number {i} of the catalogue" for i in range(4))
    criteria = {f"option{i}": wording for i in range(255)}
    state = STATE + " The parcel was late again." * 400
    err = error(client, {"state": state, "questions": {"huge": {"type": "choice", "instructions": "Which one?",
                                                                 "criteria": criteria}}})
    assert err["code"] == "content_too_long" and err["param"] == "questions.huge"
    assert "--token-budget" in err["message"]


def test_decision_errors_name_the_field(client) -> None:
    one = {"state": STATE, "questions": {"q": {"type": "noul", "instructions": "Refund?"}}}
    cases = [
        ({**one, "questions": {"q": {"type": "poll", "instructions": "Refund?"}}}, "unknown_question_type",
         "questions.q.type"),
        ({**one, "questions": {"q": {"type": "choice", "instructions": "Which?", "criteria": {}}}},
         "invalid_choice_criteria", "questions.q.criteria"),
        ({**one, "questions": {"q": {"type": "choice", "instructions": "Which?",
                                     "criteria": {f"k{i}": "" for i in range(256)}}}},
         "invalid_choice_criteria", "questions.q.criteria"),
        ({**one, "questions": {"q": {"type": "score", "instructions": "How?", "criteria": ["only"]}}},
         "invalid_score_criteria", "questions.q.criteria"),
        ({**one, "messages": [{"role": "user", "content": "x"}]}, "state_and_messages", "state"),
        ({"questions": one["questions"]}, "missing_field", "state"),
        ({**one, "questions": {}}, "wrong_type", "questions"),
        ({**one, "messages": None, "state": None, "stat": STATE}, "unknown_field", "stat"),
        ({**one, "state": 5}, "wrong_type", "state"),
        ({**one, "model": "smollm2-135m"}, "model_not_served", "model"),
        ({"messages": [{"role": "user", "content": [{"type": "file", "file": {"file_id": "x"}}]}],
          "questions": one["questions"]}, "unsupported_content", "messages[0].content[0].type"),
        ({"messages": [{"role": "user", "content": [{"type": "image_url", "text": "x"}]}],
          "questions": one["questions"]}, "unknown_field", "messages[0].content[0].text"),
        # an image for a model without a vision tower: the named 400 of /v1/score, saying which models read images
        ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": PNG}}]}],
          "questions": one["questions"]}, "image_unsupported", "messages[0].content[0].image_url"),
    ]
    for body, code, param in cases:
        err = error(client, body)
        assert err["code"] == code, (body, err)
        if param is not None:
            assert err["param"] == param, (body, err)
        assert err["type"] == "invalid_request_error" and err["message"]
    assert error(client, b'{"state": ')["code"] == "invalid_json"
    assert error(client, {**one, "questions": {"q": {"type": "noul", "instructions": "Refund?", "weight": 2}}})[
        "param"] == "questions.q.weight"


def test_an_image_for_a_model_without_a_vision_tower_names_the_models_that_read_it(client) -> None:
    image = {"type": "image_url", "image_url": {"url": PNG}}
    body = {"messages": [{"role": "user", "content": [{"type": "text", "text": STATE}, image]}],
            "questions": QUESTIONS}
    err = error(client, body)
    assert err["code"] == "image_unsupported" and err["param"] == "messages[0].content[1].image_url"
    assert "Gemma 3 (4B and larger), Gemma 4 and Qwen3.5" in err["message"]


def test_confidence_is_the_normalised_gini(answered) -> None:
    probabilities = answered["answers"]["anger"]["probabilities"]
    k = len(probabilities)
    expected = (sum(p * p for p in probabilities) - 1 / k) / (1 - 1 / k)
    assert math.isclose(answered["answers"]["anger"]["confidence"], max(0.0, expected), abs_tol=1e-12)
