"""One validator per format: the same mistake in a /v1/score body gets the same code, param and hint over HTTP
(every route that reads it), through `spinfc.compiler.load_source` and from `spinfc compile` (the body's struct and
json_body.py's words, spinfc/frontend/mistakes.py)."""

from __future__ import annotations

import json

import pytest

from spinfc.cli import main
from spinfc.compiler import load_source
from spinfc.errors import RequestError

from .unready import ready_client

HELLO = [{"role": "user", "content": "Hello"}]
QUERY = {"id": "q", "template": "\n\nIs it?\nAnswer:<?>", "options": [" yes", " no"]}
MISTAKES = {  # name -> (body, code, param, words the hint has)
    "a misspelt field": ({"messages": HELLO, "scoring": {"queries": [{**QUERY, "optons": [" a"]}]}},
                         "unknown_field", "scoring.queries[0].optons", "did you mean `options`?"),
    "a wrong type": ({"messages": HELLO, "scoring": {"queries": [{**QUERY, "options": " yes"}]}},
                     "wrong_type", "scoring.queries[0].options", "write it as a list"),
    "a missing field": ({"messages": HELLO, "scoring": {"queries": [{"template": "Is it?<?>", "options": [" a"]}]}},
                        "missing_field", "scoring.queries[0].id", "add it"),
    "a number in quotes": ({"messages": HELLO, "scoring": {"queries": [{**QUERY, "template": "Name: <*>",
                                                                       "options": None, "max_tokens": "4"}]}},
                           "wrong_type", "scoring.queries[0].max_tokens", "without quotes"),
    "a misspelt content part": ({"messages": [{"role": "user", "content": [{"type": "text", "txt": "x"}]}],
                                 "scoring": {"queries": [QUERY]}},
                                "unknown_field", "messages[0].content[0].txt", "did you mean `text`?"),
}


@pytest.fixture(scope="module")
def client():
    with ready_client() as client:
        yield client


@pytest.mark.parametrize("name", MISTAKES)
def test_the_same_mistake_reads_the_same_over_http_and_in_spinfc_compile(client, name, tmp_path, capsys) -> None:
    body, code, param, words = MISTAKES[name]
    body = {k: v for k, v in body.items()}
    with pytest.raises(RequestError) as caught:
        load_source(body, "gemma3-270m")
    compiled = caught.value
    assert (compiled.code, compiled.param) == (code, param) and words in compiled.hint, compiled

    for route in ("/v1/score", "/v1/chat/completions"):
        error = client.post(route, json=body).json()["error"]
        assert (error["code"], error["param"]) == (code, param), (route, error)
        assert error["message"] == f"{compiled.message} ({compiled.hint})", (route, error)

    request = tmp_path / "request.json"
    request.write_text(json.dumps(body))
    assert main(["compile", str(request), "--emit", "parse"]) == 2
    printed = capsys.readouterr().err
    assert f"{request}:{param}:1:1: error: {compiled.message}\n  hint: {compiled.hint}" in printed, printed


def test_the_decisions_validator_and_the_struct_use_the_same_codes(client) -> None:
    from spinfc.runtime.decisions import DecisionError, validate_decision_request

    body = {"state": "x", "questions": {"q": {"type": "noul", "instructions": "?", "criterion": "x"}}}
    with pytest.raises(DecisionError) as caught:
        validate_decision_request(body)
    error = client.post("/v1/decisions", json=body).json()["error"]
    assert (error["code"], error["param"]) == (caught.value.code, caught.value.param) == (
        "unknown_field", "questions.q.criterion")
    assert caught.value.hint in error["message"] and "did you mean `criteria`?" in error["message"]
