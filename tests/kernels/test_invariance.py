"""The start-up row-invariance check: it passes on the CPU's products, names the product where rows mix, drops
a smaller launch size whose rows differ from the full pass's, and checks the products as the forward runs them."""

from __future__ import annotations

import pytest
import torch

from spinfc.backend import split_product
from spinfc.backend.invariance import NotRowInvariant, invariant_sizes
from spinfc.runtime.load.precision import Precision
from spinfc.runtime.models import build_model
from spinfc.runtime.weights.config import ModelConfig

CONFIG = ModelConfig(family="llama", hidden=32, layers=2, heads=2, kv_heads=1, head_dim=16, intermediate=48,
                     vocab=64, rope_theta=10000.0, norm_eps=1e-5, tie_embeddings=True)


SIZES = [(64, 8, 64), (128, 16, 128), (256, 32, 256)]


def _model():
    return build_model(CONFIG, _state(), weights_hash="x", fuse=True)


def _state() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    state = {"model.embed_tokens.weight": torch.randn(64, 32, generator=g), "model.norm.weight": torch.ones(32)}
    shapes = {"self_attn.q_proj": (32, 32), "self_attn.k_proj": (16, 32), "self_attn.v_proj": (16, 32),
              "self_attn.o_proj": (32, 32), "mlp.gate_proj": (48, 32), "mlp.up_proj": (48, 32),
              "mlp.down_proj": (32, 48)}
    for i in range(2):
        for name, shape in shapes.items():
            state[f"model.layers.{i}.{name}.weight"] = torch.randn(*shape, generator=g)
        for name in ("input_layernorm", "post_attention_layernorm"):
            state[f"model.layers.{i}.{name}.weight"] = torch.ones(32)
    return state


def test_check_passes_and_names_a_product_whose_rows_mix(monkeypatch):
    model = _model()
    assert invariant_sizes(model, SIZES) == SIZES
    mixing = type(model).linear
    monkeypatch.setattr(type(model), "linear", lambda self, x, w, *rest: mixing(self, x, w, *rest) + x.sum() * 1e-3)
    with pytest.raises(NotRowInvariant, match="layer 0 qkv"):
        invariant_sizes(model, SIZES)


def test_a_size_whose_rows_differ_from_the_full_pass_is_dropped(monkeypatch):
    """A product that rounds differently below 128 rows (as a split-K kernel would): the 64-row size goes, the rest
    stay; the check compares each size with the full pass, not only with itself."""
    model = _model()
    plain = type(model).linear
    monkeypatch.setattr(type(model), "linear",
                        lambda self, x, w, *rest: plain(self, x, w, *rest) * (1 + 1e-3 * (x.shape[0] < 128)))
    assert invariant_sizes(model, SIZES) == SIZES[1:]


def test_the_mixed_policy_checks_the_split_products_the_forward_runs(monkeypatch):
    """fp16-mixed with the adds inside the matmuls (the CUDA defaults): the check runs the output projections
    through `project` (adding into a float32 residual) and the answer rows' products and the LM head as split
    products of float32 activations; rows mixing there are caught and named."""
    model = build_model(CONFIG, _state(), weights_hash="x", fuse=True, residual_in_matmul=True,
                        precision=Precision.mixed(torch.float16))
    assert invariant_sizes(model, SIZES) == SIZES
    split = split_product.split_mm
    mixing = lambda x, w: split(x, w) + x.sum() * 1e-3 * (x.dtype == torch.float32)  # noqa: E731
    monkeypatch.setattr(split_product, "split_mm", mixing)
    with pytest.raises(NotRowInvariant, match="last layer gate_up"):
        invariant_sizes(model, SIZES)
    monkeypatch.setattr(split_product, "split_mm", split)
    add = split_product.add_product
    monkeypatch.setattr(split_product, "add_product", lambda r, a, w: add(r, a, w).add_(a.float().sum() * 1e-3))
    with pytest.raises(NotRowInvariant, match="layer 0 o"):
        invariant_sizes(model, SIZES)
