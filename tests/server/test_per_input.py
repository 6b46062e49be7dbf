"""Per-input errors (issue 24): one input that alone is wrong does not sink its neighbours. `answering` below the
HTTP layer with a stand-in attempt; then /v1/score through the real app and model (slow): the good inputs answered
with the bytes they get alone, each bad one with its code and `param`, a request-level error only when none can be
answered."""

from __future__ import annotations

import asyncio

import pytest
from litestar.testing import TestClient

from spinfc.config import EngineSettings, Settings
from spinfc.config.limits import LimitExceeded
from spinfc.server.app import create_app
from spinfc.server.errors import ApiError
from spinfc.server.per_input import answering

from packaged import load_shared

from .live import wait_ready


def attempt_refusing(bad: set[str], tried: list):
    async def attempt(body: dict):
        tried.append([item["id"] for item in body["inputs"]])
        for k, item in enumerate(body["inputs"]):
            if item["id"] in bad:
                raise LimitExceeded("max_content_tokens", 9000, 4096, f"inputs[{k}].messages")
        return [item["id"] for item in body["inputs"]]
    return attempt


def test_bad_inputs_are_set_aside_with_their_place_in_the_request_as_sent() -> None:
    body = {"inputs": [{"id": name} for name in "abcdef"]}
    tried: list = []
    answer, kept, failed = asyncio.run(answering(body, attempt_refusing({"b", "e"}, tried)))
    assert answer == ["a", "c", "d", "f"] and kept == [0, 2, 3, 5]
    assert {i: (e.code, e.param) for i, e in failed.items()} == {
        1: ("max_content_tokens_exceeded", "inputs[1].messages"), 4: ("max_content_tokens_exceeded", "inputs[4].messages")}
    assert len(tried) == 3  # one attempt per bad input, and the one answered


def test_a_request_error_or_no_input_left_is_the_requests_own() -> None:
    body = {"inputs": [{"id": "a"}, {"id": "b"}]}
    with pytest.raises(ApiError) as raised:
        asyncio.run(answering(body, attempt_refusing({"a", "b"}, [])))
    assert raised.value.param == "inputs[1].messages"  # the last one, named as sent

    async def about_queries(body):
        raise ApiError(400, "duplicate_id", "two queries with one id", "scoring.queries[1].id")

    with pytest.raises(ApiError, match="two queries"):
        asyncio.run(answering(body, about_queries))


QUERY = {"id": "late", "template": "\n\nIs a delivery late?\nAnswer:<?>", "options": [" yes", " no"]}


def good(k: int) -> dict:
    return {"messages": [{"role": "user", "content": f"Customer message {k}: my parcel never arrived."}]}


@pytest.fixture(scope="module")
def client():
    settings = Settings(engine=EngineSettings(model="smollm2-135m", device="cpu", token_budget=1024, warmup="none"))
    with TestClient(create_app(settings, load_model=load_shared), timeout=300) as client:
        wait_ready(client)
        yield client


@pytest.mark.slow
def test_the_good_inputs_are_answered_and_the_bad_ones_named(client) -> None:
    inputs = [good(k) for k in range(20)]
    inputs[7] = {"messages": [{"role": "user", "content": [{"type": "file", "file": {"file_id": "x"}}]}]}
    inputs[12] = {"messages": [{"role": "user", "content": "word " * 5000}]}  # over max_content_tokens (4,096)
    response = client.post("/v1/score", json={"inputs": inputs, "scoring": {"queries": [QUERY]}})
    assert response.status_code == 200, response.text
    answers = response.json()["inputs"]
    assert [a["index"] for a in answers] == list(range(20))
    errors = {a["index"]: a["error"] for a in answers if "error" in a}
    assert set(errors) == {7, 12}
    assert errors[7]["code"] == "unsupported_content" and errors[7]["param"].startswith("inputs[7].messages[0].content")
    assert errors[12]["param"] == "inputs[12].messages" and errors[12]["code"] == "max_content_tokens_exceeded"
    alone = client.post("/v1/score", json={"inputs": [good(3)], "scoring": {"queries": [QUERY]}}).json()
    together = [o["logprob"] for o in answers[3]["results"][0]["combinations"][0]["options"]]
    by_itself = [o["logprob"] for o in alone["inputs"][0]["results"][0]["combinations"][0]["options"]]
    assert together == pytest.approx(by_itself, abs=1e-4)  # the CPU's pass shapes differ: float rounding only
    assert all("results" in a and "error" not in a for k, a in enumerate(answers) if k not in errors)


@pytest.mark.slow
def test_when_no_input_can_be_answered_the_error_is_the_requests(client) -> None:
    bad = {"messages": [{"role": "user", "content": "word " * 5000}]}
    response = client.post("/v1/score", json={"inputs": [bad, bad], "scoring": {"queries": [QUERY]}})
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "inputs[1].messages"
