"""The HTTP boundary under hostile input (no model needed): every POST route gets a corpus of bad bodies (deep
nesting, huge numbers, wrong types, wrong media types, malformed JSON, huge texts, nulls) and must answer each with a
4xx in OpenAI's envelope, an OpenAI error type, `param` naming the field where one is at fault, and a message that
says what to do. The engine is unready.py's `Unreachable`: a body that got past the boundary checks to the engine
would be a 500 here, so these also prove that the checks run before the engine, in the routes the real server runs.
"""

from __future__ import annotations

import json

import pytest
from litestar.testing import TestClient

from spinfc.config import ServerSettings, Settings
from spinfc.server.app import create_app

from .unready import no_model, ready_client

POST_ROUTES = ("/v1/score", "/v1/chat/completions", "/v1/decisions", "/v1/systemone")
OPENAI_TYPES = {"invalid_request_error", "authentication_error", "permission_error", "not_found_error",
                "rate_limit_error", "server_error"}
# a message says what to do next: one of these words (or a did-you-mean)
REMEDIES = ("send", "add", "write", "give", "remove", "split", "use", "shorten", "start", "ask", "omit", "make",
            "check", "did you mean", "wait", "poll", "see ", "retry", "name")
HELLO = [{"role": "user", "content": "Hello"}]
QUERY = {"id": "q", "template": "\n\nIs it?\nAnswer:<?>", "options": [" yes", " no"]}


@pytest.fixture(scope="module")
def client():
    with ready_client(Settings(server=ServerSettings(trusted_token="front"))) as client:
        yield client


def deep(levels: int, opener: bytes = b"[", closer: bytes = b"]") -> bytes:
    return opener * levels + closer * levels


HUGE = "Is this about the weather? " * 70_000  # 1.9 MB, under the 2 MB body limit
RAW_CORPUS = {  # name -> (body bytes, content type)
    "array nested 10,000 deep (20 KB)": (deep(10_000), "application/json"),
    "object nested 5,000 deep": (b'{"a":' * 5000 + b"1" + b"}" * 5000, "application/json"),
    "deep inside a field": (b'{"messages": [], "limits": {"x": ' + deep(100) + b"}}", "application/json"),
    "deep and truncated": (b"[" * 100_000, "application/json"),
    "truncated": (b'{"messages": [{"role": "user", "content": "hi"}', "application/json"),
    "trailing garbage": (b'{"messages": []} x', "application/json"),
    "not JSON": (b"messages=hello", "application/json"),
    "invalid UTF-8": (b'{"messages": "\xff\xfe"}', "application/json"),
    "NaN": (b'{"messages": NaN}', "application/json"),
    "a number past float range": (b'{"messages": [], "temperature": 1e400}', "application/json"),
    "text/plain": (b'{"messages": []}', "text/plain"),
    "no Content-Type": (b'{"messages": []}', None),
    "multipart": (b'--x\r\nContent-Disposition: form-data; name="a"\r\n\r\n1\r\n--x--',
                  "multipart/form-data; boundary=x"),
    "XML": (b"<messages/>", "application/xml"),
    "form": (b"messages=1", "application/x-www-form-urlencoded"),
    "empty body": (b"", "application/json"),
}
JSON_CORPUS = {  # name -> a body sent as application/json
    "null body": None,
    "a list body": [1, 2],
    "a string body": "hello",
    "empty object": {},
    "messages null": {"messages": None},
    "a null message": {"messages": [None]},
    "content null": {"messages": [{"role": "user", "content": None}]},
    "role a number": {"messages": [{"role": 1, "content": "x"}]},
    "messages a string": {"messages": "hello"},
    "max_tokens a string": {"messages": HELLO, "max_tokens": "5"},
    "temperature a string": {"messages": HELLO, "temperature": "0.5"},
    "stream a string": {"messages": HELLO, "stream": "true"},
    "seed 2**64": {"messages": HELLO, "seed": 2**64},
    "seed 2**100": {"messages": HELLO, "seed": 2**100},
    "seed -2**63-1": {"messages": HELLO, "seed": -(2**63) - 1},
    "max_tokens 2**64": {"messages": HELLO, "max_tokens": 2**64},
    "misspelt field": {"messages": HELLO, "scoring": {"queries": [{**QUERY, "optons": [" a"]}]}},
    "options a string": {"messages": HELLO, "scoring": {"queries": [{**QUERY, "options": " yes"}]}},
    "questions a list": {"state": "x", "questions": [{"type": "noul"}]},
    "criteria a number": {"state": "x", "questions": {"q": {"type": "noul", "instructions": "?", "criteria": 3}}},
    "a 1.9 MB template": {"messages": HELLO, "state": "x",
                          "scoring": {"queries": [{**QUERY, "template": HUGE + "Answer:<?>"}]},
                          "questions": {"q": {"type": "noul", "instructions": HUGE}}},
    "a 1.9 MB content": {"messages": [{"role": "user", "content": HUGE}], "scoring": {"queries": [QUERY]},
                         "state": HUGE, "questions": {"q": {"type": "noul", "instructions": "?"}}},
    "a long option": {"messages": HELLO, "scoring": {"queries": [{**QUERY, "options": [" yes", "n" * 5000]}]}},
    "100,000 options": {"messages": HELLO, "scoring": {"queries": [{**QUERY, "options": [
        f" {i}" for i in range(100_000)]}]}},
    "a million-question grid": {"messages": HELLO, "scoring": {"queries": [{
        **QUERY, "template": "{a}{b}{c}?<?>", "placeholders": {k: [str(i) for i in range(100)] for k in "abc"}}]}},
    "limits from an untrusted caller": {"messages": HELLO, "scoring": {"queries": [QUERY]}, "state": "x",
                                        "questions": {"q": {"type": "noul", "instructions": "?"}},
                                        "limits": {"max_options": 2}},
}


