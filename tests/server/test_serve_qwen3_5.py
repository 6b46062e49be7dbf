"""`spinfc serve DIR` on a random-weight Qwen3.5 snapshot, dense and MoE (a real tokenizer: SmolLM2's, carried in the snapshot),
over HTTP: the seed README's example request, all three queries (the extraction one decodes from the recurrent
state its prompt had in the pass), and /v1/completions prompt logprobs."""

from __future__ import annotations

import math

import httpx
import pytest

from spinfc.config import EngineSettings, Settings
from spinfc.server.app import create_app

from tests.runtime.qwen3_5_random import random_qwen3_5
from .live import live_server

pytestmark = pytest.mark.slow  # a packaged tokenizer and a live server

README = {
    "messages": [{"role": "user", "content": "Customer support message:\nI was charged twice for September, please "
                                             "refund one of the charges."}],
    "scoring": {"queries": [
        {"id": "topic", "template": "\n\nTopic (billing, technical, account, shipping, or cancellation):{?}",
         "options": [" billing", " technical", " account", " shipping", " cancellation"]},
        {"id": "refund", "template": "\n\nIs the customer asking for a refund?\nAnswer:{?}", "options": [" yes", " no"]},
        {"id": "month", "template": "\n\nQ: Which month was charged twice?\nA: \"{*}\""},
    ]},
}


@pytest.fixture(scope="module", params=["dense", "moe"])
def snapshot(tmp_path_factory, request):
    from spinfc.registry import load_tokenizer

    directory = tmp_path_factory.mktemp(f"qwen3_5-{request.param}-serve")
    tokenizer = load_tokenizer("smollm2-135m")
    random_qwen3_5(directory, vocab_size=len(tokenizer), moe=request.param == "moe")
    tokenizer.save_pretrained(directory)
    return directory


def test_the_readme_request_is_answered(snapshot):
    settings = Settings(engine=EngineSettings(model=str(snapshot), device="cpu", token_budget=512, warmup="short"))
    with live_server(create_app(settings)) as url:
        response = httpx.post(f"{url}/v1/score", json=README, timeout=300)
        assert response.status_code == 200, response.text
        results = {r["id"]: r["combinations"][0] for r in response.json()["results"]}
        assert list(results) == ["topic", "refund", "month"]
        for query in ("topic", "refund"):
            assert abs(sum(o["p"] for o in results[query]["options"]) - 1) < 1e-6
        assert "answers" in results["month"]
        completion = httpx.post(f"{url}/v1/completions", timeout=300, json={
            "prompt": "I was charged twice for September", "max_tokens": 0, "echo": True, "logprobs": 1})
        assert completion.status_code == 200, completion.text
        logprobs = completion.json()["choices"][0]["logprobs"]["token_logprobs"]
        assert logprobs[0] is None and all(math.isfinite(x) for x in logprobs[1:])
