"""The mixed policy's head on the CPU: `Precision.mixed` of a half dtype keeps the head's weights in that dtype
(`split_head`), the forward multiplies the head's float32 rows by them as split products, and the answer logprobs
are those of the head's weights in float32 to within 2e-5; the output projections added into the float32 residual
inside the matmul (`residual_in_matmul`, the CUDA default) score as the separate add does."""

from __future__ import annotations

import pytest
import torch

from spinfc.runtime.load.precision import Precision
from spinfc.runtime.models import build_model
from spinfc.runtime.quant.calibrate import sequence_launch
from spinfc.runtime.models.gemma3 import Gemma3Config
from spinfc.runtime.weights.config import ModelConfig

CONFIGS = {
    "llama": ModelConfig(family="llama", hidden=64, layers=3, heads=4, kv_heads=2, head_dim=16, intermediate=96,
                         vocab=101, rope_theta=10000.0, norm_eps=1e-5, tie_embeddings=False),
    "gemma3": Gemma3Config(family="gemma3", hidden=64, layers=3, heads=2, kv_heads=1, head_dim=32, intermediate=96,
                          vocab=101, rope_theta=10000.0, norm_eps=1e-6, tie_embeddings=True, rope_local_theta=100.0,
                          sliding_window=7, sliding_layers=(True, False, True), query_pre_attn_scalar=32.0),
}


def _state(c: ModelConfig, seed: int) -> dict[str, torch.Tensor]:
    """Random weights already rounded to fp16, so every policy multiplies the same values."""
    g = torch.Generator().manual_seed(seed)
    shapes = {"model.embed_tokens.weight": (c.vocab, c.hidden), "model.norm.weight": (c.hidden,)}
    if not c.tie_embeddings:
        shapes["lm_head.weight"] = (c.vocab, c.hidden)
    per_layer = {"self_attn.q_proj": (c.heads * c.head_dim, c.hidden), "self_attn.k_proj": (c.kv_heads * c.head_dim,
                 c.hidden), "self_attn.v_proj": (c.kv_heads * c.head_dim, c.hidden),
                 "self_attn.o_proj": (c.hidden, c.heads * c.head_dim), "mlp.gate_proj": (c.intermediate, c.hidden),
                 "mlp.up_proj": (c.intermediate, c.hidden), "mlp.down_proj": (c.hidden, c.intermediate),
                 "input_layernorm": (c.hidden,), "post_attention_layernorm": (c.hidden,)}
    if c.family == "gemma3":
        per_layer.update({"self_attn.q_norm": (c.head_dim,), "self_attn.k_norm": (c.head_dim,),
                          "pre_feedforward_layernorm": (c.hidden,), "post_feedforward_layernorm": (c.hidden,)})
    for i in range(c.layers):
        shapes.update({f"model.layers.{i}.{name}.weight": shape for name, shape in per_layer.items()})
    return {name: (torch.randn(*shape, generator=g) * (shape[-1] ** -0.5 if len(shape) == 2 else 0.1)
                   + (len(shape) == 1)).half().float() for name, shape in shapes.items()}


def _logprobs(model, seed: int) -> torch.Tensor:
    """Every row's log-probability of the next token, over four random sequences."""
    g = torch.Generator().manual_seed(seed)
    runs = []
    for n in torch.randint(8, 40, (4,), generator=g):
        launch = sequence_launch(torch.randint(0, model.config.vocab, (int(n),), generator=g).tolist(), "cpu")
        runs.append(model(launch))
    return torch.cat(runs)


def test_the_mixed_policy_of_a_half_dtype_keeps_the_heads_weights_in_it():
    fp16 = Precision.mixed(torch.float16)
    assert fp16.split_head and Precision.mixed(torch.bfloat16).split_head
    assert not Precision.uniform(torch.float16).split_head and not Precision.mixed(torch.float32).split_head
    assert fp16.name() == "fp16-mixed" and fp16.head_weights == torch.float16
    last = 2
    placed = {key: fp16.dtype_of(key, last) for key in (
        "model.embed_tokens.weight", "lm_head.weight", "model.norm.weight", "model.layers.2.mlp.down_proj.weight",
        "model.layers.2.self_attn.o_proj.weight", "model.layers.2.self_attn.q_proj.weight",
        "model.layers.2.post_attention_layernorm.weight", "model.layers.0.mlp.down_proj.weight")}
    assert placed == {"model.embed_tokens.weight": torch.float32, "lm_head.weight": torch.float16,
                      "model.norm.weight": torch.float32, "model.layers.2.mlp.down_proj.weight": torch.float16,
                      "model.layers.2.self_attn.o_proj.weight": torch.float16,
                      "model.layers.2.self_attn.q_proj.weight": torch.float16,
                      "model.layers.2.post_attention_layernorm.weight": torch.float32,
                      "model.layers.0.mlp.down_proj.weight": torch.float16}
    unsplit = Precision(torch.float16, torch.float32, torch.float32)
    assert unsplit.dtype_of("lm_head.weight", last) == unsplit.dtype_of("model.layers.2.mlp.up_proj.weight",
                                                                        last) == torch.float32
    # a tied LM head is a copy of the (float32) embedding table in fp16
    model = build_model(CONFIGS["gemma3"], _state(CONFIGS["gemma3"], 0), weights_hash="t", precision=fp16)
    assert model.embed_weight.dtype == torch.float32 and model.lm_head.dtype == torch.float16
    assert torch.equal(model.lm_head, model.embed_weight.half())
    uniform = build_model(CONFIGS["gemma3"], _state(CONFIGS["gemma3"], 0), weights_hash="t",
                          precision=Precision.uniform(torch.float16))
    assert uniform.lm_head is uniform.embed_weight
    assert model.final_norm.dtype == torch.float32 and model.layers[-1]["gate"].dtype == torch.float16
    assert model.embed(torch.tensor([1, 2])).dtype == torch.float32


@pytest.mark.parametrize("family", list(CONFIGS))
def test_split_head_scores_as_a_float32_head_does(family, seed):
    """Against the same policy with the head's weights in float32 (every other product the same): within 2e-5 in
    logprob, where rounding the head's activations to fp16 once moves them by 2e-4 to 1e-3 on these models."""
    config = CONFIGS[family]
    state = _state(config, seed)
    build = lambda precision, **kw: build_model(config, state, weights_hash="t", precision=precision, **kw)  # noqa
    float32_head = _logprobs(build(Precision(torch.float16, torch.float32, torch.float32)), seed)
    split = build(Precision.mixed(torch.float16))
    assert split.lm_head.dtype == torch.float16 and split.layers[-1]["down"].dtype == torch.float16
    assert float((_logprobs(split, seed) - float32_head).abs().max()) < 2e-5
    # the adds inside the output projections' matmuls (the CUDA default) score as the separate adds do
    in_matmul = build(Precision.mixed(torch.float16), residual_in_matmul=True)
    assert float((_logprobs(in_matmul, seed) - float32_head).abs().max()) < 2e-5
