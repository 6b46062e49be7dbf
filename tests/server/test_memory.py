"""The server's memory stays flat over a stream of varied requests (issue 38): every cache it keeps between
requests is bounded, so once the bounded caches are full the resident memory stops growing. Each request here asks
its own question set (a large one, so that a set kept for ever shows in the resident memory): a server that kept
every trie and tree rows it built (the compile memo, before issue 38) grew past BOUND_MB over MEASURED requests.

The caches' bounds are set small here (so they fill within the warm-up, not after hundreds of requests); the
numbers at the server's own bounds, over 1,000 requests, are in BENCHMARKS.md ("Memory over 1,000 requests")."""

from __future__ import annotations

import gc
import random

import httpx
import psutil
import pytest
import torch

from spinfc.config import EngineSettings, Settings
from spinfc.server.app import create_app
from tests.server.live import live_server

pytestmark = pytest.mark.slow

WARM, MEASURED = 60, 120  # requests before the first reading, and between the two
BOUND_MB = 12  # resident growth allowed over MEASURED requests once the caches are full
WORDS = "refund invoice delivery broken screen password account late parcel charge twice cancel order".split()


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """A llama folder of random weights (seed 0) with SmolLM2's tokenizer, written by transformers."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from spinfc.registry import load_tokenizer

    folder = tmp_path_factory.mktemp("tiny")
    torch.manual_seed(0)
    LlamaForCausalLM(LlamaConfig(vocab_size=49152, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                 num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True)
                     ).save_pretrained(folder)
    load_tokenizer("smollm2-135m").save_pretrained(folder)
    return str(folder)


def request(i: int) -> tuple[str, dict]:
    """The i-th request: a content, and a question set of its own (120 questions) or another route."""
    rng = random.Random(i)
    text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 40))) + f" (ticket {i})"
    messages = [{"role": "user", "content": text}]
    if i % 5 == 4:
        return "/v1/chat/completions", {"messages": messages, "max_tokens": 3, "seed": i}
    if i % 5 == 3:
        return "/v1/score", {"messages": messages, "scoring": {"queries": [
            {"id": "n", "template": f"\n\nHow many orders ({i})?\nA: <n>"},
            {"id": "m", "template": f"\n\nHow much money ({i})?\nA: <$>"}]}}
    topics = [f"{rng.choice(WORDS)} case {i}-{k}" for k in range(60)]
    return "/v1/score", {"messages": messages, "scoring": {"queries": [
        {"id": "about", "template": f"\n\nRequest {i}: is it about {{t}}?\nAnswer:<?>",
         "options": [" yes", " no", " not sure at all"], "placeholders": {"t": topics}},
        {"id": "urgent", "template": f"\n\nRequest {i}: is {{t}} urgent?\nAnswer:<?>",
         "options": [" yes", " no"], "placeholders": {"t": topics}}]}}


def resident_mb() -> float:
    gc.collect()
    return psutil.Process().memory_info().rss / 2**20


def test_resident_memory_is_flat_over_varied_requests(model, monkeypatch) -> None:
    from spinfc.passes import context
    from spinfc.runtime.admit import intake

    monkeypatch.setattr(context, "SETS_REMEMBERED", 8)  # the compile memo's question sets
    monkeypatch.setattr(intake, "SETS_REMEMBERED", 8)  # the intake's score maps and trees
    settings = Settings(engine=EngineSettings(model=model, device="cpu", token_budget=1024, warmup="none"))
    app = create_app(settings)
    with live_server(app) as url, httpx.Client(base_url=url, timeout=300) as client:
        app.state.service.engine._floor_cache_size = 8  # the floors' scores, one per question set

        def send(first: int, count: int) -> None:
            for i in range(first, first + count):
                path, body = request(i)
                answer = client.post(path, json=body)
                assert answer.status_code == 200, answer.text

        send(0, WARM)
        before = resident_mb()
        send(WARM, MEASURED)
        after = resident_mb()
    print(f"resident memory: {before:.1f} MB after {WARM} requests, {after:.1f} MB after {MEASURED} more "
          f"(+{after - before:.1f} MB)")
    assert after - before < BOUND_MB, f"+{after - before:.1f} MB over {MEASURED} requests"
