"""Anthropic's Python SDK against a live server (uvicorn on a free port, the real gemma3-270m on the CPU):
`messages.create` and `messages.stream` generate the same greedy answer, stop sequences end it by name, the
`scoring` block scores through `extra_body` as chat's does, and errors come as the SDK's own exceptions. One
server for the module; a few tokens per generation."""

from __future__ import annotations

import anthropic
import httpx
import pytest

from spinfc.config import EngineSettings, FeatureSettings, ServerSettings, Settings
from spinfc.server.app import create_app

from packaged import load_shared

from .live import live_server

pytestmark = pytest.mark.slow  # a live server on gemma3-270m

TOKEN = "sdk-token"
QUESTION = [{"role": "user", "content": "What is the capital of France?"}]
GREEDY = {"temperature": 0}  # recent SDKs take no `temperature` argument: the body field, through extra_body
TICKET = "Customer support message:\nI was charged twice for September, please refund one of the charges."
SCORING = {"queries": [
    {"id": "refund", "template": "\n\nIs the customer asking for a refund?\nAnswer:{?}", "options": [" yes", " no"]}]}


@pytest.fixture(scope="module")
def base_url():
    settings = Settings(engine=EngineSettings(model="gemma3-270m", device="cpu", token_budget=512, warmup="short"),
                        server=ServerSettings(token=TOKEN), features=FeatureSettings(extraction=False))
    with live_server(create_app(settings, load_model=load_shared)) as url:
        yield url


@pytest.fixture(scope="module")
def client(base_url) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=base_url, api_key=TOKEN, max_retries=0, timeout=300)  # sent as x-api-key


def ask(client, **fields):
    return client.messages.create(model="gemma3-270m", messages=QUESTION, max_tokens=6, extra_body=GREEDY, **fields)


@pytest.fixture(scope="module")
def created(client):
    return ask(client)


def test_create_answers_a_message(created, base_url) -> None:
    assert created.type == "message" and created.role == "assistant" and created.model == "gemma3-270m"
    assert created.id.startswith("msg_") and len(created.content) == 1 and created.content[0].type == "text"
    assert "Paris" in created.content[0].text
    assert created.stop_reason in ("end_turn", "max_tokens") and created.stop_sequence is None
    assert created.usage.input_tokens > 0 and 0 < created.usage.output_tokens <= 6
    plain = httpx.post(f"{base_url}/v1/chat/completions", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=300,
                       json={"messages": QUESTION, "max_tokens": 6, "temperature": 0}).json()
    assert plain["choices"][0]["message"]["content"] == created.content[0].text  # one generation path


def test_stream_sends_the_same_answer_as_anthropics_events(client, created) -> None:
    with client.messages.stream(model="gemma3-270m", messages=QUESTION, max_tokens=6, extra_body=GREEDY) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_message()
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    assert {"content_block_start", "content_block_stop", "message_delta"} <= set(kinds) and "text" in kinds
    assert final.content[0].text == created.content[0].text and final.stop_reason == created.stop_reason
    assert final.usage.output_tokens == created.usage.output_tokens
    assert final.usage.input_tokens == created.usage.input_tokens


def test_a_stop_sequence_ends_the_answer_and_is_named(client, created) -> None:
    words = created.content[0].text.split()
    answer = ask(client, stop_sequences=["nothing like this", words[-1]])
    assert answer.stop_reason == "stop_sequence" and answer.stop_sequence == words[-1]
    assert answer.content[0].text == created.content[0].text[:created.content[0].text.index(words[-1])].rstrip()


def test_scoring_through_extra_body_answers_the_scores_and_generates_nothing(client, base_url) -> None:
    scored = client.messages.create(model="gemma3-270m", max_tokens=1, system="You read support tickets.",
                                    messages=[{"role": "user", "content": TICKET}], extra_body={"scoring": SCORING})
    assert scored.content == [] and scored.stop_reason == "end_turn" and scored.usage.output_tokens == 0
    (refund,) = scored.model_extra["scoring"]
    options = {o["text"]: o["p"] for o in refund["combinations"][0]["options"]}
    same = httpx.post(f"{base_url}/v1/score", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=300, json={
        "messages": [{"role": "system", "content": "You read support tickets."}, {"role": "user", "content": TICKET}],
        "scoring": SCORING}).json()["results"][0]
    # /v1/score's numbers (its read of the same content comes from the content cache: float32 rounding apart)
    assert options == pytest.approx({o["text"]: o["p"] for o in same["combinations"][0]["options"]}, abs=1e-5)


def test_errors_are_the_sdks_own_exceptions(client, base_url) -> None:
    with pytest.raises(anthropic.BadRequestError) as bad:
        client.messages.create(model="gpt-4", max_tokens=4, messages=QUESTION)
    assert bad.value.body["error"]["code"] == "model_not_served" and bad.value.status_code == 400
    stranger = anthropic.Anthropic(base_url=base_url, api_key="not-the-token", max_retries=0, timeout=60)
    with pytest.raises(anthropic.AuthenticationError) as denied:
        stranger.messages.create(model="gemma3-270m", max_tokens=4, messages=QUESTION)
    assert denied.value.body["error"]["type"] == "authentication_error"
    with pytest.raises(anthropic.BadRequestError) as refused:
        client.messages.create(model="gemma3-270m", max_tokens=4, messages=QUESTION,
                               tools=[{"name": "f", "input_schema": {"type": "object"}}])
    assert refused.value.body["error"]["code"] == "unsupported_parameter"
