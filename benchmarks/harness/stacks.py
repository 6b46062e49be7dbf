"""Random-weight stacks built in memory (no files), one place for every family a study builds this way:

    random_state_dict(config)         Llama, Qwen3 and Gemma 3: float32 weights in Hugging Face naming for a
                                      `ModelConfig` (LLAMA3_8B, TINY, SMALL_CONFIGS), scaled so activations stay
                                      O(1) and next-token distributions are far from uniform (a parity check
                                      compares something)
    gemma4_state(config, precision)   Gemma 4 (any feature set), made on the device in each weight's dtype
    qwen3_5_state(config)             Qwen3.5 (QWEN3_5_27B, fewer layers or tiny widths)

`spinfc.runtime.models.build_model(config, state, ...)` makes the stack; `start_engine(settings, load_model=...)` or
`serving.served(..., loader=...)` serves it. A study that can write its model serves a snapshot instead
(harness/models.py).
"""

from __future__ import annotations

import torch

from spinfc.runtime.models.gemma3 import Gemma3Config
from spinfc.runtime.models.qwen3_5 import LinearAttention, Qwen3_5Config
from spinfc.runtime.weights.config import ModelConfig


def random_state_dict(config: ModelConfig, device, seed: int) -> dict[str, torch.Tensor]:
    """float32 weights in Hugging Face naming, scaled so activations stay O(1) and the next-token distributions
    are far from uniform (so a parity check compares something)."""
    g = torch.Generator(device=device).manual_seed(seed)
    c = config
    gemma = c.family == "gemma3"

    def normal(*shape, std=1.0):
        return torch.randn(*shape, generator=g, device=device) * std

    def norm(n):  # Gemma multiplies by (1 + w)
        return normal(n, std=0.1) + (0.0 if gemma else 1.0)

    # Gemma scales embeddings by sqrt(hidden) and ties them to its LM head: a smaller std keeps each token from
    # predicting itself with a logit of sqrt(hidden).
    state = {"model.embed_tokens.weight": normal(c.vocab, c.hidden, std=0.5 / c.hidden**0.5 if gemma else 1.0),
             "model.norm.weight": norm(c.hidden)}
    if not c.tie_embeddings:
        state["lm_head.weight"] = normal(c.vocab, c.hidden, std=0.5 / c.hidden**0.5)  # logits ~ N(0, 1/4)
    shapes = {"q_proj": (c.heads * c.head_dim, c.hidden), "k_proj": (c.kv_heads * c.head_dim, c.hidden),
              "v_proj": (c.kv_heads * c.head_dim, c.hidden), "o_proj": (c.hidden, c.heads * c.head_dim)}
    mlp = {"gate_proj": (c.intermediate, c.hidden), "up_proj": (c.intermediate, c.hidden),
           "down_proj": (c.hidden, c.intermediate)}
    for i in range(c.layers):
        p = f"model.layers.{i}."
        # The blocks' output projections are scaled down, so each layer adds a small update to the residual
        # stream, as in a trained model (at full scale, bf16 noise alone grows past a useful tolerance).
        for name, (n_out, n_in) in shapes.items():
            std = n_in**-0.5 * (0.2 if name == "o_proj" else 1.0)
            state[p + f"self_attn.{name}.weight"] = normal(n_out, n_in, std=std)
        for name, (n_out, n_in) in mlp.items():
            std = n_in**-0.5 * (0.2 if name == "down_proj" else 1.0)
            state[p + f"mlp.{name}.weight"] = normal(n_out, n_in, std=std)
        norms = ["input_layernorm", "post_attention_layernorm"]
        if gemma:
            norms += ["pre_feedforward_layernorm", "post_feedforward_layernorm"]
        for name in norms:
            state[p + f"{name}.weight"] = norm(c.hidden)
        if gemma:  # Gemma norms each block's output before adding it: scale those norms down instead
            for name in ("post_attention_layernorm", "post_feedforward_layernorm"):
                state[p + f"{name}.weight"] = normal(c.hidden, std=0.02) - 0.8
        if c.family in ("qwen3", "gemma3"):
            state[p + "self_attn.q_norm.weight"] = norm(c.head_dim)
            state[p + "self_attn.k_norm.weight"] = norm(c.head_dim)
    return state


