"""Qwen3.5 (`qwen3_5`): the text model's config, from a text checkpoint (`qwen3_5_text`, Qwen3_5ForCausalLM) or
the text part of a multimodal one (`qwen3_5`, Qwen3_5ForConditionalGeneration: its `text_config`, and weights
under `model.language_model.`, renamed by `text_weights`; the vision tower and the multi-token-prediction head are
left out)."""

from __future__ import annotations

from typing import Any

import torch

from spinfc.runtime.weights.config import LinearAttention, ModelConfig, UnsupportedModel, _refuse_rope_scaling

_MULTIMODAL_PREFIX = "model.language_model."
_LEFT_OUT = ("model.visual.", "mtp.")


def qwen3_5_config(hf: dict[str, Any]) -> ModelConfig:
    """The `ModelConfig` of a Qwen3.5 config.json (dense; the MoE variant is refused with a message)."""
    if hf.get("model_type", "").startswith("qwen3_5_moe"):
        raise UnsupportedModel("qwen3_5_moe (Qwen3.5's mixture of experts) is not implemented yet; spinfc runs the "
                               "dense Qwen3.5 (model_type qwen3_5 or qwen3_5_text)")
    text = hf["text_config"] if hf.get("model_type") == "qwen3_5" and hf.get("text_config") else hf
    layers = text["num_hidden_layers"]
    kinds = text.get("layer_types")
    if kinds is None:
        interval = text.get("full_attention_interval", 4)
        kinds = ["linear_attention" if (i + 1) % interval else "full_attention" for i in range(layers)]
    unknown = sorted(set(kinds) - {"linear_attention", "full_attention"})
    if unknown or len(kinds) != layers:
        raise UnsupportedModel(f"qwen3_5: layer_types must name {layers} layers, each linear_attention or "
                               f"full_attention (got {unknown or len(kinds)})")
    if text.get("hidden_act", "silu") != "silu" or text.get("attention_bias"):
        raise UnsupportedModel("qwen3_5: spinfc supports hidden_act silu without attention biases")
    rope = dict(text.get("rope_parameters") or {})
    rope.setdefault("rope_theta", text.get("rope_theta", 10_000_000.0))
    _refuse_rope_scaling(text.get("rope_scaling"), {k: v for k, v in rope.items() if k == "rope_type"})
    partial = float(rope.get("partial_rotary_factor", text.get("partial_rotary_factor", 0.25)))
    heads = text["num_attention_heads"]
    head_dim = text.get("head_dim") or text["hidden_size"] // heads
    return ModelConfig(
        family="qwen3_5",
        hidden=text["hidden_size"],
        layers=layers,
        heads=heads,
        kv_heads=text.get("num_key_value_heads") or heads,
        head_dim=head_dim,
        intermediate=text["intermediate_size"],
        vocab=text["vocab_size"],
        rope_theta=float(rope["rope_theta"]),
        norm_eps=float(text.get("rms_norm_eps", 1e-6)),
        tie_embeddings=bool(text.get("tie_word_embeddings", hf.get("tie_word_embeddings", False))),
        linear=LinearAttention(
            layers=tuple(kind == "linear_attention" for kind in kinds),
            key_heads=text.get("linear_num_key_heads", 16),
            value_heads=text.get("linear_num_value_heads", 32),
            key_dim=text.get("linear_key_head_dim", 128),
            value_dim=text.get("linear_value_head_dim", 128),
            conv_kernel=text.get("linear_conv_kernel_dim", 4),
        ),
        rotary_dim=int(head_dim * partial),
    )


def text_weights(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A checkpoint's weights in the text model's naming: `model.language_model.X` -> `model.X`, the vision tower
    and the multi-token-prediction layers left out (a text checkpoint comes back as it is, less `mtp.`)."""
    out = {}
    for name, tensor in state.items():
        if name.startswith(_LEFT_OUT):
            continue
        out["model." + name[len(_MULTIMODAL_PREFIX):] if name.startswith(_MULTIMODAL_PREFIX) else name] = tensor
    return out
