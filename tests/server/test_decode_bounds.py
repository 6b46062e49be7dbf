"""Every value a decoding route takes is bounded before it costs anything (issue 24): seeds outside 64 bits in a
`<gen>` slot, chat's `scoring` block and /v1/completions; decode work over `max_decode_tokens`; a string prompt's
characters before it is tokenized; a prompt list's form and length; a body that never arrives. The real routes,
with an engine that fails if reached (unready.py), and for the body a live server whose model never loads."""

from __future__ import annotations

import socket
import time
from urllib.parse import urlsplit

import pytest

from spinfc.server import body as body_module
from spinfc.server.app import create_app

from .live import live_server
from .unready import no_model, ready_client

HELLO = [{"role": "user", "content": "Hello"}]
GEN = {"id": "g", "template": "\n\nSummary:<gen>", "temperature": 0.7}
SEARCHED = {"id": "t", "template": "\n\nThe product:<*>\n", "beam_width": 16, "max_tokens": 256}


@pytest.fixture(scope="module")
def client():
    with ready_client() as client:
        yield client


def refused(client, route: str, body: dict) -> tuple[int, str, str | None]:
    response = client.post(route, json=body)
    error = response.json()["error"]
    return response.status_code, error["code"], error["param"]


@pytest.mark.parametrize("seed", [2**64, 2**63, -2**63 - 1])
@pytest.mark.parametrize("route, where", [("/v1/score", "scoring.queries[0].seed"),
                                          ("/v1/chat/completions", "scoring.queries[0].seed")])
def test_a_seed_outside_64_bits_is_a_400_at_its_place(client, route, where, seed) -> None:
    body = {"messages": HELLO, "scoring": {"queries": [{**GEN, "seed": seed}]}}
    assert refused(client, route, body) == (400, "invalid_value", where)


@pytest.mark.parametrize("seed", [2**64, -2**63 - 1])
def test_a_generation_seed_outside_64_bits_is_a_400(client, seed) -> None:
    assert refused(client, "/v1/chat/completions", {"messages": HELLO, "seed": seed}) == (400, "invalid_value", "seed")
    assert refused(client, "/v1/completions", {"prompt": "x", "seed": seed}) == (400, "invalid_value", "seed")


def test_decode_work_over_its_bound_is_refused_before_it_runs(client) -> None:
    """Sixteen inputs of ten `<*>` slots of beam 16 and 256 tokens: 655,360 decoded tokens asked for."""
    queries = [{**SEARCHED, "id": f"t{k}"} for k in range(10)]
    body = {"inputs": [{"messages": HELLO}] * 16, "scoring": {"queries": queries}}
    status, code, param = refused(client, "/v1/score", body)
    assert (status, code, param) == (400, "max_decode_tokens_exceeded", "scoring.queries")
    one = {"inputs": [{"messages": HELLO}], "scoring": {"queries": queries[:1]}}  # 4,096: passes (to the engine)
    assert client.post("/v1/score", json=one).status_code == 500  # the stand-in engine's "reached the compile"


def test_completion_decode_work_is_bounded_by_prompts_times_max_tokens(client) -> None:
    prompts = ["x"] * 40  # 40 x 2,048 > 65,536
    assert refused(client, "/v1/completions", {"prompt": prompts, "max_tokens": 2048}) == \
        (400, "max_decode_tokens_exceeded", "max_tokens")


def test_a_long_string_prompt_is_refused_on_its_characters_before_tokenizing(client) -> None:
    text = "Is this about the weather? " * 70_000  # 1.9 MB
    started = time.perf_counter()
    status, code, param = refused(client, "/v1/completions", {"prompt": text, "max_tokens": 0})
    assert (status, code, param) == (400, "max_content_tokens_exceeded", "prompt")
    status, code, param = refused(client, "/v1/completions", {"prompt": ["a", text], "max_tokens": 0})
    assert (status, code, param) == (400, "max_content_tokens_exceeded", "prompt[1]")
    assert time.perf_counter() - started < 2.0  # milliseconds each; tokenizing it took seconds


def test_special_tokens_in_a_string_prompt_are_text() -> None:
    """`<|im_end|>` in a prompt is encoded as its characters, as /v1/score encodes a content."""
    from spinfc.passes.tokenize import encode_text
    from spinfc.registry import load_tokenizer

    tokenizer = load_tokenizer("smollm2-135m")
    control = tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert control in tokenizer("a<|im_end|>b", add_special_tokens=True)["input_ids"]  # what it used to send
    assert control not in encode_text(tokenizer, "a<|im_end|>b", bos=True)


def test_a_body_that_never_arrives_is_timed_out_and_its_connection_closed(monkeypatch) -> None:
    monkeypatch.setattr(body_module, "BODY_TIMEOUT_S", 0.5)
    with live_server(create_app(load_model=no_model), ready=False) as url:
        parts = urlsplit(url)
        with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
            sock.sendall(f"POST /v1/score HTTP/1.1\r\nHost: {parts.netloc}\r\nContent-Type: application/json\r\n"
                         "Content-Length: 1000\r\n\r\n{}".encode())
            started = time.monotonic()
            received = b""
            while chunk := sock.recv(65536):  # until the server closes the connection
                received += chunk
            waited = time.monotonic() - started
    assert received.startswith(b"HTTP/1.1 408"), received[:200]
    assert b"body_timeout" in received
    assert 0.4 < waited < 5
