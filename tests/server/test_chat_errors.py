"""/v1/chat/completions refuses what it cannot honour, in OpenAI's envelope, before any model is needed: these run
on a server whose model never loads (the request checks come before the engine's 503)."""

from __future__ import annotations

import pytest
from litestar.testing import TestClient

from spinfc.config import FeatureSettings, ServerSettings, Settings
from spinfc.server.app import create_app

HELLO = [{"role": "user", "content": "Hello"}]


def no_model(name, dtype, device):
    raise FileNotFoundError(f"no weights for {name} (this test needs none)")


@pytest.fixture(scope="module")
def client():
    with TestClient(create_app(load_model=no_model)) as client:
        yield client


def error(client: TestClient, body: dict, status: int = 400) -> dict:
    response = client.post("/v1/chat/completions", json=body)
    assert response.status_code == status, response.text
    envelope = response.json()
    assert set(envelope) == {"error"} and set(envelope["error"]) == {"message", "type", "code", "param"}
    return envelope["error"]


@pytest.mark.parametrize("body, code, param", [
    ({"messages": HELLO, "stream": True, "scoring": {"queries": []}}, "stream_not_supported", "stream"),
    ({"messages": HELLO, "stream_options": {"include_usage": True}}, "invalid_stream_options", "stream_options"),
    ({"messages": HELLO, "n": 2}, "unsupported_parameter", "n"),
    ({"messages": HELLO, "logprobs": True, "scoring": {"queries": []}}, "unsupported_parameter", "logprobs"),
    ({"messages": HELLO, "logprobs": True, "stream": True}, "unsupported_parameter", "logprobs"),
    ({"messages": HELLO, "top_logprobs": 2}, "conflicting_fields", "top_logprobs"),
    ({"messages": HELLO, "logprobs": True, "top_logprobs": 21}, "invalid_value", "top_logprobs"),
    ({"messages": HELLO, "presence_penalty": 0.5}, "unsupported_parameter", "presence_penalty"),
    ({"messages": HELLO, "stop": ""}, "invalid_stop", "stop"),
    ({"messages": HELLO, "stop": ["ok", ""]}, "invalid_stop", "stop[1]"),
    ({"messages": HELLO, "stop": [str(i) for i in range(17)]}, "invalid_stop", "stop"),
    ({"messages": HELLO, "max_tokens": 2049}, "max_tokens_exceeded", "max_tokens"),
    ({"messages": HELLO, "max_completion_tokens": 5000}, "max_tokens_exceeded", "max_completion_tokens"),
    ({"messages": HELLO, "max_tokens": 4, "max_completion_tokens": 5}, "conflicting_fields", "max_completion_tokens"),
    ({"messages": HELLO, "temperature": 2.5}, "invalid_value", "temperature"),
    ({"messages": HELLO, "top_p": -0.1}, "invalid_value", "top_p"),
    ({"messages": HELLO, "max_tokens": 0}, "invalid_value", "max_tokens"),
    ({"messages": HELLO, "max_tokens": "5"}, "wrong_type", "max_tokens"),
    ({"messages": HELLO, "seed": 2**64}, "invalid_value", "seed"),
    ({"messages": HELLO, "seed": -(2**63) - 1}, "invalid_value", "seed"),
    ({"model": "gemma3-270m"}, "missing_field", "messages"),
    ({"messages": []}, "empty_list", "messages"),
    ({"messages": [{"role": "user", "content": [{"type": "image", "text": "x"}]}]}, "unsupported_content",
     "messages[0].content[0].type"),
    ({"messages": [{"role": "user", "content": [{"type": "text"}]}]}, "missing_field", "messages[0].content[0].text"),
])
def test_refused_before_the_model_is_needed(client, body, code, param) -> None:
    got = error(client, body)
    assert (got["code"], got["param"]) == (code, param), got
    assert got["type"] == "invalid_request_error"


def test_unknown_fields_are_named(client) -> None:
    """Tools, response formats, ...: a field this server does not read is refused, never ignored."""
    got = error(client, {"messages": HELLO, "tools": []})
    assert (got["code"], got["param"]) == ("unknown_field", "tools")
    assert "the fields here are: messages" in got["message"]


def test_a_valid_request_waits_for_the_model(client) -> None:
    """Valid, so it gets as far as the engine, which this server never has."""
    assert error(client, {"messages": HELLO, "max_tokens": 4}, status=503)["code"] == "model_failed"
    assert error(client, {"messages": HELLO, "stream": True}, status=503)["code"] == "model_failed"
    scoring = {"queries": [{"id": "q", "template": "Is it? Answer:<?>", "options": [" yes", " no"]}]}
    assert error(client, {"messages": HELLO, "scoring": scoring}, status=503)["code"] == "model_failed"


def test_no_generation_refuses_generation_but_not_scoring() -> None:
    settings = Settings(features=FeatureSettings(generation=False))
    with TestClient(create_app(settings, load_model=no_model)) as client:
        got = error(client, {"messages": HELLO})
        assert got["code"] == "generation_disabled" and "--no-generation" in got["message"]
        scoring = {"queries": [{"id": "q", "template": "Is it? Answer:<?>", "options": [" yes", " no"]}]}
        assert error(client, {"messages": HELLO, "scoring": scoring}, status=503)["code"] == "model_failed"
        assert client.get("/v1/models").json()["data"][0]["features"]["generation"] is False


def test_a_trusted_call_may_turn_generation_off_and_no_one_else_may() -> None:
    settings = Settings(server=ServerSettings(trusted_token="front-end"))
    with TestClient(create_app(settings, load_model=no_model)) as client:
        body = {"messages": HELLO, "features": {"generation": False}}
        response = client.post("/v1/chat/completions", json=body, headers={"Authorization": "Bearer front-end"})
        assert response.status_code == 400 and response.json()["error"]["code"] == "generation_disabled"
        response = client.post("/v1/chat/completions", json=body)
        assert response.status_code == 403 and response.json()["error"]["param"] == "features"
