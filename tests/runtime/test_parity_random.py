"""Small random-weight models of each family, saved by transformers as safetensors snapshots and loaded through
spinfc's snapshot path, against transformers on the same weights. Norm weights are randomized too, so a wrong
norm convention cannot hide behind weights of one."""

from __future__ import annotations

import pytest
import torch

from spinfc.runtime.load.loader import load_model

from .forward_context_checks import check_forward_context
from .gemma4_shapes import GEMMA4_FAMILIES, gemma4_config, randomize
from .tree_launch import Case, Question, build_launch, transformers_logprobs

TOLERANCE = 1e-4
SHAPE = dict(
    vocab_size=96, hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4,
    num_key_value_heads=2, head_dim=16, max_position_embeddings=256,
)


def _configs():
    from transformers import Gemma3TextConfig, LlamaConfig, MistralConfig, Qwen3Config

    return {
        "qwen3": Qwen3Config(**SHAPE, tie_word_embeddings=False, rope_theta=5000.0),
        "llama": LlamaConfig(**SHAPE, tie_word_embeddings=True, rope_theta=500.0, rms_norm_eps=1e-5),
        # a window of 6 positions, so branches of the tree cross it; layers: sliding, global, sliding
        "gemma3": Gemma3TextConfig(
            **SHAPE, sliding_window=6, layer_types=["sliding_attention", "full_attention", "sliding_attention"],
            query_pre_attn_scalar=24, rope_theta=20000.0, rope_local_base_freq=300.0,
        ),
        **{name: gemma4_config(name) for name in GEMMA4_FAMILIES},
        # every layer attends within a window of 5 positions, so longer branches of the tree cross it
        "mistral": MistralConfig(**SHAPE, sliding_window=5, rope_theta=700.0, tie_word_embeddings=False),
    }


@pytest.fixture(scope="module", params=["qwen3", "llama", "gemma3", *GEMMA4_FAMILIES, "mistral"])
def pair(request, tmp_path_factory):
    return random_pair(request.param, tmp_path_factory.mktemp(request.param))


def random_pair(family: str, directory):
    """(spinfc's model, transformers' model) of `family` on the same random weights (seed 0), norms randomized,
    saved by transformers as a snapshot in `directory` and loaded through spinfc's snapshot path."""
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    config = _configs()[family]
    config._attn_implementation = "eager"
    theirs = AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval()
    if family.startswith("gemma4"):
        randomize(theirs)
    else:
        with torch.no_grad():
            for name, parameter in theirs.named_parameters():
                if "norm" in name:
                    parameter.normal_(0.0, 0.3)
    theirs.save_pretrained(directory)
    return load_model(str(directory)), theirs


def _random_case(generator, content_length: int) -> Case:
    draw = lambda n: tuple(torch.randint(1, 96, (n,), generator=generator).tolist())  # noqa: E731
    questions = tuple(Question(draw(4), (draw(1), draw(3), draw(2))) for _ in range(3))
    return Case(draw(content_length), questions)


def test_random_model_matches_transformers(pair):
    ours, theirs = pair
    generator = torch.Generator().manual_seed(1)
    cases = [_random_case(generator, 12), _random_case(generator, 9)]
    launch, keys = build_launch([(0, cases[0]), (64, cases[1])], 128)
    got = ours.forward(launch)
    want = {}
    for index, case in enumerate(cases):
        for key, value in zip(case.reads(), transformers_logprobs(theirs, case)):
            want[(index, *key)] = value
    difference = (got - torch.stack([want[key] for key in keys])).abs().max().item()
    print(f"random {ours.family}: max |logprob - transformers| = {difference:.2e} over {got.numel()} reads")
    assert difference < TOLERANCE


def test_a_forward_keeps_its_state_in_its_context(pair):
    generator = torch.Generator().manual_seed(2)
    launch, _ = build_launch([(0, _random_case(generator, 12)), (64, _random_case(generator, 9))], 128)
    check_forward_context(pair[0], launch)


def test_weights_hash_is_stable_and_sees_the_weights(pair, tmp_path):
    ours, theirs = pair
    assert load_model(ours.name).weights_hash == ours.weights_hash
    parameter = next(theirs.parameters())
    original = parameter.detach().clone()
    with torch.no_grad():
        parameter.add_(1.0)
    theirs.save_pretrained(tmp_path)
    with torch.no_grad():
        parameter.copy_(original)
    assert load_model(str(tmp_path)).weights_hash != ours.weights_hash
