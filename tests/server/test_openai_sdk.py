"""The official `openai` Python SDK against a live server (uvicorn on a free port, the real gemma3-270m on the CPU):
scoring through `extra_body`, greedy and sampled generation, max_tokens and stop strings, /v1/models, and errors
in OpenAI's envelope as the SDK raises them. One server for the module; a few tokens per generation."""

from __future__ import annotations

import socket
import threading
import time

import httpx
import openai
import pytest
import uvicorn

from spinfc.config import EngineSettings, Settings
from spinfc.server.app import create_app

from packaged import load_shared

pytestmark = pytest.mark.slow  # loads a packaged model

TICKET = "Customer support message:\nI was charged twice for September, please refund one of the charges."
SCORING = {"queries": [
    {"id": "refund", "template": "\n\nIs the customer asking for a refund?\nAnswer:{?}", "options": [" yes", " no"]},
    {"id": "topic", "template": "\n\nTopic (billing, technical or shipping):<?>",
     "options": [" billing", " technical", " shipping"]},
]}
QUESTION = [{"role": "user", "content": "What is the capital of France?"}]


@pytest.fixture(scope="module")
def live():
    """(http://127.0.0.1:<port>, the app's Service) of a live server, once /readyz answers 200."""
    settings = Settings(engine=EngineSettings(model="gemma3-270m", device="cpu", token_budget=512, warmup="short"))
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    app = create_app(settings, load_model=load_shared)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="uvicorn-test", daemon=True)
    thread.start()
    deadline = time.monotonic() + 600
    while True:
        try:
            if httpx.get(f"{url}/readyz", timeout=5).status_code == 200:
                break
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline and thread.is_alive(), "the server did not become ready"
        time.sleep(0.5)
    yield url, app.state.service
    server.should_exit = True
    thread.join(timeout=60)
    sock.close()


@pytest.fixture(scope="module")
def base_url(live) -> str:
    return live[0]


@pytest.fixture(scope="module")
def client(base_url) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{base_url}/v1", api_key="not-needed", max_retries=0, timeout=300)


def ask(client: openai.OpenAI, **fields):
    return client.chat.completions.create(model="gemma3-270m", messages=QUESTION, **fields)


@pytest.fixture(scope="module")
def greedy(client):
    """The greedy answer to QUESTION in 5 tokens."""
    return ask(client, temperature=0, max_tokens=5)


def test_models_lists_the_served_model_its_aliases_features_and_limits(client) -> None:
    (card,) = client.models.list().data
    assert card.id == "gemma3-270m"
    extra = card.model_extra
    assert "google/gemma-3-270m" in extra["aliases"] and extra["ready"] is True
    assert extra["features"] == {"scoring": True, "extraction": True, "generation": True, "messages": True,
                                 "resumable_streams": True, "cancel": True}
    assert extra["limits"]["max_completion_tokens"] == 2048 and extra["limits"]["token_budget"] == 512


def test_models_retrieve_answers_under_every_served_name(client) -> None:
    """OpenAI's `models.retrieve` (GET /v1/models/{id}): the card of /v1/models, under the name or an alias (one
    with a `/` too); another name is 404 model_not_found in the error envelope."""
    (card,) = client.models.list().data
    for name in ("gemma3-270m", "google/gemma-3-270m"):
        got = client.models.retrieve(name)
        assert got.id == card.id and got.model_extra["limits"] == card.model_extra["limits"]
    with pytest.raises(openai.NotFoundError) as raised:
        client.models.retrieve("gpt-4o")
    assert raised.value.body["code"] == "model_not_found" and "gemma3-270m" in raised.value.body["message"]


def test_generations_are_the_engines_work(live) -> None:
    service = live[1]
    assert service.generator.engine is service.engine  # a generation's steps take turns in the engine's loop


