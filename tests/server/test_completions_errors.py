"""/v1/completions refuses what it cannot honour, in OpenAI's envelope, before any model is needed (a server whose
model never loads: the request checks come before the engine's 503); and the pieces that build its answer."""

from __future__ import annotations

import pytest
from litestar.testing import TestClient

from spinfc.runtime.launch.prompt_logprobs import PromptScores
from spinfc.server.app import create_app
from spinfc.server.logprobs import completion_logprobs, offsets
from spinfc.server.routes.completions import prompt_forms

from .test_chat_errors import no_model


@pytest.fixture(scope="module")
def client():
    with TestClient(create_app(load_model=no_model)) as client:
        yield client


@pytest.mark.parametrize("body, code, param", [
    ({"prompt": []}, "invalid_prompt", "prompt"),
    ({"prompt": [[1, 2], 3]}, "invalid_prompt", "prompt[1]"),
    ({"prompt": ["ok", [1, 2.5]]}, "invalid_prompt", "prompt[1]"),
    ({"prompt": [True, False]}, "invalid_prompt", "prompt[0]"),
    ({"prompt": [[1, 2], "a"]}, "invalid_prompt", "prompt[1]"),  # one form a request
    ({"prompt": ["a", [1, 2]]}, "invalid_prompt", "prompt[1]"),
    ({"prompt": ["a"] * 4097}, "too_many_prompts", "prompt"),
    ({"prompt": "x", "seed": 2**64}, "invalid_value", "seed"),
    ({"prompt": "x", "seed": -2**63 - 1}, "invalid_value", "seed"),
    ({"prompt": "x", "n": 2}, "unsupported_parameter", "n"),
    ({"prompt": "x", "best_of": 3}, "unsupported_parameter", "best_of"),
    ({"prompt": "x", "stream": True}, "unsupported_parameter", "stream"),
    ({"prompt": "x", "suffix": "y"}, "unsupported_parameter", "suffix"),
    ({"prompt": "x", "logit_bias": {"5": 1.0}}, "unsupported_parameter", "logit_bias"),
    ({"prompt": "x", "max_tokens": 5000}, "max_tokens_exceeded", "max_tokens"),
    ({"prompt": "x", "stop": ""}, "invalid_stop", "stop"),
    ({"prompt": "x", "logprobs": 21}, "invalid_value", "logprobs"),
    ({"prompt": "x", "max_tokens": -1}, "invalid_value", "max_tokens"),
    ({"prompt": "x", "tools": []}, "unknown_field", "tools"),
])
def test_refused_before_the_model_is_needed(client, body, code, param) -> None:
    response = client.post("/v1/completions", json=body)
    assert response.status_code == 400, response.text
    got = response.json()["error"]
    assert got["code"] == code, got
    if code == "invalid_request_body":
        assert param in f"{got['message']} {got['param']}", got
    else:
        assert got["param"] == param, got


def test_a_valid_request_waits_for_the_model(client) -> None:
    response = client.post("/v1/completions", json={"prompt": "x", "echo": True, "logprobs": 1, "max_tokens": 0})
    assert response.status_code == 503 and response.json()["error"]["code"] == "model_failed"


def test_prompt_forms():
    assert prompt_forms("a") == ["a"]
    assert prompt_forms(["a", "b"]) == ["a", "b"]
    assert prompt_forms([1, 2, 3]) == [[1, 2, 3]]
    assert prompt_forms([[1], [2, 3]]) == [[1], [2, 3]]


def test_text_offsets_walk_the_text_and_skip_pieces_it_does_not_hold():
    assert offsets("The cat", ["<bos>", "The", " cat"]) == [0, 0, 3]
    assert offsets("é!", ["\ufffd", "\ufffd", "!"]) == [0, 0, 1]  # a character split across two tokens
    assert offsets("ab cd", [" cd"], start=2) == [2]


class Pieces(dict):
    def __getitem__(self, token):
        return {1: "<bos>", 2: "The", 3: " cat", 4: " dog", 5: "!"}[token]


def test_completion_logprobs_put_the_chosen_token_beside_the_top_ones():
    scores = PromptScores(tokens=(1, 2, 3), logprobs=(-1.0, -2.0),
                          top=(((2, -1.0), (4, -1.5)), ((4, -0.5), (5, -0.9)), ((5, -0.1),)))
    got = completion_logprobs("The cat", Pieces(), scores, len("The cat"), (), top=1)
    assert got.tokens == ["<bos>", "The", " cat"]
    assert got.token_logprobs == [None, -1.0, -2.0]
    assert got.top_logprobs == [None, {"The": -1.0}, {" dog": -0.5, " cat": -2.0}]
    assert got.text_offset == [0, 0, 3]
