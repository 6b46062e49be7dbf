"""`--max-memory` at a start on the CPU, on a tiny random Llama (SmolLM2's tokenizer): a limit below the weights is
refused before anything is captured, in one line naming each part; a limit that holds them sizes the content cache
within what it leaves (never more than the cache would take without it); a recurrent stack's state is counted."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from spinfc.config import EngineSettings
from spinfc.runtime.launch.content_cache import CUDA_FREE_FRACTION, bytes_per_token
from spinfc.runtime.load.memory import MemoryTooSmall, state_bytes
from spinfc.runtime.models.qwen3_5.config import LinearAttention
from spinfc.runtime.start import start_engine

from .tiny_llama import tiny_llama

GiB = 2**30


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return str(tiny_llama(tmp_path_factory.mktemp("limit") / "llama"))


def started_cache(model: str, limit: int | None) -> tuple[int, object]:
    running = start_engine(EngineSettings(model=model, device="cpu", token_budget=512, max_memory=limit))
    try:
        return running.engine.contents.cache.budget, running.model
    finally:
        running.stop()


def test_a_limit_below_the_weights_is_refused_naming_each_part(model):
    with pytest.raises(MemoryTooSmall) as refused:
        started_cache(model, 1 << 20)
    text = str(refused.value)
    assert text.startswith("--max-memory 1.0 MiB does not hold this model at --token-budget 512: weights ")
    assert all(part in text for part in (" + state ", " + K/V ", " + workspaces ", "raise --max-memory"))
    assert "\n" not in text


def test_a_limit_that_holds_the_model_sizes_the_cache_within_what_it_leaves(model):
    unlimited, stack = started_cache(model, None)
    limit = 2 * GiB
    limited, _ = started_cache(model, limit)
    assert 0 < limited < unlimited  # a tenth of the machine's memory is more than a quarter of what 2 GiB leaves
    assert limited <= int(limit * CUDA_FREE_FRACTION) // bytes_per_token(stack)


def test_a_recurrent_stack_counts_its_state_per_content():
    linear = LinearAttention(layers=(True, True, True, False), key_heads=2, value_heads=4, key_dim=16, value_dim=16,
                             conv_kernel=4)
    stack = SimpleNamespace(config=SimpleNamespace(linear=linear), dtype=torch.bfloat16)
    one = 4 * 16 * 16 * 4 + 3 * (2 * 2 * 16 + 4 * 16) * 2
    assert state_bytes(stack, 10) == 10 * one
    assert state_bytes(SimpleNamespace(config=SimpleNamespace(), dtype=torch.float32), 10) == 0
