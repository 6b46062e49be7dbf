"""The attack cases of issue 24 against a live server (uvicorn, real HTTP, smollm2-135m on the CPU, a small budget):
decode work cannot take the server down. A score sent behind long decode work is answered within a few passes, a
client that hangs up frees the decode within a step, a seed outside 64 bits is a 400, and nothing is a 5xx.

Each case is bounded in time: the long work asks for far more than the test waits for, so a server that ran it to
the end before the score would fail the test rather than slow the suite."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx
import pytest

from spinfc.config import EngineSettings, ServerSettings, Settings
from spinfc.server.app import create_app

from packaged import load_shared

from .live import live_server

pytestmark = pytest.mark.slow

MESSAGES = [{"role": "user", "content": "Customer message: my parcel never arrived and nobody answers my emails."}]
SCORE = {"messages": MESSAGES, "scoring": {"queries": [
    {"id": "late", "template": "\n\nIs a delivery late?\nAnswer:<?>", "options": [" yes", " no"]}]}}
GENERATIONS = {"messages": MESSAGES, "scoring": {"queries": [  # ten <gen> slots of 256 tokens: minutes on a CPU
    {"id": f"g{k}", "template": f"\n\nWrite reply number {k} to the customer:<gen>", "max_tokens": 256,
     "temperature": 0.9, "seed": k} for k in range(10)]}}
SEARCHES = {"messages": MESSAGES, "scoring": {"queries": [  # ten <*> slots of beam 16
    {"id": f"t{k}", "template": f"\n\nQuote {k} of the customer's words:<*>\n", "beam_width": 16, "max_tokens": 64}
    for k in range(10)]}}
ALONE_S = 20  # what a one-question score may take behind the decode work (alone it takes about a second)


@pytest.fixture(scope="module")
def served():
    settings = Settings(engine=EngineSettings(model="smollm2-135m", device="cpu", token_budget=512, warmup="short"),
                        server=ServerSettings(shutdown_timeout=5))
    app = create_app(settings, load_model=load_shared)
    with live_server(app) as url:
        yield url, app.state.service


@pytest.fixture
def url(served):
    url, service = served
    yield url
    assert idle(service, timeout=60) < 60, "the decode work of the case before was not withdrawn"


@contextlib.contextmanager
def in_flight(url: str, path: str, body: dict) -> Iterator[socket.socket]:
    """`body` sent to `path` on a raw connection, held open while the block runs, then closed (a hang-up, unless
    the answer came first)."""
    parts = urlsplit(url)
    data = json.dumps(body).encode()
    with socket.create_connection((parts.hostname, parts.port)) as sock:
        sock.sendall(f"POST {path} HTTP/1.1\r\nHost: {parts.netloc}\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {len(data)}\r\n\r\n".encode() + data)
        yield sock


def hang_up_after(url: str, path: str, body: dict, seconds: float) -> None:
    with in_flight(url, path, body):
        time.sleep(seconds)


def answered(sock: socket.socket) -> bool:
    sock.setblocking(False)
    try:
        return bool(sock.recv(1, socket.MSG_PEEK))
    except BlockingIOError:
        return False
    finally:
        sock.setblocking(True)


def idle(service, timeout: float) -> float:
    """Seconds until nothing is queued or running: no request in the engine, no decode, no generation."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        stats = service.engine.stats
        if stats.queued == 0 and stats.queued_decode == 0 and not any(service.generator.queued_turns()):
            return time.monotonic() - started
        time.sleep(0.05)
    return float("inf")


@pytest.mark.parametrize("long_work", [GENERATIONS, SEARCHES], ids=["ten <gen> slots", "ten <*> slots of beam 16"])
def test_a_score_behind_decode_work_is_answered_within_a_few_passes(url, long_work) -> None:
    with in_flight(url, "/v1/score", long_work) as long:
        time.sleep(2)  # the decode is running
        started = time.monotonic()
        response = httpx.post(f"{url}/v1/score", json=SCORE, timeout=600)
        waited = time.monotonic() - started
        assert response.status_code == 200, response.text
        assert waited < ALONE_S, f"a one-question score waited {waited:.1f} s behind decode work"
        assert not answered(long), "the long request was answered first: the case proves nothing"


def test_a_hang_up_frees_the_decode_within_a_step(served) -> None:
    url, service = served
    hang_up_after(url, "/v1/score", GENERATIONS, seconds=3)
    assert idle(service, timeout=30) < 10  # the generation asked minutes of work
    started = time.monotonic()
    assert httpx.post(f"{url}/v1/score", json=SCORE, timeout=60).status_code == 200
    assert time.monotonic() - started < ALONE_S


def test_completions_behind_long_completions_and_their_hang_up(served) -> None:
    url, service = served
    long = {"prompt": ["Once upon a time"] * 8, "max_tokens": 2048, "temperature": 0.9}
    hanging = threading.Thread(target=hang_up_after, args=(url, "/v1/completions", long, 6), daemon=True)
    hanging.start()
    time.sleep(2)
    started = time.monotonic()
    short = httpx.post(f"{url}/v1/completions", json={"prompt": "The capital of France is", "max_tokens": 4,
                                                       "temperature": 0}, timeout=600)
    assert short.status_code == 200, short.text
    assert time.monotonic() - started < ALONE_S
    started = time.monotonic()
    assert httpx.post(f"{url}/v1/score", json=SCORE, timeout=60).status_code == 200
    assert time.monotonic() - started < ALONE_S
    hanging.join()
    assert idle(service, timeout=30) < 10  # 16,384 tokens asked for: withdrawn, not generated


@pytest.mark.parametrize("path, body", [
    ("/v1/score", {"messages": MESSAGES, "scoring": {"queries": [
        {"id": "g", "template": "\n\nReply:<gen>", "temperature": 0.5, "seed": 2**64}]}}),
    ("/v1/chat/completions", {"messages": MESSAGES, "scoring": {"queries": [
        {"id": "g", "template": "\n\nReply:<gen>", "temperature": 0.5, "seed": -2**63 - 1}]}}),
    ("/v1/chat/completions", {"messages": MESSAGES, "seed": 2**64, "max_tokens": 2}),
    ("/v1/completions", {"prompt": "Hello", "seed": 2**64, "max_tokens": 2}),
    ("/v1/completions", {"prompt": [[1, 2], "a"]}),
    ("/v1/completions", {"prompt": "Is this about the weather? " * 70_000, "max_tokens": 0}),
])
def test_hostile_values_are_400s(url, path, body) -> None:
    started = time.monotonic()
    response = httpx.post(f"{url}{path}", json=body, timeout=60)
    assert response.status_code == 400, response.text
    assert time.monotonic() - started < 2


def test_special_tokens_in_a_string_prompt_are_text(url) -> None:
    body = {"prompt": "a<|im_end|>b", "max_tokens": 0, "echo": True, "logprobs": 0}
    tokens = httpx.post(f"{url}/v1/completions", json=body, timeout=60).json()["choices"][0]["logprobs"]["tokens"]
    assert "<|im_end|>" not in tokens and "".join(tokens).endswith("a<|im_end|>b")