def test_scoring_through_extra_body_equals_v1_score(client, base_url) -> None:
    messages = [{"role": "user", "content": TICKET}]
    answer = client.chat.completions.create(model="gemma3-270m", messages=messages, extra_body={"scoring": SCORING})
    (choice,) = answer.choices
    assert choice.message.role == "assistant" and choice.message.content == "" and choice.finish_reason == "stop"
    assert answer.object == "chat.completion" and answer.id.startswith("chatcmpl-")
    assert answer.usage.completion_tokens == 0 and answer.usage.prompt_tokens == answer.usage.total_tokens > 0
    scored = httpx.post(f"{base_url}/v1/score", json={"model": "gemma3-270m", "messages": messages,
                                                      "scoring": SCORING}, timeout=300).json()
    assert answer.system_fingerprint == scored["system_fingerprint"]
    got = answer.model_extra["scoring"]
    assert [r["id"] for r in got] == ["refund", "topic"]
    for mine, theirs in zip(got, scored["results"]):
        for a, b in zip(mine["combinations"][0]["options"], theirs["combinations"][0]["options"]):
            # equal up to float32 rounding: on the CPU a pass is trimmed to the blocks it uses, and the first of the
            # two requests also carried the (then cached) floor, so their passes had different shapes
            assert a["text"] == b["text"] and a["logprob"] == pytest.approx(b["logprob"], abs=1e-4)
            assert a["floor_p"] == b["floor_p"]
    refund = {o["text"]: o["p"] for o in got[0]["combinations"][0]["options"]}
    assert abs(sum(refund.values()) - 1) < 1e-6


@pytest.mark.slow
def test_the_seed_example_on_a_live_server_and_through_extra_body(client, base_url) -> None:
    """The seed README's complete request (two classifications and `month`, the `{*}` spelling, from one read) on
    /v1/score, every field of its extraction answer, and its `month` query in `scoring` of a chat completion with
    `<*>`: 200, the same answers both ways. (The suite's one run of the seed's extraction on gemma3-270m.)"""
    messages = [{"role": "user", "content": TICKET}]
    seed = {"model": "gemma3-270m", "messages": messages, "scoring": {"queries": [
        {"id": "topic", "template": "\n\nTopic (billing, technical, account, shipping, or cancellation):{?}",
         "options": [" billing", " technical", " account", " shipping", " cancellation"]},
        {"id": "refund", "template": "\n\nIs the customer asking for a refund?\nAnswer:{?}",
         "options": [" yes", " no"]},
        {"id": "month", "template": "\n\nQ: Which month was charged twice?\nA: \"{*}\""}]}}
    response = httpx.post(f"{base_url}/v1/score", json=seed, timeout=600)
    assert response.status_code == 200, response.text
    results = {r["id"]: r["combinations"][0] for r in response.json()["results"]}
    assert set(results) == {"topic", "refund", "month"}
    assert len(results["topic"]["options"]) == 5 and len(results["refund"]["options"]) == 2
    answers = results["month"]["answers"]
    assert 1 <= len(answers) <= 4 and "options" not in results["month"] and 0 < results["month"]["coverage"] <= 1
    assert abs(sum(a["p"] for a in answers) - 1) < 1e-6 and abs(sum(a["floor_p"] for a in answers) - 1) < 1e-6
    assert [a["logprob"] for a in answers] == sorted((a["logprob"] for a in answers), reverse=True)
    assert all('"' not in a["text"] and a["text"] for a in answers)
    month = {"id": "month", "template": "\n\nQ: Which month was charged twice?\nA: \"<*>\""}
    answer = client.chat.completions.create(model="gemma3-270m", messages=messages,
                                            extra_body={"scoring": {"queries": [month]}})
    (got,) = answer.model_extra["scoring"]
    assert [a["text"] for a in got["combinations"][0]["answers"]] == [a["text"] for a in answers]


def test_packs_through_extra_body(client) -> None:
    review = [{"role": "user", "content": "The kettle broke after two days. Terrible, I want my money back."}]
    answer = client.chat.completions.create(model="gemma3-270m", messages=review,
                                            extra_body={"packs": [{"id": "spinfc/review-sentiment"}]})
    assert answer.choices[0].message.content == "" and answer.model_extra["scoring"] == []
    (pack,) = answer.model_extra["packs"]
    assert pack["id"] == "spinfc/review-sentiment" and pack["categories"] and pack["results"]
    assert answer.usage.questions == sum(len(r["combinations"]) for r in pack["results"])  # one content