def check_refusal(response) -> dict:
    """A 4xx in the envelope, with an OpenAI type and a message that says what to do; returns the error."""
    assert 400 <= response.status_code < 500, (response.status_code, response.text[:300])
    envelope = response.json()
    assert set(envelope) == {"error"} and set(envelope["error"]) == {"message", "type", "code", "param"}, envelope
    error = envelope["error"]
    assert error["type"] in OPENAI_TYPES and error["code"] and error["message"], error
    assert any(word in error["message"].lower() for word in REMEDIES), error
    assert "Traceback" not in error["message"] and "Expected `" not in error["message"], error
    return error


@pytest.mark.parametrize("route", POST_ROUTES)
@pytest.mark.parametrize("name", RAW_CORPUS)
def test_raw_hostile_bodies_are_refused_in_the_envelope(client, route, name) -> None:
    body, content_type = RAW_CORPUS[name]
    headers = {"Content-Type": content_type} if content_type else {}
    check_refusal(client.post(route, content=body, headers=headers))


@pytest.mark.parametrize("route", POST_ROUTES)
@pytest.mark.parametrize("name", JSON_CORPUS)
def test_hostile_json_bodies_are_refused_in_the_envelope(client, route, name) -> None:
    error = check_refusal(client.post(route, content=json.dumps(JSON_CORPUS[name]),
                                      headers={"Content-Type": "application/json"}))
    if error["code"] in ("unknown_field", "missing_field", "wrong_type", "invalid_value", "empty_list") \
            and name not in ("null body", "a list body", "a string body"):
        assert error["param"], error  # a field is at fault: it is named


