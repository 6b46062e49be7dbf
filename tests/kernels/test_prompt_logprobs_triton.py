"""Prompt logprobs (runtime.prompt_logprobs: one packed read, every content row gathered) through the Triton ops
equal the reference ops' (tiny float32 models, Triton through the interpreter): the read's launch (trimmed to
the used blocks, every content row an answer row) is one the kernels run correctly. The compiled kernels on CUDA:
benchmarks/prompt_logprobs_gpu.py."""

from __future__ import annotations

import random

import pytest
import torch

from spinfc.backend import reference, triton_ops
from spinfc.runtime.launch.prompt_logprobs import prompt_program, score_prompts
from spinfc.runtime.models import build_model

from .test_fused_model import CONFIGS, _state


# llama in the fast set; the other families' kernels (Gemma 3's window, soft-cap and norms) run through the interpreter
# on whole models in test_fused_model.py (slow), where this one would add ~30 s of interpreter here
FAMILIES = [family if family == "llama" else pytest.param(family, marks=pytest.mark.slow) for family in sorted(CONFIGS)]


@pytest.mark.parametrize("family", FAMILIES)
def test_triton_prompt_logprobs_match_the_reference(family):
    config = CONFIGS[family]
    state = _state(config, seed=5)
    rng = random.Random(6)
    prompts = [tuple(rng.randrange(1, config.vocab) for _ in range(n)) for n in (30, 9, 61)]
    program = prompt_program(prompts, "random", budget=256, block=64)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    got = score_prompts(build_model(config, state, ops=triton_ops, weights_hash="t", device=device), program, top=3)
    want = score_prompts(build_model(config, state, ops=reference, weights_hash="t"), program, top=3)
    for mine, theirs in zip(got, want):
        torch.testing.assert_close(torch.tensor(mine.logprobs), torch.tensor(theirs.logprobs), rtol=1e-4, atol=1e-4)
        assert [[t for t, _ in top] for top in mine.top] == [[t for t, _ in top] for top in theirs.top]
