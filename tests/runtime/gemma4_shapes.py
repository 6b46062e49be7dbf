"""Gemma 4 configs for random-weight tests: each published model's feature set on a tiny shape, built from
transformers' own config class. Few layers, but every option of the model it stands for is on, and the layer types
are placed so that each option is exercised (shared layers of both types read different sources; a window of 6
positions that the question trees cross).

    gemma4-e2b      the small dense models (E2B/E4B): one KV head, per-layer input embeddings, the last two
                    layers reading earlier layers' K/V, double-wide MLPs on those, full layers twice as wide
    gemma4-31b      the large dense model: k = v on full layers with their own KV head count, 256-wide sliding and
                    512-wide full heads (the published widths), proportional rope on a quarter of the pairs
    gemma4-26b-a4b  the MoE model: a router choosing 2 of 8 experts beside the dense MLP, k = v on full layers
All three soft-cap their logits at 30, as the published models do.
"""

from __future__ import annotations

GEMMA4_FAMILIES = ("gemma4-e2b", "gemma4-31b", "gemma4-26b-a4b")
S, F = "sliding_attention", "full_attention"


def gemma4_config(name: str, vocab: int = 96):
    from transformers import Gemma4TextConfig

    common = dict(vocab_size=vocab, vocab_size_per_layer_input=vocab, hidden_size=64, intermediate_size=96,
                  num_attention_heads=4, max_position_embeddings=512, sliding_window=6, final_logit_softcapping=30.0,
                  rope_parameters={S: {"rope_type": "default", "rope_theta": 300.0},
                                   F: {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                                       "rope_theta": 20000.0}})
    if name == "gemma4-e2b":
        return Gemma4TextConfig(**common, num_hidden_layers=5, num_key_value_heads=1, head_dim=16, global_head_dim=32,
                                layer_types=[S, F, S, S, F], num_kv_shared_layers=2, hidden_size_per_layer_input=8,
                                use_double_wide_mlp=True)
    if name == "gemma4-31b":
        return Gemma4TextConfig(**{**common, "num_attention_heads": 2}, num_hidden_layers=3, num_key_value_heads=2,
                                head_dim=256, global_head_dim=512, num_global_key_value_heads=1, attention_k_eq_v=True,
                                hidden_size_per_layer_input=0, layer_types=[S, F, F])
    if name == "gemma4-26b-a4b":
        return Gemma4TextConfig(**common, num_hidden_layers=3, num_key_value_heads=2, head_dim=16, global_head_dim=32,
                                num_global_key_value_heads=1, attention_k_eq_v=True, hidden_size_per_layer_input=0,
                                enable_moe_block=True, num_experts=8, top_k_experts=2, moe_intermediate_size=24,
                                layer_types=[S, S, F])
    raise KeyError(name)


def randomize(model, generator=None) -> None:
    """Norm weights, the router's scales and each layer's output scale drawn around 1, so that no convention (w or
    1 + w, a scale read or not) can hide behind weights of one."""
    import torch

    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "norm" in name or name.endswith(("router.scale", "per_expert_scale")):
                parameter.normal_(1.0, 0.3, generator=generator)
        for name, buffer in model.named_buffers():
            if name.endswith("layer_scalar"):
                buffer.uniform_(0.5, 1.5, generator=generator)


def write_snapshot(name: str, directory, seed: int = 0):
    """A random-weight Gemma 4 snapshot of `name`'s shape in `directory` (safetensors, config.json, and the packaged
    Gemma 3 tokenizer's files, whose vocabulary Gemma 4 shares in size), written by transformers; returns
    transformers' model (float32, eager attention)."""
    import torch
    from transformers import Gemma4ForCausalLM

    from spinfc.registry import load_tokenizer

    tokenizer = load_tokenizer("gemma3-270m")
    torch.manual_seed(seed)
    config = gemma4_config(name, vocab=len(tokenizer))
    config._attn_implementation = "eager"
    model = Gemma4ForCausalLM(config).eval()
    randomize(model)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return model
