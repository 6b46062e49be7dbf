"""A stack with fused projections (one qkv and one gate/up matmul per layer, `Model.fuse_projections`, the CUDA
default), the last layer run on the answer rows only, and optionally the residual adds inside the output
projections' matmuls (`Model.project`) computes the same logprobs as the unfused stack with every layer on every
row (tiny float32 models, Triton ops through the interpreter, and the reference ops)."""

from __future__ import annotations

import random

import pytest
import torch

from spinfc.backend import reference, triton_ops
from spinfc.backend.forward_context import ForwardContext
from spinfc.backend.launch import lower
from spinfc.ir.nodes import Content, Option, OptionSlot, Program, Question
from spinfc.runtime.models import build_model

from passes.programs import laid_out
from spinfc.runtime.models.gemma3 import Gemma3Config
from spinfc.runtime.weights.config import ModelConfig

pytestmark = pytest.mark.slow  # kernels through the interpreter on whole models

CONFIGS = {
    "llama": ModelConfig(family="llama", hidden=64, layers=2, heads=4, kv_heads=2, head_dim=16, intermediate=96,
                         vocab=101, rope_theta=10000.0, norm_eps=1e-5, tie_embeddings=False),
    "gemma3": Gemma3Config(family="gemma3", hidden=64, layers=2, heads=2, kv_heads=1, head_dim=32, intermediate=96,
                          vocab=101, rope_theta=10000.0, norm_eps=1e-6, tie_embeddings=True, rope_local_theta=100.0,
                          sliding_window=7, sliding_layers=(True, False), query_pre_attn_scalar=32.0),
}


def _state(config: ModelConfig, seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    c = config
    shapes = {"model.embed_tokens.weight": (c.vocab, c.hidden), "model.norm.weight": (c.hidden,)}
    if not c.tie_embeddings:
        shapes["lm_head.weight"] = (c.vocab, c.hidden)
    per_layer = {"self_attn.q_proj.weight": (c.heads * c.head_dim, c.hidden),
                 "self_attn.k_proj.weight": (c.kv_heads * c.head_dim, c.hidden),
                 "self_attn.v_proj.weight": (c.kv_heads * c.head_dim, c.hidden),
                 "self_attn.o_proj.weight": (c.hidden, c.heads * c.head_dim),
                 "mlp.gate_proj.weight": (c.intermediate, c.hidden), "mlp.up_proj.weight": (c.intermediate, c.hidden),
                 "mlp.down_proj.weight": (c.hidden, c.intermediate),
                 "input_layernorm.weight": (c.hidden,), "post_attention_layernorm.weight": (c.hidden,)}
    if c.family == "gemma3":
        per_layer.update({"self_attn.q_norm.weight": (c.head_dim,), "self_attn.k_norm.weight": (c.head_dim,),
                          "pre_feedforward_layernorm.weight": (c.hidden,),
                          "post_feedforward_layernorm.weight": (c.hidden,)})
    for i in range(c.layers):
        shapes.update({f"model.layers.{i}.{name}": shape for name, shape in per_layer.items()})
    return {name: torch.randn(*shape, generator=g) * (shape[-1] ** -0.5 if len(shape) == 2 else 0.1) + (len(shape) == 1)
            for name, shape in shapes.items()}


def _launch(vocab: int, seed: int):
    """Two contents of random tokens with three questions each (options share a first token), laid out by
    spinfc's passes into one pass of 128 rows."""
    rng = random.Random(seed)
    tokens = lambda n: tuple(rng.randrange(1, vocab) for _ in range(n))  # noqa: E731
    contents = (Content("a", "", tokens=tokens(23)), Content("b", "", tokens=tokens(17)))
    first = rng.randrange(1, vocab)
    slot = OptionSlot((Option("x", (first,)), Option("y", (first, rng.randrange(1, vocab))), Option("z", tokens(1))))
    questions = tuple(Question(f"q{j}", (), "", slot, tokens(rng.randint(2, 5))) for j in range(3))
    program = laid_out(Program(model="random", contents=contents, queries=(), questions=questions, budget=128,
                               block=64))
    assert len(program.layouts) == 1
    return lower(program.layouts[0])


def _unfused_full_forward(model, launch) -> torch.Tensor:
    """The forward before fusion and the last-layer trim: every layer on every row, answer rows gathered at the
    end."""
    context = ForwardContext(launch)
    x, residual = model.inputs(context), None
    for index in range(model.config.layers):
        x, residual = model.layer(index, x, residual, context)
    final, _ = model.ops.add_rms_norm(x[launch.rows], residual[launch.rows], model.final_norm, model.config.norm_eps,
                                      model.NORM_UNIT_OFFSET)
    return model.ops.answer_logprobs(final, model.lm_head, launch.read_row, launch.read_token)


@pytest.mark.parametrize("family", sorted(CONFIGS))
@pytest.mark.parametrize("ops", [triton_ops, reference], ids=["triton", "reference"])
@pytest.mark.parametrize("residual_in_matmul", [False, True], ids=["add-in-norm", "add-in-matmul"])
def test_fused_and_trimmed_forward_matches_the_plain_one(family, ops, residual_in_matmul):
    config = CONFIGS[family]
    state = _state(config, seed=1)
    launch = _launch(config.vocab, seed=2)
    fused = build_model(config, state, ops=ops, weights_hash="t", fuse=True, residual_in_matmul=residual_in_matmul)
    plain = build_model(config, state, ops=ops, weights_hash="t", fuse=False)
    assert "qkv" in fused.layers[0] and "qkv" not in plain.layers[0]
    assert fused.layers[0]["k"].data_ptr() != plain.layers[0]["k"].data_ptr()
    with torch.inference_mode():
        want = _unfused_full_forward(plain, launch)
        got = fused.forward(launch)
    assert want.shape == got.shape == (launch.read_row.shape[0],)
    assert float(want.abs().max()) > 0.1  # the logprobs are not all near zero: the comparison means something
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


def test_fused_weights_are_views_of_the_stacked_matrices():
    model = build_model(CONFIGS["llama"], _state(CONFIGS["llama"], seed=3), weights_hash="t", fuse=True)
    w = model.layers[1]
    assert w["qkv"].shape == (4 * 16 + 2 * 2 * 16, 64) and w["gate_up"].shape == (2 * 96, 64)
    assert w["q"].data_ptr() == w["qkv"].data_ptr() and w["gate"].data_ptr() == w["gate_up"].data_ptr()
    torch.testing.assert_close(w["qkv"][64:96], w["k"], rtol=0, atol=0)
    assert not build_model(CONFIGS["llama"], _state(CONFIGS["llama"], seed=3), weights_hash="t").layers[0].get("qkv")


@pytest.mark.parametrize("family", sorted(CONFIGS))
def test_generation_runs_on_fused_weights(family):
    from spinfc.runtime.models.decode import KVCache

    config = CONFIGS[family]
    state = _state(config, seed=4)
    fused = build_model(config, state, weights_hash="t", fuse=True, residual_in_matmul=True)
    plain = build_model(config, state, weights_hash="t", fuse=False)
    tokens = torch.tensor([5, 17, 3, 44, 9])
    got_cache, want_cache = KVCache(config.layers), KVCache(config.layers)
    torch.testing.assert_close(fused.decode(tokens, got_cache), plain.decode(tokens, want_cache), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(fused.decode(tokens[:1], got_cache), plain.decode(tokens[:1], want_cache), rtol=1e-4,
                               atol=1e-4)