SMALL_CONFIGS = {
    # head dim 128 (Llama 3's), GQA 4:2
    "llama": ModelConfig(family="llama", hidden=512, layers=4, heads=4, kv_heads=2, head_dim=128, intermediate=1024,
                         vocab=8192, rope_theta=500000.0, norm_eps=1e-5, tie_embeddings=False),
    # head dim 64, q/k norms
    "qwen3": ModelConfig(family="qwen3", hidden=256, layers=3, heads=4, kv_heads=2, head_dim=64, intermediate=768,
                         vocab=8192, rope_theta=1000000.0, norm_eps=1e-6, tie_embeddings=False),
    # head dim 256, one kv head, sliding-window layers (window 48 positions), GELU-tanh, (1 + w) norms
    "gemma3": Gemma3Config(family="gemma3", hidden=384, layers=4, heads=4, kv_heads=1, head_dim=256,
                          intermediate=1024, vocab=8192, rope_theta=1000000.0, norm_eps=1e-6, tie_embeddings=True,
                          rope_local_theta=10000.0, sliding_window=48, sliding_layers=(True, True, False, True),
                          query_pre_attn_scalar=256.0),
}

LLAMA3_8B = ModelConfig(family="llama", hidden=4096, layers=32, heads=32, kv_heads=8, head_dim=128,
                        intermediate=14336, vocab=128256, rope_theta=500000.0, norm_eps=1e-5, tie_embeddings=False)


def non_embedding_params(c: ModelConfig) -> int:
    """Parameters that every token multiplies through (the embedding lookup and the LM head excluded)."""
    per_layer = c.hidden * (c.heads + 2 * c.kv_heads) * c.head_dim + c.heads * c.head_dim * c.hidden
    per_layer += 3 * c.hidden * c.intermediate + 2 * c.hidden
    return c.layers * per_layer + c.hidden


# the --smoke model: the 8B's family at widths the Triton interpreter runs in seconds
TINY = ModelConfig(family="llama", hidden=128, layers=2, heads=4, kv_heads=2, head_dim=32, intermediate=256,
                   vocab=512, rope_theta=500000.0, norm_eps=1e-5, tie_embeddings=False)


# Qwen3.5-27B's text config (hidden 5120, 64 layers: 48 Gated DeltaNet, 16 gated attention of 24 heads of 256 over
# 4 kv heads; linear attention 16 key heads and 48 value heads of 128, conv kernel 4; partial rotary 0.25).
QWEN3_5_27B = Qwen3_5Config(
    family="qwen3_5", hidden=5120, layers=64, heads=24, kv_heads=4, head_dim=256, intermediate=17408, vocab=248320,
    rope_theta=10_000_000.0, norm_eps=1e-6, tie_embeddings=False, rotary_dim=64,
    linear=LinearAttention(layers=tuple((i + 1) % 4 != 0 for i in range(64)), key_heads=16, value_heads=48,
                           key_dim=128, value_dim=128, conv_kernel=4))


def qwen3_5_state(c: Qwen3_5Config, device, seed: int = 0, dtype=torch.bfloat16) -> dict[str, torch.Tensor]:
    """Random weights in Hugging Face naming; output projections scaled down (each block a small update)."""
    g = torch.Generator(device=device).manual_seed(seed)
    lin = c.linear

    def normal(*size, std=1.0):
        return (torch.randn(*size, generator=g, device=device) * std).to(dtype)

    def linear(n_out, n_in, scale=1.0):
        return normal(n_out, n_in, std=scale * n_in**-0.5)

    state = {"model.embed_tokens.weight": normal(c.vocab, c.hidden), "model.norm.weight": normal(c.hidden, std=0.1),
             "lm_head.weight": linear(c.vocab, c.hidden, 0.5)}
    for i in range(c.layers):
        p = f"model.layers.{i}."
        state[p + "input_layernorm.weight"] = normal(c.hidden, std=0.1)
        state[p + "post_attention_layernorm.weight"] = normal(c.hidden, std=0.1)
        state[p + "mlp.gate_proj.weight"] = linear(c.intermediate, c.hidden)
        state[p + "mlp.up_proj.weight"] = linear(c.intermediate, c.hidden)
        state[p + "mlp.down_proj.weight"] = linear(c.hidden, c.intermediate, 0.2)
        if lin.layers[i]:
            a = p + "linear_attn."
            state[a + "in_proj_qkv.weight"] = linear(lin.conv_channels, c.hidden)
            state[a + "in_proj_z.weight"] = linear(lin.value_heads * lin.value_dim, c.hidden)
            state[a + "in_proj_b.weight"] = linear(lin.value_heads, c.hidden)
            state[a + "in_proj_a.weight"] = linear(lin.value_heads, c.hidden)
            state[a + "conv1d.weight"] = normal(lin.conv_channels, 1, lin.conv_kernel, std=0.5)
            state[a + "A_log"] = torch.empty(lin.value_heads, device=device).uniform_(0.01, 16, generator=g).log()
            state[a + "dt_bias"] = torch.ones(lin.value_heads, device=device)
            state[a + "norm.weight"] = (1 + normal(lin.value_dim, std=0.1).float()).to(dtype)
            state[a + "out_proj.weight"] = linear(c.hidden, lin.value_heads * lin.value_dim, 0.2)
        else:
            s = p + "self_attn."
            state[s + "q_proj.weight"] = linear(2 * c.heads * c.head_dim, c.hidden)
            state[s + "k_proj.weight"] = linear(c.kv_heads * c.head_dim, c.hidden)
            state[s + "v_proj.weight"] = linear(c.kv_heads * c.head_dim, c.hidden)
            state[s + "o_proj.weight"] = linear(c.hidden, c.heads * c.head_dim, 0.2)
            state[s + "q_norm.weight"] = normal(c.head_dim, std=0.1)
            state[s + "k_norm.weight"] = normal(c.head_dim, std=0.1)
    return state


