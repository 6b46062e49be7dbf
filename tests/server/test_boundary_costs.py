"""A maximal hostile body (just under --max-body-bytes) is refused in milliseconds of CPU and leaves memory as it found it:
the size, depth and type checks and the character and count limits run before anything is parsed or tokenized
(the real server's routes, an engine that fails if reached: unready.py)."""

from __future__ import annotations

import json
import time

import pytest

from spinfc.config import Limits

from packaged import load_shared

from .unready import ready_client

BUDGET = Limits().max_body_bytes - 1000  # bytes of text, so that the body stays under the default limit
HELLO = [{"role": "user", "content": "Hello"}]
QUERY = {"id": "q", "template": "\n\nIs it?\nAnswer:<?>", "options": [" yes", " no"]}
SENTENCE = "Is this about the weather? "
TEXT = SENTENCE * (BUDGET // len(SENTENCE))
MAXIMAL = {  # name -> (route, body bytes)
    "a template of 1.9 MB": ("/v1/score", {"messages": HELLO, "scoring": {"queries": [
        {**QUERY, "template": TEXT + "Answer:<?>"}]}}),
    "a content of 1.9 MB": ("/v1/score", {"messages": [{"role": "user", "content": TEXT}],
                                          "scoring": {"queries": [QUERY]}}),
    "a chat prompt of 1.9 MB": ("/v1/chat/completions", {"messages": [{"role": "user", "content": TEXT}]}),
    "a decision of 1.9 MB": ("/v1/decisions", {"state": "x", "questions": {
        "q": {"type": "noul", "instructions": TEXT}}}),
    "a placeholder grid of 2 MB": ("/v1/score", {"messages": HELLO, "scoring": {"queries": [
        {**QUERY, "template": "{a}<?>", "placeholders": {"a": [f"v{i}" for i in range(BUDGET // 11)]}}]}}),
    "180,000 options": ("/v1/score", {"messages": HELLO, "scoring": {"queries": [
        {**QUERY, "options": [f" {i}" for i in range(BUDGET // 11)]}]}}),
    "nesting 1,000,000 deep": ("/v1/score", "[" * (BUDGET // 2) + "]" * (BUDGET // 2)),
    "400,000 wrong types": ("/v1/score", {"messages": HELLO, "scoring": {"queries": [
        {**QUERY, "options": [" yes"] * (BUDGET // 9) + [1]}]}}),
}
ENCODED = {name: (route, body.encode() if isinstance(body, str) else json.dumps(body).encode())
           for name, (route, body) in MAXIMAL.items()}


def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096


@pytest.fixture(scope="module")
def client():
    with ready_client() as client:
        for route, body in ENCODED.values():  # warm: first-call imports and allocator pools are not the request's
            client.post(route, content=body, headers={"Content-Type": "application/json"})
        yield client


@pytest.mark.parametrize("name", MAXIMAL)
def test_a_maximal_hostile_body_is_refused_in_milliseconds(client, name) -> None:
    route, body = ENCODED[name]
    assert len(body) < Limits().max_body_bytes
    # the CPU this process (the app and its client) spends on the request: a wall clock also counts the other
    # processes of a loaded machine (195 ms of wall once, at load 15 beside a second test worker)
    started = time.process_time()
    response = client.post(route, content=body, headers={"Content-Type": "application/json"})
    seconds = time.process_time() - started
    assert response.status_code == 400, response.text[:300]
    assert seconds < 0.1, f"{name}: refused in {seconds * 1000:.0f} ms of CPU ({response.json()['error']['code']})"


def test_hostile_bodies_leave_memory_as_they_found_it(client) -> None:
    before = rss_bytes()
    for _ in range(5):
        for route, body in ENCODED.values():
            assert client.post(route, content=body, headers={"Content-Type": "application/json"}).status_code == 400
    grown = rss_bytes() - before
    assert grown < 64 * 2**20, f"RSS grew {grown / 2**20:.0f} MB over 40 hostile bodies"


@pytest.mark.slow
def test_the_real_server_refuses_a_hostile_template_before_tokenizing() -> None:
    """On gemma3-270m: the bound comes from its own vocabulary (31 characters), read when the model loads."""
    from litestar.testing import TestClient

    from spinfc.config import EngineSettings, Settings
    from spinfc.server.app import create_app

    from .live import wait_ready

    settings = Settings(engine=EngineSettings(model="gemma3-270m", device="cpu", token_budget=512, warmup="none"))
    app = create_app(settings, load_model=load_shared)
    with TestClient(app, timeout=600) as client:
        wait_ready(client)
        assert app.state.service.longest_token == 31
        route, body = ENCODED["a template of 1.9 MB"]
        client.post(route, content=body, headers={"Content-Type": "application/json"})  # first-call imports
        started = time.perf_counter()
        response = client.post(route, content=body, headers={"Content-Type": "application/json"})
        seconds = time.perf_counter() - started
    error = response.json()["error"]
    assert error["code"] == "max_query_tokens_exceeded" and "31" in error["message"], error
    assert seconds < 0.1, f"refused in {seconds * 1000:.0f} ms"
