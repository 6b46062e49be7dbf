"""Every request limit is enforced by the server with a 400 whose code names it (gemma3-270m, CPU, TestClient).

Each limit is lowered for one call by the trusted caller's per-call `limits` (which also tests that path), or set on
the server (max_body_bytes, which cannot change per call, and max_extractions_per_input at its default). A limit
check runs before any pass, so these tests cost no forward pass but the one that shows a raised limit."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
from litestar.testing import TestClient
from packaged import load_shared

from spinfc.config import EngineSettings, Limits, ServerSettings, Settings
from spinfc.config.limits import LIMIT_NAMES
from spinfc.server.app import create_app

from .live import wait_ready

pytestmark = pytest.mark.slow  # loads a packaged model

TRUSTED = {"Authorization": "Bearer front"}
TEXT = "Customer message: the parcel never arrived and I want my money back."
BODY = {"messages": [{"role": "user", "content": TEXT}], "scoring": {"queries": [
    {"id": "refund", "template": "\n\nDoes the customer ask for a refund?\nAnswer:<?>", "options": [" yes", " no"]},
    {"id": "about", "template": "\n\nIs the message about {topic}?\nAnswer:<?>", "options": [" yes", " no"],
     "placeholders": {"topic": ["a delivery", "a refund", "the weather"]}}]}}
DECISION = {"state": TEXT, "questions": {
    "refund": {"type": "noul", "instructions": "Does the customer ask for a refund?"},
    "topic": {"type": "choice", "instructions": "What is it about?",
              "criteria": {"delivery": "parcels", "billing": "charges", "other": "anything else"}}}}
COVERED: set[str] = set()


@pytest.fixture(scope="module")
def client():
    settings = Settings(engine=EngineSettings(model="gemma3-270m", device="cpu", token_budget=512, warmup="none"),
                        server=ServerSettings(trusted_token="front"),
                        limits=Limits(max_body_bytes=20_000, max_options=6))
    with TestClient(create_app(settings, load_model=load_shared), timeout=600) as client:
        wait_ready(client)
        yield client


def refused(client, limit: str, body: dict, param: str | None, path: str = "/v1/score", **limits) -> dict:
    """POST `body` with the per-call `limits`; assert a 400 `<limit>_exceeded` at `param` and return the error."""
    COVERED.add(limit)
    body = {**body, "limits": limits} if limits else body
    response = client.post(path, json=body, headers=TRUSTED)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == f"{limit}_exceeded" and error["param"] == param, error
    assert error["type"] == "invalid_request_error" and f"--{limit.replace('_', '-')}" in error["message"]
    return error


def refused_input(client, limit: str, body: dict, index: int, param: str, **limits) -> dict:
    """POST `body` (several inputs) with the per-call `limits`; assert a 200 whose input `index` alone is the
    `<limit>_exceeded` error at `param` (per-input errors: the other inputs are answered) and return that error."""
    COVERED.add(limit)
    response = client.post("/v1/score", json={**body, "limits": limits}, headers=TRUSTED)
    assert response.status_code == 200, response.text
    inputs = response.json()["inputs"]
    assert all("results" in answer for k, answer in enumerate(inputs) if k != index), inputs
    error = inputs[index]["error"]
    assert error["code"] == f"{limit}_exceeded" and error["param"] == param, error
    assert error["type"] == "invalid_request_error" and f"--{limit.replace('_', '-')}" in error["message"]
    return error


def test_max_content_tokens(client) -> None:
    error = refused(client, "max_content_tokens", BODY, "messages", max_content_tokens=8)
    assert "over the server's limit of 8 (max_content_tokens)" in error["message"]
    many = {"inputs": [{"messages": [{"role": "user", "content": "short"}]}, {"messages": BODY["messages"]}],
            "scoring": BODY["scoring"]}
    refused_input(client, "max_content_tokens", many, 1, "inputs[1].messages", max_content_tokens=8)
    refused(client, "max_content_tokens", DECISION, "state", "/v1/decisions", max_content_tokens=8)


def test_max_query_tokens(client) -> None:
    refused(client, "max_query_tokens", BODY, "scoring.queries[0].template", max_query_tokens=6)
    refused(client, "max_query_tokens", {**BODY, "packs": [{"id": "spinfc/moderation"}]}, "packs[0].template",
            max_query_tokens=12)
    # a decision question counts the text the client wrote, not the template that lists its options
    refused(client, "max_query_tokens", DECISION, "questions.refund.instructions", "/v1/decisions",
            max_query_tokens=6)
    short = {"state": TEXT, "questions": {"topic": {"type": "choice", "instructions": "Topic?", "criteria": {
        "delivery": "parcels and couriers", "billing": "charges"}}}}
    error = refused(client, "max_query_tokens", short, "questions.topic.criteria.delivery", "/v1/decisions",
                    max_query_tokens=4)
    assert "tokens in one piece of a question" in error["message"]


def test_max_prompts_per_input(client) -> None:
    error = refused(client, "max_prompts_per_input", BODY, "scoring.queries", max_prompts_per_input=3)
    assert "4 questions asked of one input" in error["message"]
    refused(client, "max_prompts_per_input", DECISION, "questions", "/v1/decisions", max_prompts_per_input=1)
    # a body of under 2 KB asking for a grid of a million questions is refused before the grid is built (built,
    # it would hold the compile thread that every request shares for minutes)
    values = [f"v{i}" for i in range(100)]
    grid = {**BODY, "scoring": {"queries": [{"id": "grid", "template": "\n\n{a} {b} {c}?\nAnswer:<?>",
                                             "options": [" yes", " no"],
                                             "placeholders": {"a": values, "b": values, "c": values}}]}}
    error = refused(client, "max_prompts_per_input", grid, "scoring.queries")
    assert "1000000 questions" in error["message"].replace(",", "")


def test_max_extractions_per_input_at_its_default(client) -> None:
    body = copy.deepcopy(BODY)
    body["scoring"]["queries"] = [{"id": f"x{i}", "template": f"\n\nQ{i}: what was bought?\nA: \"<*>\""}
                                  for i in range(11)]
    refused(client, "max_extractions_per_input", body, "scoring.queries[10].template")
    refused(client, "max_extractions_per_input", body | {"scoring": {"queries": body["scoring"]["queries"][:2]}},
            "scoring.queries[1].template", max_extractions_per_input=1)



def test_beam_width_and_slot_tokens(client) -> None:
    body = copy.deepcopy(BODY)
    body["scoring"]["queries"] = [{"id": "what", "template": "\n\nQ: what was bought?\nA: \"<*>\"", "beam_width": 8,
                                   "max_tokens": 40}]
    refused(client, "max_beam_width", body, "scoring.queries[0].beam_width", max_beam_width=4)
    refused(client, "max_slot_tokens", body, "scoring.queries[0].max_tokens", max_slot_tokens=32)
    body["scoring"]["queries"] = [{"id": "say", "template": "\n\nSay: <gen>", "max_tokens": 300}]
    refused(client, "max_slot_tokens", body, "scoring.queries[0].max_tokens")


def test_max_processed_tokens(client) -> None:
    error = refused(client, "max_processed_tokens", BODY, None, max_processed_tokens=40)
    assert "over the server's limit of 40" in error["message"]
    refused(client, "max_processed_tokens", DECISION, None, "/v1/decisions", max_processed_tokens=40)


def test_max_body_bytes(client) -> None:
    COVERED.add("max_body_bytes")
    response = client.post("/v1/score", json={**BODY, "messages": [{"role": "user", "content": "x" * 25_000}]})
    assert response.status_code == 413 and response.json()["error"]["code"] == "max_body_bytes_exceeded"
    assert "--max-body-bytes" in response.json()["error"]["message"]
    response = client.post("/v1/score", json={**BODY, "limits": {"max_body_bytes": 50_000}}, headers=TRUSTED)
    assert response.json()["error"] == {
        "message": "limits.max_body_bytes cannot change per call: the body is refused before it is read (start the "
                   "server with a higher --max-body-bytes)",
        "type": "invalid_request_error", "code": "invalid_limits", "param": "limits.max_body_bytes"}


def test_max_options(client) -> None:
    body = copy.deepcopy(BODY)
    body["scoring"]["queries"][0]["options"] = [" yes", " no", " maybe"]
    refused(client, "max_options", body, "scoring.queries[0].options", max_options=2)
    refused(client, "max_options", DECISION, "questions.topic.criteria", "/v1/decisions", max_options=2)
    seven = copy.deepcopy(BODY)  # the server's own limit is 6
    seven["scoring"]["queries"] = [{"id": "n", "template": "\n\nHow many items?\nAnswer:<?>",
                                    "options": [f" {i}" for i in range(1, 8)]}]
    refused(client, "max_options", seven, "scoring.queries[0].options")
    raised = client.post("/v1/score", json={**seven, "limits": {"max_options": 7}}, headers=TRUSTED)
    assert raised.status_code == 200, raised.text  # a trusted caller raised it for this call
    assert len(raised.json()["results"][0]["combinations"][0]["options"]) == 7


def test_max_option_tokens(client) -> None:
    body = copy.deepcopy(BODY)
    body["scoring"]["queries"][0]["options"] = [" yes", " yes, please refund all of it to my card today"]
    refused(client, "max_option_tokens", body, "scoring.queries[0].options[1]")
    error = refused(client, "max_option_tokens", {**body, "scoring": {"queries": body["scoring"]["queries"][:1]}},
                    "scoring.queries[0].options[1]", max_option_tokens=2)
    assert "over the server's limit of 2" in error["message"]


def test_per_call_limits_are_checked(client) -> None:
    for limits, param in (({"max_cats": 3}, "limits.max_cats"), ({"max_options": 0}, "limits.max_options"),
                          ({"max_options": [7]}, "limits.max_options")):
        error = client.post("/v1/score", json={**BODY, "limits": limits}, headers=TRUSTED).json()["error"]
        assert error["code"] in ("invalid_limits", "invalid_request_body") and error["param"] == param, error
    error = client.post("/v1/score", json={**BODY, "features": {"teleport": True}}, headers=TRUSTED).json()["error"]
    assert error["code"] == "invalid_features" and error["param"] == "features.teleport"
    body = {**BODY, "scoring": {"queries": [{"id": "m", "template": "\n\nMonth: <*>"}]}}
    error = client.post("/v1/score", json={**body, "features": {"extraction": False}}, headers=TRUSTED).json()["error"]
    assert error["code"] == "extraction_disabled" and error["param"] == "scoring.queries[0].template"
    body = {**BODY, "scoring": {"queries": [{"id": "say", "template": "\n\nSay: <gen>"}]}}
    error = client.post("/v1/score", json={**body, "features": {"generation": False}}, headers=TRUSTED).json()["error"]
    assert error["code"] == "generation_disabled" and error["param"] == "scoring.queries[0].template"
    assert "--no-generation" in error["message"]
    untrusted = client.post("/v1/score", json={**BODY, "limits": {"max_options": 2}})
    assert untrusted.status_code == 403 and untrusted.json()["error"]["code"] == "trusted_token_required"


def test_max_decode_tokens(client) -> None:
    """Two `<*>` slots of beam 4 and 16 tokens: 128 decoded tokens asked for, over a per-call bound of 100."""
    searched = {"template": "\n\nQ: Which month?\nA: \"<*>\"", "beam_width": 4, "max_tokens": 16}
    body = {**BODY, "scoring": {"queries": [{**searched, "id": "a"}, {**searched, "id": "b"}]}}
    refused(client, "max_decode_tokens", body, "scoring.queries", max_decode_tokens=100)


# Bodies /v1/score refuses, each for what one of the checks counts (runtime/admit/policy.py: the decoded request, the
# frontend's program, the compiled program; a feature; the packs; the strict decoding): /v1/plan, which compiles a
# /v1/score body without scoring it, must answer each with the same bytes
EXTRACT = {"id": "when", "template": "\n\nWhen?\nAnswer:<*>", "beam_width": 4, "max_tokens": 16}
PLAN_REFUSED = {
    "max_content_tokens_exceeded": {**BODY, "messages": [{"role": "user", "content": TEXT * 40}],
                                    "limits": {"max_content_tokens": 2}},
    "max_prompts_per_input_exceeded": {**BODY, "limits": {"max_prompts_per_input": 3}},
    "max_processed_tokens_exceeded": {**BODY, "limits": {"max_processed_tokens": 40}},
    "max_decode_tokens_exceeded": {**BODY, "scoring": {"queries": [EXTRACT]}, "limits": {"max_decode_tokens": 10}},
    "extraction_disabled": {**BODY, "scoring": {"queries": [EXTRACT]}, "features": {"extraction": False}},
    "pack_not_enabled": {**BODY, "packs": [{"id": "nobody/nothing"}]},
    "unknown_field": {**BODY, "debug": True},
}


@pytest.mark.parametrize("code", sorted(PLAN_REFUSED))
def test_plan_refuses_what_score_refuses_with_the_same_answer(client, code: str) -> None:
    body = PLAN_REFUSED[code]
    scored = client.post("/v1/score", json=body, headers=TRUSTED)
    assert scored.status_code == 400 and scored.json()["error"]["code"] == code, scored.text
    planned = client.post("/v1/plan", json=body, headers=TRUSTED)
    assert (planned.status_code, planned.content) == (scored.status_code, scored.content)


def test_plan_of_a_body_score_answers(client) -> None:
    plan = client.post("/v1/plan", json={**BODY, "packs": [{"id": "spinfc/moderation"}]}, headers=TRUSTED)
    assert plan.status_code == 200, plan.text
    plan = plan.json()
    assert plan["object"] == "plan" and plan["contents"] == 2 and plan["budget"] == 512 and plan["passes"] >= 1
    assert plan["questions"] > 4 and plan["tokens"] > 0 and plan["saving"] > 1


# The media limits are refused with 413 from the media's header, on a model with a tower: tested with the media
# (their code in each file named here, read below, so this list cannot name a test that is not there).
MEDIA_LIMITS = {"max_image_pixels": "media/test_hostile.py", "max_audio_seconds": "media/test_hostile.py",
                "max_frames": "media/test_http.py", "max_fetch_bytes": "media/test_hostile.py"}


def test_every_limit_has_a_test_above() -> None:
    tests = Path(__file__).resolve().parents[1]
    for limit, where in MEDIA_LIMITS.items():
        assert f"{limit}_exceeded" in (tests / where).read_text(), (limit, where)
    assert COVERED | set(MEDIA_LIMITS) == set(LIMIT_NAMES) and not COVERED & set(MEDIA_LIMITS)
