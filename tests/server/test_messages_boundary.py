"""/v1/messages and the kept streams' routes before any model runs (no model: server/unready.py): Anthropic's error
envelope with its types for every refusal, the token as `x-api-key`, X-Conversation-Id's refusals, and the stream
routes' refusals, each one named error; /v1/models says which surfaces are on."""

from __future__ import annotations

import pytest
from litestar.testing import TestClient

from spinfc.config import ServerSettings, Settings
from spinfc.server.app import create_app

from .unready import no_model, ready_client

ASK = {"model": "gemma3-270m", "max_tokens": 4, "messages": [{"role": "user", "content": "Hello"}]}
SCORING = {"queries": [{"id": "q", "template": "Is it?<?>", "options": [" yes", " no"]}]}


@pytest.fixture(scope="module")
def client():
    with ready_client(Settings(server=ServerSettings(token="t0k"))) as client:
        yield client


def anthropic_error(answer, status: int) -> dict:
    assert answer.status_code == status, answer.text
    body = answer.json()
    assert set(body) == {"type", "error"} and body["type"] == "error", body
    assert "Traceback" not in answer.text
    return body["error"]


@pytest.mark.parametrize("headers, accepted", [({}, False), ({"x-api-key": "wrong"}, False),
                                               ({"x-api-key": "t0k"}, True), ({"Authorization": "Bearer t0k"}, True)])
def test_the_token_comes_as_x_api_key_or_bearer_and_a_refusal_is_anthropics(client, headers, accepted) -> None:
    answer = client.post("/v1/messages", json={**ASK, "model": "gpt-4"}, headers=headers)
    if accepted:  # past the token: the next check answers
        assert anthropic_error(answer, 400)["code"] == "model_not_served"
    else:
        error = anthropic_error(answer, 401)
        assert error["type"] == "authentication_error" and error["code"] == "invalid_token"
        assert "x-api-key" in error["message"]


KEY = {"x-api-key": "t0k"}
REFUSED = [
    ({**ASK, "max_tokens": 0}, "invalid_value", "max_tokens"),
    ({k: v for k, v in ASK.items() if k != "max_tokens"}, "missing_field", "max_tokens"),
    ({**ASK, "temperature": 1.5}, "invalid_value", "temperature"),
    ({**ASK, "top_k": 5}, "unsupported_parameter", "top_k"),
    ({**ASK, "tools": [{"name": "f"}]}, "unsupported_parameter", "tools"),
    ({**ASK, "stop_sequences": [""]}, "invalid_stop", "stop_sequences[0]"),
    ({**ASK, "max_tokens": 5000}, "max_tokens_exceeded", "max_tokens"),
    ({**ASK, "stream": True, "scoring": SCORING}, "stream_not_supported", "stream"),
    ({**ASK, "messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x"}]}]},
     "unknown_field", None),
    ({**ASK, "messages": [{"role": "user", "content": [{"type": "document"}]}]}, "unsupported_content",
     "messages[0].content[0].type"),
    ({**ASK, "messages": [{"role": "user", "content": [{"type": "image", "source": {"type": "base64"}}]}],
      "scoring": SCORING}, "missing_field", "messages[0].content[0].source.media_type"),
    ({**ASK, "messages": [{"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"}}]}]},
     "unsupported_content", "messages[0].content[0].type"),  # a generation reads text
    ({**ASK, "system": [{"type": "text"}]}, "missing_field", "system[0].text"),
    ({**ASK, "messages": []}, "empty_list", "messages"),
]


@pytest.mark.parametrize("body, code, param", REFUSED, ids=[r[1] + "-" + str(r[2]) for r in REFUSED])
def test_a_bad_body_is_one_named_error_in_anthropics_envelope(client, body, code, param) -> None:
    error = anthropic_error(client.post("/v1/messages", json=body, headers=KEY), 400)
    assert error["type"] == "invalid_request_error" and error["code"] == code, error
    if param is not None:
        assert error["param"] == param, error


@pytest.mark.parametrize("route", ["/v1/messages", "/v1/chat/completions"])
@pytest.mark.parametrize("value, stream, code", [("bad id!", True, "invalid_conversation_id"),
                                                 ("x" * 129, True, "invalid_conversation_id"),
                                                 ("conv-1", False, "conversation_id_needs_stream")])
def test_the_conversation_header_is_refused_by_name(client, route, value, stream, code) -> None:
    body = {**ASK, "stream": stream} if route == "/v1/messages" else {"messages": ASK["messages"], "stream": stream}
    answer = client.post(route, json=body, headers={**KEY, "X-Conversation-Id": value})
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["code"] == code and error["param"] == "X-Conversation-Id", error


@pytest.mark.parametrize("count", [0, 256])
def test_the_models_card_says_whether_streams_are_kept_and_the_header_is_refused_without(count) -> None:
    settings = Settings(server=ServerSettings(stream_count=count))
    with TestClient(create_app(settings, load_model=no_model)) as client:  # the card, before any model
        features = client.get("/v1/models").json()["data"][0]["features"]
    assert features["messages"] and features["resumable_streams"] == features["cancel"] == (count > 0)
    if count == 0:
        with ready_client(settings) as client:
            answer = client.post("/v1/messages", json={**ASK, "stream": True}, headers={"X-Conversation-Id": "c1"})
            assert anthropic_error(answer, 400)["code"] == "streams_disabled"


@pytest.mark.parametrize("method, path, body, status, code", [
    ("POST", "/v1/streams/lookup", {"conversation_id": "nobody"}, 404, "stream_not_found"),
    ("POST", "/v1/streams/lookup", {"conversation_id": "no spaces"}, 400, "invalid_conversation_id"),
    ("POST", "/v1/streams/lookup", {"id": "c1"}, 400, "unknown_field"),
    ("GET", "/v1/stream/nobody", None, 404, "stream_not_found"),
    ("GET", "/v1/stream/a%20b", None, 400, "invalid_conversation_id"),
    ("DELETE", "/v1/stream/nobody", None, 404, "stream_not_found"),
    ("POST", "/v1/chat/completions/control", {"conversation_id": "nobody", "action": "cancel"}, 404,
     "stream_not_found"),
    ("POST", "/v1/chat/completions/control", {"conversation_id": "c1", "action": "pause"}, 400, "invalid_value"),
])
def test_the_stream_routes_refuse_by_name(client, method, path, body, status, code) -> None:
    answer = client.request(method, path, json=body, headers=KEY)
    assert answer.status_code == status, answer.text
    assert answer.json()["error"]["code"] == code and "Traceback" not in answer.text