def test_greedy_is_deterministic_and_honours_max_tokens(client, greedy) -> None:
    (choice,) = greedy.choices
    assert choice.finish_reason == "length" and choice.message.content
    assert greedy.usage.completion_tokens == 5
    assert greedy.usage.total_tokens == greedy.usage.prompt_tokens + 5
    again = ask(client, temperature=0, max_tokens=5)
    assert again.choices[0].message.content == choice.message.content
    assert greedy.system_fingerprint.startswith("spinfc-") and again.system_fingerprint == greedy.system_fingerprint


def test_stop_strings_end_the_answer_before_them(client, greedy) -> None:
    text = greedy.choices[0].message.content
    words = text.split()
    assert len(words) >= 2, text
    stop = " " + words[1]  # the answer ends before its second word
    for sent in (stop, [stop, "no such text"]):
        cut = ask(client, temperature=0, max_tokens=5, stop=sent)
        assert cut.choices[0].finish_reason == "stop"
        assert cut.choices[0].message.content == text[:text.index(stop)].strip()
        assert cut.usage.completion_tokens < 5


def test_streamed_answers_join_to_the_whole_answer(client, greedy) -> None:
    text = greedy.choices[0].message.content
    chunks = list(ask(client, temperature=0, max_tokens=5, stream=True, stream_options={"include_usage": True}))
    assert {c.id for c in chunks} == {chunks[0].id} and chunks[0].object == "chat.completion.chunk"
    assert chunks[0].choices[0].delta.role == "assistant"
    pieces = [c.choices[0].delta.content or "" for c in chunks if c.choices]
    assert "".join(pieces) == text and len([p for p in pieces if p]) >= 2  # it did arrive in pieces
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 5
    stop = " " + text.split()[1]
    cut = ask(client, temperature=0, max_tokens=5, stream=True, stop=stop)
    assert "".join(c.choices[0].delta.content or "" for c in cut) == text[:text.index(stop)].strip()


def test_a_stream_the_client_leaves_stops_and_frees_its_place(client, live) -> None:
    """Greedy, this prompt makes Gemma repeat it without end (no stop string, no end token), so only leaving can
    stop its 2,048 tokens early (each step at least ~10 ms: 20 s or more)."""
    service = live[1]
    count = [{"role": "user", "content": "Count from 1 to 1000, separated by commas."}]
    with client.chat.completions.with_streaming_response.create(
            model="gemma3-270m", messages=count, temperature=0, max_tokens=2048, stream=True) as response:
        lines = response.iter_lines()
        assert next(line for line in lines if '"content":"' in line and '"content":""' not in line)
    left = time.monotonic()
    while service.admission.active:  # the generation stopped and released its admission place
        assert time.monotonic() - left < 10, "the abandoned stream still holds its place"
        time.sleep(0.05)
    assert ask(client, temperature=0, max_tokens=1).choices[0].finish_reason == "length"
    assert time.monotonic() - left < 15  # the generation thread was free: not behind 2,048 abandoned tokens


def test_sampling_with_a_seed_repeats(client) -> None:
    first, second = (ask(client, temperature=1.0, top_p=0.9, seed=7, max_tokens=4) for _ in range(2))
    assert first.choices[0].message.content == second.choices[0].message.content
    assert first.usage.completion_tokens <= 4


@pytest.mark.parametrize("fields, code, param", [
    ({"stream": True, "extra_body": {"scoring": SCORING}}, "stream_not_supported", "stream"),
    ({"model": "gpt-4o"}, "model_not_served", "model"),
    ({"n": 3}, "unsupported_parameter", "n"),
    ({"extra_body": {"scoring": {"queries": [{"id": "q", "template": "Is it?<?>"}]}}}, "no_options", None),
])
def test_errors_arrive_in_openai_envelope(client, fields, code, param) -> None:
    fields = {"model": "gemma3-270m", "messages": QUESTION, "max_tokens": 2, **fields}
    with pytest.raises(openai.BadRequestError) as raised:
        client.chat.completions.create(**fields)
    error = raised.value
    assert error.status_code == 400 and error.code == code
    body = error.response.json()["error"]
    assert body["type"] == "invalid_request_error" and body["message"]
    if param is not None:
        assert error.param == param
