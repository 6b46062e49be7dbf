"""The client's own behaviour over httpx's MockTransport: settings from the environment, typed answers, the error
envelope, 429 and Retry-After with a bounded number of tries, and large jobs split by the limits (in input order,
halved again when the server says too large)."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from spinfc.client import AsyncClient, Client, ScoreResponse, SpinfcError
from spinfc.client.batches import plan_chunks
from spinfc.client.calls import retry_after

LIMITS = {"max_body_bytes": 2_000, "max_processed_tokens": 100_000, "max_content_tokens": 4096}
SCORING = {"queries": [{"id": "q", "template": "Is it spam?<?>", "options": [" yes", " no"]}]}


def models_body(limits=LIMITS) -> dict:
    return {"object": "list", "data": [{"id": "m", "object": "model", "created": 0, "owned_by": "spinfc",
                                       "aliases": [], "ready": True, "features": {}, "limits": limits}]}


def result_for(text: str) -> list:
    """A query result that names the content it was computed for, so order can be checked."""
    return [{"id": text, "combinations": [{"values": {}, "residual": 0.5, "options": [
        {"text": " yes", "logprob": -1.0, "p": 0.5, "floor_p": 0.5}]}]}]


def score_body(request: httpx.Request) -> dict:
    sent = json.loads(request.content)
    texts = [item["messages"][0]["content"] for item in sent["inputs"]]
    return {"id": "s", "object": "score", "created": 0, "model": "m", "system_fingerprint": "f",
            "usage": {"input_tokens": 10 * len(texts), "output_tokens": 0, "questions": len(texts)},
            "inputs": [{"index": i, "results": result_for(t)} for i, t in enumerate(texts)]}


class FakeServer:
    """Answers /v1/models and /v1/score like spinfc does; records every request; may refuse the first ones."""

    def __init__(self, refuse=(), max_inputs: int | None = None):
        self.requests: list[httpx.Request] = []
        self.refuse = list(refuse)  # (status, headers) answered to the first score calls
        self.max_inputs = max_inputs

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if request.url.path == "/v1/models":
            return httpx.Response(200, json=models_body())
        if self.refuse:
            status, headers, *code = self.refuse.pop(0)
            return httpx.Response(status, headers=headers, json={"error": {
                "message": "busy", "type": "rate_limit_error", "code": (code or ["concurrency_limit"])[0],
                "param": None}})
        sent = json.loads(request.content)
        if self.max_inputs is not None and len(sent["inputs"]) > self.max_inputs:
            return httpx.Response(400, json={"error": {"message": "too many tokens", "type": "invalid_request_error",
                                                       "code": "max_processed_tokens_exceeded", "param": None}})
        return httpx.Response(200, json=score_body(request))

    @property
    def score_calls(self) -> list[httpx.Request]:
        return [r for r in self.requests if r.url.path == "/v1/score"]


def client_for(server, **options) -> Client:
    return Client("http://spinfc.test/v1", "sekrit", http=httpx.Client(transport=httpx.MockTransport(server)),
                  **options)


def test_settings_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("SPINFC_BASE_URL", "http://example.test:9000/")
    monkeypatch.setenv("SPINFC_API_KEY", "k")
    client = Client()
    assert client.settings.base_url == "http://example.test:9000"
    assert client.settings.headers()["Authorization"] == "Bearer k"
    monkeypatch.delenv("SPINFC_BASE_URL")
    monkeypatch.delenv("SPINFC_API_KEY")
    client = Client()
    assert client.settings.base_url == "http://localhost:8000" and "Authorization" not in client.settings.headers()


def test_score_sends_the_body_with_the_key_and_answers_a_typed_response():
    server = FakeServer()
    answer = client_for(server).score({"inputs": [{"messages": [{"role": "user", "content": "hi"}]}]},
                                      scoring=SCORING)
    assert isinstance(answer, ScoreResponse)
    assert answer.inputs[0].results[0].combinations[0].options[0].p == 0.5
    (request,) = server.requests
    assert str(request.url) == "http://spinfc.test/v1/score"
    assert request.headers["authorization"] == "Bearer sekrit"
    assert json.loads(request.content)["scoring"] == SCORING


def test_a_misspelt_field_fails_before_anything_is_sent():
    server = FakeServer()
    with pytest.raises(ValueError, match="optons"):
        client_for(server).score(messages=[], scoring={"queries": [{"id": "q", "template": "<?>", "optons": []}]})
    assert server.requests == []


def test_429_waits_retry_after_and_tries_again(monkeypatch):
    waits = []
    monkeypatch.setattr("spinfc.client.sync.time.sleep", waits.append)
    server = FakeServer(refuse=[(429, {"Retry-After": "2"}), (429, {"Retry-After": "0.5"})])
    answer = client_for(server).score(inputs=[{"messages": [{"role": "user", "content": "a"}]}], scoring=SCORING)
    assert answer.inputs[0].results[0].id == "a"
    assert waits == [2.0, 0.5] and len(server.score_calls) == 3


def test_429_gives_up_after_max_retries_with_the_servers_error(monkeypatch):
    waits = []
    monkeypatch.setattr("spinfc.client.sync.time.sleep", waits.append)
    server = FakeServer(refuse=[(429, {"Retry-After": "120"})] * 10)
    with pytest.raises(SpinfcError) as raised:
        client_for(server, max_retries=3, max_wait=7).score(inputs=[], scoring=SCORING)
    assert raised.value.status == 429 and raised.value.code == "concurrency_limit"
    assert raised.value.retry_after == 120
    assert waits == [7, 7, 7] and len(server.score_calls) == 4


def test_a_warming_up_server_is_waited_for_and_a_draining_one_is_not(monkeypatch):
    waits = []
    monkeypatch.setattr("spinfc.client.sync.time.sleep", waits.append)
    server = FakeServer(refuse=[(503, {"Retry-After": "5"}, "warming_up"), (503, {"Retry-After": "1"}, "draining")])
    with pytest.raises(SpinfcError) as raised:
        client_for(server).score(inputs=[], scoring=SCORING)
    assert raised.value.code == "draining" and waits == [5.0] and len(server.score_calls) == 2


def test_an_error_that_is_not_busy_is_raised_at_once(monkeypatch):
    monkeypatch.setattr("spinfc.client.sync.time.sleep", lambda s: pytest.fail("slept"))
    server = FakeServer(refuse=[(400, {})])
    with pytest.raises(SpinfcError, match="400 concurrency_limit: busy"):
        client_for(server).score(inputs=[], scoring=SCORING)


def test_retry_after_reads_seconds_and_http_dates():
    assert retry_after({"retry-after": "3"}) == 3.0
    assert retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0  # in the past
    assert retry_after({}) is None and retry_after({"retry-after": "soon"}) is None


def test_chunks_respect_the_body_limit_and_the_count_and_cover_the_job_in_order():
    inputs = [{"messages": [{"role": "user", "content": "x" * (10 + i)}]} for i in range(100)]
    chunks = plan_chunks(inputs, {"scoring": SCORING}, LIMITS, max_inputs=16)
    assert [i for chunk in chunks for i in chunk] == list(range(100))
    for chunk in chunks:
        assert len(chunk) <= 16
        body = json.dumps({"scoring": SCORING, "inputs": inputs[chunk.start:chunk.stop]}, separators=(",", ":"))
        assert len(body) <= LIMITS["max_body_bytes"]
    assert len(chunks) > 100 // 16 + 1  # the body limit, not only the count, cut some


def test_score_many_answers_in_input_order_and_halves_a_chunk_the_server_finds_too_large():
    server = FakeServer(max_inputs=3)
    texts = [f"text {i}" for i in range(20)]
    batch = client_for(server).score_many(texts, SCORING, concurrency=4, max_inputs=8)
    assert [r.index for r in batch.inputs] == list(range(20))
    assert [r.results[0].id for r in batch.inputs] == texts
    assert batch.usage.questions == 20 and batch.usage.input_tokens == 200
    accepted = [r for r in server.score_calls if len(json.loads(r.content)["inputs"]) <= 3]
    assert batch.requests == len(accepted) and len(server.score_calls) > len(accepted)


def test_the_async_client_does_the_same():
    server = FakeServer(max_inputs=5, refuse=[(429, {"Retry-After": "0"})])

    async def main():
        http = httpx.AsyncClient(transport=httpx.MockTransport(server))
        async with AsyncClient("http://spinfc.test", http=http) as client:
            return await client.score_many([f"t{i}" for i in range(12)], SCORING, concurrency=3, max_inputs=6)

    batch = asyncio.run(main())
    assert [r.results[0].id for r in batch.inputs] == [f"t{i}" for i in range(12)]


def test_score_takes_a_request_struct_too():
    from spinfc.client import ScoreRequest
    from spinfc.wire.schemas import Message, ScoreInput, Scoring, ScoringQuery

    server = FakeServer()
    request = ScoreRequest(scoring=Scoring([ScoringQuery(id="q", template="Spam?<?>", options=[" yes"])]),
                           inputs=[ScoreInput([Message(role="user", content="hello")])])
    answer = client_for(server).score(request)
    assert answer.inputs[0].results[0].id == "hello"
    assert json.loads(server.requests[0].content)["scoring"]["queries"][0] == {
        "id": "q", "template": "Spam?<?>", "options": [" yes"]}