@pytest.mark.parametrize("route, body, status, code, param", [
    ("/v1/chat/completions", {"messages": HELLO, "max_tokens": "5"}, 400, "wrong_type", "max_tokens"),
    ("/v1/chat/completions", {"messages": HELLO, "seed": 2**64}, 400, "invalid_value", "seed"),
    ("/v1/chat/completions", {"messages": HELLO, "temperature": 3}, 400, "invalid_value", "temperature"),
    ("/v1/chat/completions", {"messages": None}, 400, "wrong_type", "messages"),
    ("/v1/chat/completions", {}, 400, "missing_field", "messages"),
    ("/v1/score", {"messages": [{"role": "user", "content": [{"type": "text", "txt": "x"}]}]}, 400,
     "unknown_field", "messages[0].content[0].txt"),
    ("/v1/score", {"messages": HELLO, "scoring": {"queries": [{**QUERY, "placeholders": {"p": [1]}}]}}, 400,
     "wrong_type", "scoring.queries[0].placeholders.p[0]"),
    ("/v1/decisions", {"state": "x", "questions": {"ok": {"type": "noul", "instructions": "?"},
                                                   "refund": {"type": 1, "instructions": "?"}}}, 400,
     "wrong_type", "questions.refund.type"),
    ("/v1/decisions", {"state": "x", "questions": {"q": {"type": "noul", "instructions": "?", "criterion": ""}}},
     400, "unknown_field", "questions.q.criterion"),
    ("/v1/score", {"messages": HELLO, "scoring": {"queries": [{**QUERY, "template": HUGE + "<?>"}]}}, 400,
     "max_query_tokens_exceeded", "scoring.queries[0].template"),
    ("/v1/score", {"messages": [{"role": "user", "content": HUGE}], "scoring": {"queries": [QUERY]}}, 400,
     "max_content_tokens_exceeded", "messages"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": HUGE}]}, 400,
     "max_content_tokens_exceeded", "messages"),
    ("/v1/decisions", {"state": HUGE, "questions": {"q": {"type": "noul", "instructions": "?"}}}, 400,
     "max_content_tokens_exceeded", "state"),
    ("/v1/decisions", {"state": "x", "questions": {"q": {"type": "noul", "instructions": HUGE}}}, 400,
     "max_query_tokens_exceeded", "questions.q.instructions"),
    ("/v1/score", JSON_CORPUS["a long option"], 400, "max_option_tokens_exceeded", "scoring.queries[0].options[1]"),
    ("/v1/score", JSON_CORPUS["100,000 options"], 400, "max_options_exceeded", "scoring.queries[0].options"),
    ("/v1/score", JSON_CORPUS["a million-question grid"], 400, "max_prompts_per_input_exceeded", "scoring.queries"),
    ("/v1/score", {"messages": "x" * 2_100_000}, 413, "max_body_bytes_exceeded", None),
])
def test_each_mistake_has_its_code_and_path(client, route, body, status, code, param) -> None:
    response = client.post(route, json=body)
    assert response.status_code == status, response.text[:300]
    error = check_refusal(response)
    assert (error["code"], error["param"]) == (code, param), error


def test_a_text_over_a_token_limit_is_refused_on_its_characters_with_the_reason(client) -> None:
    body = {"messages": HELLO, "scoring": {"queries": [{**QUERY, "template": HUGE + "<?>"}]}}
    error = client.post("/v1/score", json=body).json()["error"]
    assert error["message"].startswith("scoring.queries[0].template: at least 60,968 tokens in one filled query "
                                       "template (1,890,003 characters, and no token of this model covers more "
                                       "than 31), over the server's limit of 256 (max_query_tokens)"), error


def test_the_media_type_and_the_body_size_are_named(client) -> None:
    error = check_refusal(client.post("/v1/score", content=b"{}", headers={"Content-Type": "text/plain"}))
    assert client.post("/v1/score", content=b"{}", headers={"Content-Type": "text/plain"}).status_code == 415
    assert error["code"] == "unsupported_media_type" and "Content-Type: application/json" in error["message"]
    ok = client.post("/v1/score", content=b'{"messages": 1}',
                     headers={"Content-Type": "Application/JSON; charset=utf-8"})
    assert ok.json()["error"]["code"] == "wrong_type"  # a charset parameter is fine
    big = client.post("/v1/score", content=b"x" * 10, headers={"Content-Type": "application/json",
                                                                "Content-Length": str(3_000_000)})
    assert big.status_code == 413 and big.json()["error"]["code"] == "max_body_bytes_exceeded"


def test_malformed_json_says_where(client) -> None:
    error = check_refusal(client.post("/v1/score", content=b'{\n  "messages": [,]\n}',
                                      headers={"Content-Type": "application/json"}))
    assert error["code"] == "invalid_json" and "line 2, column 16" in error["message"], error


def test_the_token_is_checked_before_the_body_is_read() -> None:
    app = create_app(Settings(server=ServerSettings(token="s3cret")), load_model=no_model)
    with TestClient(app) as client:
        for body, content_type in RAW_CORPUS.values():
            response = client.post("/v1/score", content=body, headers={"Content-Type": content_type or ""})
            assert response.status_code == 401 and response.json()["error"]["type"] == "authentication_error"


def test_unknown_routes_and_methods_say_what_exists(client) -> None:
    missing = check_refusal(client.get("/v1/nothing"))
    assert missing["code"] == "not_found" and missing["type"] == "not_found_error"
    wrong = check_refusal(client.get("/v1/score"))
    assert wrong["code"] == "method_not_allowed" and "POST" in wrong["message"]