def qwen3_5_params(c: Qwen3_5Config) -> int:
    """Qwen3.5's `non_embedding_params`: Gated DeltaNet and gated attention layers."""
    lin, per_full, per_linear = c.linear, 0, 0
    mlp = 3 * c.hidden * c.intermediate
    per_full = c.hidden * (2 * c.heads + 2 * c.kv_heads) * c.head_dim + c.heads * c.head_dim * c.hidden + mlp
    per_linear = c.hidden * (lin.conv_channels + lin.value_heads * lin.value_dim + 2 * lin.value_heads)
    per_linear += lin.value_heads * lin.value_dim * c.hidden + mlp
    return sum(per_linear if linear else per_full for linear in lin.layers)


def weight_shapes(config) -> dict[str, tuple[int, ...]]:
    """Every weight of a Gemma 4 text stack, Hugging Face name -> shape."""
    from spinfc.runtime.models.gemma4 import layer_weight_names

    c, g = config, config.gemma4
    D, H, P, L = c.hidden, c.heads, g.per_layer_hidden, c.layers
    shapes = {"model.embed_tokens.weight": (c.vocab, D), "model.norm.weight": (D,)}
    if P:
        shapes.update({"model.embed_tokens_per_layer.weight": (g.per_layer_vocab, L * P),
                       "model.per_layer_model_projection.weight": (L * P, D),
                       "model.per_layer_projection_norm.weight": (P,)})
    for i in range(L):
        Hk, Dh = c.kv_shape(i)
        wide = (2 if g.double_wide_mlp and not g.owns_kv(i) else 1) * c.intermediate
        E, I = g.experts, g.moe_intermediate
        by_short = {"q": (H * Dh, D), "k": (Hk * Dh, D), "v": (Hk * Dh, D), "o": (D, H * Dh), "q_norm": (Dh,),
                    "k_norm": (Dh,), "gate": (wide, D), "up": (wide, D), "down": (D, wide), "scalar": (1,),
                    "ple_gate": (P, D), "ple_projection": (D, P), "router": (E, D), "router_scale": (D,),
                    "expert_scale": (E,), "experts_gate_up": (E, 2 * I, D), "experts_down": (E, D, I)}
        for short, long in layer_weight_names(c, i).items():
            shapes[f"model.layers.{i}.{long}"] = by_short.get(short, (D,))  # the rest are [D] norms
    return shapes


def gemma4_state(config, precision, device: str, seed: int = 0) -> dict[str, torch.Tensor]:
    """Random weights made on `device` directly in the dtype `precision` keeps each in (no float32 copy of a
    large model), scaled so activations stay O(1): matrices N(0, 1/fan_in), the blocks' post-norms small, other
    norms and scales around 1."""
    g = torch.Generator(device=device).manual_seed(seed)
    state = {}
    for name, shape in weight_shapes(config).items():
        dtype = precision.dtype_of(name, config.layers - 1)
        t = torch.empty(shape, dtype=dtype, device=device)
        if len(shape) == 1:
            small = "post_" in name and "per_layer" not in name
            t.normal_(0.1 if small else 1.0, 0.02 if small else 0.1, generator=g)
        else:
            t.normal_(0.0, 0.5 / shape[-1] ** 0.5 if "embed_tokens.weight" in name else shape[-1] ** -0.5,
                      generator=g)
        state[name] = t
    return state


def gemma4_params(config) -> int:
    """Gemma 4's `non_embedding_params`: the layers (the embedding tables and the LM head excluded)."""
    return sum(torch.Size(s).numel() for n, s in weight_shapes(config).items() if n.startswith("model.layers."))
