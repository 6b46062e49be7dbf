"""/v1/completions' scoring call on many short prompts costs its tokens (issue 47 item 4), on SmolLM2 through a live
server: prompts are packed row to row on the CPU (`Shapes.prompt_block`) and short prompts side by side share their
attention products, so 50 one-line prompts are one prompt pass (four on main, where each took a block of 128 rows),
a thousand take their tokens' worth of passes, each prompt scores as it does alone, and a client that hangs up on a
thousand has them withdrawn within the pass in flight."""

from __future__ import annotations

import json
import math
import socket
import time

import httpx
import pytest

from spinfc.config import EngineSettings, FeatureSettings, Settings
from spinfc.runtime.parity import CROSS_CPU_TOLERANCE
from spinfc.server.app import create_app

from packaged import load_shared

from .live import live_server, wait_until

pytestmark = pytest.mark.slow

BUDGET = 2048  # the CPU's default budget, set here so the pass counts below do not follow a change of default


@pytest.fixture(scope="module")
def served():
    settings = Settings(engine=EngineSettings(model="smollm2-135m", device="cpu", token_budget=BUDGET, warmup="none"),
                        features=FeatureSettings(extraction=False, generation=False))
    app = create_app(settings, load_model=load_shared)
    with live_server(app) as url, httpx.Client(base_url=url, timeout=600) as client:
        yield client, app.state.service


def scoring_call(client, prompt) -> dict:
    answer = client.post("/v1/completions", json={"prompt": prompt, "echo": True, "logprobs": 1, "max_tokens": 0})
    assert answer.status_code == 200, answer.text
    return answer.json()


def prompt_passes(service) -> int:
    return service.ready_engine().stats.prompt_passes


def test_fifty_one_line_prompts_are_one_pass_and_score_as_alone(served):
    client, service = served
    prompts = [f"Line {i}: the quick brown fox jumps over the lazy dog." for i in range(50)]
    before = prompt_passes(service)
    answer = scoring_call(client, prompts)
    assert prompt_passes(service) - before == 1  # ~750 rows; four 2,048-row passes on main
    assert answer["usage"]["prompt_tokens"] < BUDGET
    for k in (0, 31, 49):
        (alone,) = scoring_call(client, prompts[k])["choices"]
        shared = answer["choices"][k]["logprobs"]
        assert shared["tokens"] == alone["logprobs"]["tokens"]
        assert shared["token_logprobs"][1:] == pytest.approx(alone["logprobs"]["token_logprobs"][1:], rel=0,
                                                             abs=CROSS_CPU_TOLERANCE)


def test_a_thousand_prompts_take_their_tokens_worth_of_passes(served):
    client, service = served
    prompts = [f"Item {i}." for i in range(1000)]
    before = prompt_passes(service)
    answer = scoring_call(client, prompts)
    tokens, longest = answer["usage"]["prompt_tokens"], max(len(c["logprobs"]["tokens"]) for c in answer["choices"])
    assert len(answer["choices"]) == 1000
    # each pass is filled to within a prompt of the budget: 3 passes of ~6,000 tokens (63 on main)
    assert prompt_passes(service) - before <= math.ceil(tokens / (BUDGET - longest))


def test_a_client_that_hangs_up_on_a_thousand_prompts_has_them_withdrawn_within_a_pass(served):
    client, service = served
    engine = service.ready_engine()
    prompts = [f"Line {i}: the quick brown fox jumps over the lazy dog, and then it runs away." for i in range(1000)]
    body = json.dumps({"prompt": prompts, "echo": True, "logprobs": 1, "max_tokens": 0}).encode()
    host, port = client.base_url.host, client.base_url.port
    before = prompt_passes(service)
    with socket.create_connection((host, port), timeout=30) as sock:  # ~20,000 tokens: ten passes
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        wait_until(lambda: engine.scheduler.reads, timeout=60, what="the prompts queued")
        left = prompt_passes(service)
    wait_until(lambda: not engine.scheduler.reads, timeout=120, what="the prompts withdrawn")
    time.sleep(0.5)
    assert prompt_passes(service) - left <= 1  # the pass in flight when the client left, no other
    assert prompt_passes(service) - before <= 2
    assert len(scoring_call(client, "Just one more.")["choices"]) == 1  # the server goes on
