"""The HTTP transport's answers to the server's statuses: 429/503 retried after Retry-After (for a bounded time), 400 the
batch's fault, anything else stops the job. The server is httpx's MockTransport speaking the API's shapes."""

import asyncio
import time

import httpx
import pytest

from spinfc.bulk.errors import BulkError, Rejected
from spinfc.bulk.http_transport import HttpTransport, _retry_after
from spinfc.bulk.questions import load_questions

from .paths import QUERIES

QUESTIONS = load_questions([], QUERIES, "gemma3-270m")
RESULT = {"id": "refund", "combinations": [{"values": {}, "residual": 0.5, "options": [
    {"text": " yes", "logprob": -1.0, "p": 0.6, "floor_p": 0.5}, {"text": " no", "logprob": -1.4, "p": 0.4,
                                                                  "floor_p": 0.5}]}]}


def _transport(answers, patience=5.0):
    calls = []

    def handle(request):
        calls.append(request)
        status, headers, body = answers[min(len(calls), len(answers)) - 1]
        return httpx.Response(status, headers=headers, json=body)

    return HttpTransport(QUESTIONS, "http://server", patience=patience, http=httpx.MockTransport(handle)), calls


def _ok(n):
    return 200, {}, {"model": "gemma3-270m", "system_fingerprint": "fp", "inputs": [
        {"index": i, "results": [RESULT]} for i in range(n)]}


BUSY = (429, {"Retry-After": "0"}, {"error": {"code": "concurrency_limit", "message": "busy"}})


def test_429_is_retried_after_retry_after_then_scored():
    transport, calls = _transport([BUSY, BUSY, _ok(2)])
    results = asyncio.run(transport.score(["a", "b"]))
    assert len(calls) == 3 and len(results) == 2 and transport.fingerprint == "fp"
    assert results[0].own[0].combinations[0].options[0].p == 0.6
    body = calls[0].read()
    assert b'"inputs"' in body and b'"scoring"' in body


def test_retries_are_bounded_in_time():
    no_header = (503, {}, {"error": {"code": "warming_up", "message": "not ready"}})
    transport, calls = _transport([no_header], patience=0.3)  # no Retry-After: the first backoff, 0.5 s, is too long
    with pytest.raises(BulkError, match="503 warming_up.*stayed busy.*--resume"):
        asyncio.run(transport.score(["a"]))
    assert len(calls) == 1
    transport, calls = _transport([BUSY], patience=1.2)  # waits of 0 s: many tries, then it gives up
    began = time.monotonic()
    with pytest.raises(BulkError, match="stayed busy"):
        asyncio.run(transport.score(["a"]))
    # bounded: it gives up once its 1.2 s are spent (the margin is for a loaded host, not a speed claim)
    assert len(calls) > 2 and time.monotonic() - began < 5


def test_a_wait_longer_than_the_patience_left_gives_up_at_once():
    slow = (429, {"Retry-After": "30"}, {"error": {"code": "queue_full", "message": "queued"}})
    transport, calls = _transport([slow], patience=10)
    began = time.monotonic()
    with pytest.raises(BulkError, match="429 queue_full"):
        asyncio.run(transport.score(["a"]))
    assert len(calls) == 1 and time.monotonic() - began < 1


def test_400_rejects_the_batch_and_500_stops_the_job():
    bad = (400, {}, {"error": {"code": "max_content_tokens_exceeded", "message": "too long"}})
    transport, _ = _transport([bad])
    with pytest.raises(Rejected) as caught:
        asyncio.run(transport.score(["a"]))
    assert caught.value.code == "max_content_tokens_exceeded"
    transport, _ = _transport([(500, {}, {"error": {"code": "pass_failed", "message": "boom"}})])
    with pytest.raises(BulkError, match="--resume"):
        asyncio.run(transport.score(["a"]))


def test_retry_after_is_capped_and_falls_back_to_backoff():
    assert _retry_after(httpx.Response(429, headers={"Retry-After": "7"}), 0) == 7
    assert _retry_after(httpx.Response(429, headers={"Retry-After": "9999"}), 0) == 60
    assert _retry_after(httpx.Response(503), 3) == 4


def test_an_input_the_server_refused_alone_is_that_rows_error():
    answer = {"model": "gemma3-270m", "system_fingerprint": "fp", "inputs": [
        {"index": 0, "results": [RESULT]},
        {"index": 1, "error": {"code": "content_too_long", "message": "too long", "param": "inputs[1].messages"}}]}
    transport, calls = _transport([(200, {}, answer)])
    good, bad = asyncio.run(transport.score(["a", "b"]))
    assert len(calls) == 1 and good.error is None and good.own[0].combinations[0].options[0].p == 0.6
    assert bad.error == ("content_too_long", "too long") and bad.own == []
