"""Prompt logprobs from one packed pass (runtime.prompt_logprobs) against transformers' own on each prompt as its
own sequence, on a small random-weight model of each family: every token's logprob and the top tokens after it."""

from __future__ import annotations

import pytest
import torch

from spinfc.runtime.launch.prompt_logprobs import prompt_program, score_prompts

from .test_parity_random import _configs

TOLERANCE = 1e-5


@pytest.fixture(scope="module", params=["llama", "gemma3"])
def pair(request, tmp_path_factory):
    from transformers import AutoModelForCausalLM

    from spinfc.runtime.load.loader import load_model

    torch.manual_seed(0)
    config = _configs()[request.param]
    config._attn_implementation = "eager"
    theirs = AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval()
    directory = tmp_path_factory.mktemp(request.param)
    theirs.save_pretrained(directory)
    return load_model(str(directory)), theirs


def test_packed_prompt_logprobs_match_transformers(pair):
    ours, theirs = pair
    generator = torch.Generator().manual_seed(3)
    prompts = [tuple(torch.randint(1, 96, (n,), generator=generator).tolist()) for n in (9, 40, 2, 17)]
    program = prompt_program(prompts, "random", budget=256, block=16)
    assert len(program.layouts) == 1  # all four in one pass
    got = score_prompts(ours, program, top=4)
    for prompt, scores in zip(prompts, got):
        with torch.no_grad():
            logprobs = torch.log_softmax(theirs(torch.tensor([prompt])).logits[0].float(), dim=-1)  # [L, V]
        want = logprobs[torch.arange(len(prompt) - 1), torch.tensor(prompt[1:])]
        assert len(scores.logprobs) == len(prompt) - 1
        assert (torch.tensor(scores.logprobs) - want).abs().max().item() < TOLERANCE
        for i, top in enumerate(scores.top):
            best = logprobs[i].topk(4)
            assert [t for t, _ in top] == best.indices.tolist()
            assert max(abs(a - b) for (_, a), b in zip(top, best.values.tolist())) < TOLERANCE


def test_the_chosen_tokens_logprob_is_exactly_the_top_one_when_it_is_the_most_likely(pair):
    """lm-evaluation-harness decides is_greedy by comparing the two numbers for equality."""
    ours, _ = pair
    prompt = (5, 9, 11, 3, 7, 1, 2)
    (first,) = score_prompts(ours, prompt_program([prompt], "random", budget=64, block=16), top=1)
    greedy = [first.top[-1][0][0]]
    (second,) = score_prompts(ours, prompt_program([prompt + tuple(greedy)], "random", budget=64, block=16), top=1)
    assert second.logprobs[-1] == second.top[-2][0][1]
