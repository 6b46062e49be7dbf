"""Building stacks from (config, state dict): refusals that say what is wrong, and a bf16 model that agrees with
its float32 self."""

from __future__ import annotations

import pytest
import torch

from spinfc.runtime.models import build_model
from spinfc.runtime.models.families import from_hf
from spinfc.runtime.weights import ModelConfig, UnsupportedModel

from .tree_launch import Case, Question, build_launch

LLAMA = dict(
    model_type="llama", hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
    intermediate_size=48, vocab_size=64, rms_norm_eps=1e-5, tie_word_embeddings=True,
)


def random_state(config: ModelConfig, generator) -> dict[str, torch.Tensor]:
    """Random weights of the shapes a llama-family config implies, in Hugging Face naming."""
    c, shapes = config, {}
    shapes["model.embed_tokens.weight"] = (c.vocab, c.hidden)
    shapes["model.norm.weight"] = (c.hidden,)
    for i in range(c.layers):
        p = f"model.layers.{i}."
        shapes[p + "input_layernorm.weight"] = shapes[p + "post_attention_layernorm.weight"] = (c.hidden,)
        shapes[p + "self_attn.q_proj.weight"] = (c.heads * c.head_dim, c.hidden)
        kv_shape = (c.kv_heads * c.head_dim, c.hidden)
        shapes[p + "self_attn.k_proj.weight"] = shapes[p + "self_attn.v_proj.weight"] = kv_shape
        shapes[p + "self_attn.o_proj.weight"] = (c.hidden, c.heads * c.head_dim)
        shapes[p + "mlp.gate_proj.weight"] = shapes[p + "mlp.up_proj.weight"] = (c.intermediate, c.hidden)
        shapes[p + "mlp.down_proj.weight"] = (c.hidden, c.intermediate)
    return {name: torch.randn(shape, generator=generator) * 0.2 for name, shape in shapes.items()}


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(model_type="gpt2"), "model_type 'gpt2' is not supported"),
        (dict(model_type="gemma3"), "without its text_config"),
        (dict(rope_scaling={"rope_type": "llama3", "factor": 8.0}), "rope scaling of type 'llama3'"),
        (dict(hidden_act="gelu"), "hidden_act='gelu'"),
        (dict(attention_bias=True), "attention_bias=True"),
    ],
)
def test_unsupported_configs_are_refused(change, message):
    with pytest.raises(UnsupportedModel, match=message):
        from_hf({**LLAMA, **change})


def test_missing_and_extra_weights_are_refused():
    config = from_hf(LLAMA)
    state = random_state(config, torch.Generator().manual_seed(0))
    missing = dict(state)
    del missing["model.layers.1.mlp.up_proj.weight"]
    with pytest.raises(UnsupportedModel, match="no tensor 'model.layers.1.mlp.up_proj.weight'"):
        build_model(config, missing, weights_hash="test")
    extra = {**state, "model.layers.0.self_attn.q_proj.bias": torch.zeros(32)}
    with pytest.raises(UnsupportedModel, match=r"no use for 1 tensor\(s\) \(model.layers.0.self_attn.q_proj.bias\)"):
        build_model(config, extra, weights_hash="test")
    with pytest.raises(ValueError, match="without a name"):
        build_model(config, state, weights_hash="test").tokenizer


def test_bfloat16_model_agrees_with_float32():
    config = from_hf(LLAMA)
    state = random_state(config, torch.Generator().manual_seed(0))
    full, half = build_model(config, state), build_model(config, state, dtype=torch.bfloat16)
    assert half.dtype == torch.bfloat16 and full.weights_hash != half.weights_hash
    case = Case(tuple(range(1, 20)), (Question((5, 6, 7), ((8,), (9, 10))), Question((11,), ((12, 13, 14),))))
    launch, _ = build_launch([(0, case)], 64)
    got, want = half.forward(launch), full.forward(launch)
    assert got.dtype == torch.float32 and got.shape == want.shape == (6,)
    assert (got - want).abs().max().item() < 0.1
