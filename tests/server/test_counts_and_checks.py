"""Counts and checks that disagreed (issue 38, item 7): `/v1/completions` blames the prompt item that breaks the
form, chat refuses a role OpenAI does not have (and the schema says so), `top_p: 0` is accepted as OpenAI accepts
it (the most likely token), `spinfc quantize -o FILE` fails before any work, and `<gen>` usage counts the tokens
drawn and every token read (whether the floor was cached or not)."""

from __future__ import annotations

import time

import pytest
import torch
from litestar.testing import TestClient

from spinfc.cli import main
from spinfc.config import Settings
from spinfc.runtime.launch.generate import Sampling, pick
from spinfc.server.app import create_app

from .unready import no_model

HELLO = [{"role": "user", "content": "Hello"}]


@pytest.fixture(scope="module")
def unready():
    with TestClient(create_app(Settings(), load_model=no_model)) as client:
        yield client


def test_a_prompt_list_blames_the_item_that_breaks_its_form(unready) -> None:
    response = unready.post("/v1/completions", json={"prompt": [1, 1.5]})
    assert response.status_code == 400 and response.json()["error"]["param"] == "prompt[1]", response.text


@pytest.mark.parametrize("role", ["", "nobody"])
def test_chat_refuses_a_role_openai_does_not_have_as_the_schema_says(unready, role) -> None:
    response = unready.post("/v1/chat/completions", json={"messages": [{"role": role, "content": "hi"}]})
    error = response.json()["error"]
    assert response.status_code == 400 and error["param"] == "messages[0].role" and "'user'" in error["message"]
    schema = unready.app.openapi_schema.to_schema()["components"]["schemas"]["Message"]["properties"]["role"]
    assert role not in schema["enum"] and "user" in schema["enum"]


def test_top_p_zero_is_accepted_and_draws_the_most_likely_token(unready) -> None:
    response = unready.post("/v1/chat/completions", json={"messages": HELLO, "top_p": 0.0, "temperature": 1.0})
    assert response.status_code == 503, response.text  # past every check: only the (absent) model is missing
    logits = torch.tensor([0.1, 3.0, 2.9, -1.0])
    draws = {pick(logits, Sampling(max_tokens=1, temperature=1.0, top_p=0.0), torch.Generator().manual_seed(s))
             for s in range(20)}
    assert draws == {1}


def test_quantize_to_an_existing_file_fails_before_any_work(tmp_path, capsys) -> None:
    existing = tmp_path / "taken"
    existing.write_text("not a checkpoint")
    started = time.perf_counter()
    assert main(["quantize", "smollm2-135m", "-o", str(existing)]) == 2
    assert time.perf_counter() - started < 2.0
    assert f"-o {existing} is an existing file" in capsys.readouterr().err


@pytest.mark.slow
def test_gen_usage_counts_the_tokens_drawn_and_every_token_read() -> None:
    """The issue's reproduction: 32 tokens drawn are 32 output tokens, and the same prompt with text after the slot
    reads as many input tokens (it read 18, then 12 once the floor was cached)."""
    from spinfc.config import EngineSettings

    from .live import wait_ready

    settings = Settings(engine=EngineSettings(model="gemma3-270m", device="cpu", warmup="short"))
    with TestClient(create_app(settings), timeout=600) as client:
        wait_ready(client)

        def usage(template: str) -> tuple[dict, dict]:
            body = {"messages": [{"role": "user", "content": "Once upon a time"}],
                    "scoring": {"queries": [{"id": "story", "template": template, "max_tokens": 32,
                                             "temperature": 0.8, "seed": 1}]}}
            response = client.post("/v1/score", json=body)
            assert response.status_code == 200, response.text
            return response.json()["usage"], response.json()["results"][0]

        first, _ = usage("\n\nStory 0:<gen>")
        again, _ = usage("\n\nStory 0:<gen>")
        longer, _ = usage("\n\nStory 0:<gen>\n\nTHE END.")
        assert first["input_tokens"] == again["input_tokens"] == longer["input_tokens"] > 0
        assert 0 < first["output_tokens"] <= 32


def _valid(schema: dict, name: str, body: dict) -> bool:
    import jsonschema

    try:
        jsonschema.validate(body, {"$ref": f"#/components/schemas/{name}", "components": schema["components"]})
    except jsonschema.ValidationError:
        return False
    return True


M = [{"role": "user", "content": "hi"}]
D = {"q": {"type": "noul", "instructions": "Is it?"}}
Q = {"queries": [{"id": "a", "template": "Answer:<?>", "options": [" y", " n"]}]}
# the six bodies the published schema called valid and the server refused, and what each now is on both sides:
# top_p 0 is OpenAI's (the server takes it); logit_bias is not honoured here and one content comes from one field
# (the schema says so)
SIX = [
    ("/v1/chat/completions", "ChatRequest", {"messages": M, "top_p": 0.0}, True),
    ("/v1/completions", "CompletionRequest", {"prompt": "hi", "logit_bias": {"1": 1.0}}, False),
    ("/v1/decisions", "DecisionRequest", {"messages": [], "state": "hello", "questions": D}, False),
    ("/v1/systemone", "DecisionRequest", {"messages": [], "state": "hello", "questions": D}, False),
    ("/v1/plan", "ScoreRequest", {"inputs": [], "messages": M, "scoring": Q}, False),
    ("/v1/score", "ScoreRequest", {"inputs": [], "messages": M, "scoring": Q}, False),
]
# what each side still accepts: a null is no field, an empty logit_bias no bias
STILL_VALID = [("DecisionRequest", {"messages": None, "state": "hello", "questions": D}),
               ("ScoreRequest", {"inputs": None, "messages": M, "scoring": Q}),
               ("CompletionRequest", {"prompt": "hi", "logit_bias": {}, "n": 1, "frequency_penalty": 0.0})]


@pytest.mark.parametrize("name, body", STILL_VALID)
def test_what_the_server_takes_the_schema_still_allows(unready, name, body) -> None:
    assert _valid(unready.app.openapi_schema.to_schema(), name, body)


@pytest.mark.slow
def test_the_schema_and_the_server_agree_on_the_six_bodies() -> None:
    from spinfc.config import EngineSettings

    from .live import wait_ready

    settings = Settings(engine=EngineSettings(model="smollm2-135m", device="cpu", warmup="short"))
    with TestClient(create_app(settings), timeout=600) as client:
        wait_ready(client)
        schema = client.app.openapi_schema.to_schema()
        for path, name, body, accepted in SIX:
            if path == "/v1/chat/completions":
                body = {**body, "max_tokens": 2}
            response = client.post(path, json=body)
            assert _valid(schema, name, body) is accepted, (path, body)
            assert (response.status_code == 200) is accepted, (path, response.text)
            if not accepted:
                assert response.status_code == 400 and response.json()["error"]["code"], response.text
