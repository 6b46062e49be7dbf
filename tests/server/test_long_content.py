"""Long content as the seed promises it (issue 36, item 2): "to take long content raise --max-content-tokens and
--max-tokens together; long inputs run alone in their own pass". On the CPU with a small random-weight llama (the
packaged SmolLM2 tokenizer): a 6,000-token content is refused at the default limit (4,096) with the limit's code,
and admitted once `max_content_tokens` is raised; sent beside a short content it runs alone in a pass of its own
(the plan under --debug), the short one in another, and its scores are those it gets sent alone.
benchmarks/gpu_long_content.py measures 8k / 32k / 64k contents on Gemma 4 and Qwen3.5 on the GPU."""

from __future__ import annotations

import random

import pytest
import torch
from litestar.testing import TestClient

from spinfc.config import EngineSettings, Limits, ServerSettings, Settings
from spinfc.passes.tokenize import encode_text
from spinfc.registry import load_tokenizer
from spinfc.server.app import create_app

from .live import wait_ready

LONG = 6000  # content tokens: over the default limit (4,096) and the CPU's default budget (2,048 rows)
QUERY = {"id": "rain", "template": "\n\nIs it about the weather?\nAnswer:<?>", "options": [" yes", " no"]}
WORDS = ("rates", "bank", "rain", "river", "court", "shares", "strike", "flooded", "record", "profit", "town")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    from transformers import AutoModelForCausalLM, LlamaConfig

    directory = tmp_path_factory.mktemp("llama")
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=49152, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, head_dim=16, max_position_embeddings=8192,
                         tie_word_embeddings=True)
    AutoModelForCausalLM.from_config(config, dtype=torch.float32).save_pretrained(directory)
    load_tokenizer("smollm2-135m").save_pretrained(directory)
    return str(directory)


def served(model_dir: str, limits: Limits) -> TestClient:
    engine = EngineSettings(model=model_dir, device="cpu", warmup="none", content_cache_tokens=0)
    return TestClient(create_app(Settings(engine=engine, server=ServerSettings(debug=True), limits=limits)),
                      timeout=600)


@pytest.fixture(scope="module")
def texts(model_dir) -> tuple[str, str]:
    tokenizer = load_tokenizer(model_dir)
    rng, words = random.Random(0), []
    while len(encode_text(tokenizer, " ".join(words), bos=True)) < LONG:
        words += [rng.choice(WORDS) for _ in range(200)]
    return " ".join(words), "The river flooded the town after a week of rain."


def body(*contents: str) -> dict:
    return {"inputs": [{"messages": [{"role": "user", "content": t}]} for t in contents],
            "scoring": {"queries": [QUERY]}}


def logprobs(result: dict) -> list[float]:
    return [o["logprob"] for r in result["results"] for c in r["combinations"] for o in c["options"]]


def test_long_content_is_refused_at_the_default_limit_and_runs_alone_when_raised(model_dir, texts):
    long, short = texts
    with served(model_dir, Limits()) as client:
        wait_ready(client)
        refused = client.post("/v1/score", json=body(long))
        assert refused.status_code == 400 and refused.json()["error"]["code"] == "max_content_tokens_exceeded"
    with served(model_dir, Limits(max_content_tokens=8192)) as client:
        wait_ready(client)
        assert client.get("/v1/models").json()["data"][0]["limits"]["max_content_tokens"] == 8192
        both = client.post("/v1/score", json=body(long, short))
        assert both.status_code == 200, both.text
        plan = both.json()["debug"]["plan"][0]
        passes = [[p["content"] for p in each["placements"]] for each in plan["passes"]]
        assert ["input-0"] in passes and not any("input-0" in p and len(p) > 1 for p in passes), passes
        rows = {s["content"]: s["rows"] for s in plan["segments"]}
        assert rows["input-0"] > 2048  # more than the budget: a pass of its own length
        alone = client.post("/v1/score", json=body(long)).json()
    assert logprobs(both.json()["inputs"][0]) == logprobs(alone["inputs"][0])
