"""Gemma 3's config: the text stack's (`gemma3_text`, or the `text_config` of a multimodal `gemma3`), with what
only Gemma has: sliding-window layers with their own rope base, and scores scaled by query_pre_attn_scalar ** -0.5
rather than head_dim ** -0.5 (`Gemma3Config`, which Gemma 4's config extends); and how its GGUF files are read
(`GGUF`)."""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from spinfc.runtime.weights.config import ModelConfig, UnsupportedModel, require, rope_theta, shared_fields
from spinfc.runtime.weights.gguf_file import GgufReading


@attrs.frozen(kw_only=True)
class Gemma3Config(ModelConfig):
    rope_local_theta: float  # the rope base of sliding layers
    sliding_window: int | None  # in positions
    sliding_layers: tuple[bool, ...]  # per layer: True where the layer is a sliding-window layer
    query_pre_attn_scalar: float

    @property
    def attention_scale(self) -> float:
        return (self.query_pre_attn_scalar or self.head_dim) ** -0.5

    def is_sliding(self, layer: int) -> bool:
        """Whether the layer is a sliding-window layer (its own rope base, a window)."""
        return bool(self.sliding_layers) and self.sliding_layers[layer]

    def window(self, layer: int) -> int | None:
        return self.sliding_window if self.is_sliding(layer) else None


def read_config(hf: dict[str, Any]) -> Gemma3Config:
    """A `gemma3_text` config.json, or the text part of a multimodal `gemma3` one (its towers are read apart)."""
    if hf.get("model_type") == "gemma3":
        if not isinstance(hf.get("text_config"), dict):
            raise UnsupportedModel("a multimodal Gemma 3 config.json without its text_config: use the checkpoint's "
                                   "own config.json")
        hf = {"tie_word_embeddings": hf.get("tie_word_embeddings", True), **hf["text_config"],
              "model_type": "gemma3_text"}
    fields = shared_fields(hf, "gemma3", tie_default=True)
    for key, allowed in (("attention_bias", (None, False)), ("hidden_activation", ("gelu_pytorch_tanh",)),
                         ("final_logit_softcapping", (None,)), ("attn_logit_softcapping", (None,)),
                         ("use_bidirectional_attention", (None, False))):
        require(hf, key, allowed, "gemma3")
    layer_types = hf.get("layer_types")
    if layer_types is None:
        pattern = hf.get("sliding_window_pattern", hf.get("_sliding_window_pattern", 6))
        layer_types = ["sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(fields["layers"])]
    return Gemma3Config(
        rope_theta=rope_theta(hf, "full_attention", 1_000_000.0),
        rope_local_theta=rope_theta(hf, "sliding_attention", 10_000.0),
        sliding_window=hf.get("sliding_window", 4096),
        sliding_layers=tuple(kind == "sliding_attention" for kind in layer_types),
        query_pre_attn_scalar=float(hf.get("query_pre_attn_scalar", 256)),
        **fields,
    )


def _gguf_config(get, fields: dict[str, Any]) -> Gemma3Config:
    """Metadata a Gemma 3 GGUF may not carry is set as llama.cpp sets it: a sliding layer pattern of 6 (every
    sixth layer global), a local rope base of 10,000, and the score scale 1/sqrt(head_dim) (27B:
    1/sqrt(hidden/heads)); the keys `attention.sliding_window_pattern`, `rope.freq_base_swa` and `attention.scale`
    override them."""
    hidden, heads, layers = fields["hidden"], fields["heads"], fields["layers"]
    pattern = get("attention.sliding_window_pattern", 6)
    if isinstance(pattern, int):
        pattern = [bool((i + 1) % pattern) for i in range(layers)]
    scale = get("attention.scale")
    return Gemma3Config(
        rope_local_theta=float(get("rope.freq_base_swa", 10_000.0)),
        sliding_window=get("attention.sliding_window"),
        sliding_layers=tuple(bool(sliding) for sliding in pattern),
        query_pre_attn_scalar=float(scale**-2 if scale else hidden // heads if layers == 62 else fields["head_dim"]),
        **fields,
    )


def _undo_offset(name: str, weight, config):
    """llama.cpp stores every `*norm.weight` as w + 1 (the stack multiplies by 1 + w)."""
    return weight - np.float32(1.0) if name.endswith("norm.weight") else weight


def _hf_keys(config: Gemma3Config) -> dict[str, Any]:
    return dict(
        architectures=["Gemma3ForCausalLM"], model_type="gemma3_text",
        hidden_activation="gelu_pytorch_tanh", rope_local_base_freq=config.rope_local_theta,
        sliding_window=config.sliding_window, query_pre_attn_scalar=_whole(config.query_pre_attn_scalar),
        layer_types=["sliding_attention" if s else "full_attention" for s in config.sliding_layers],
        final_logit_softcapping=None, attn_logit_softcapping=None,
    )


def _whole(value: float | None):
    """An integral float as an int: transformers' Gemma 3 config types query_pre_attn_scalar as int and refuses
    256.0 when a checkpoint's config.json is read back (by the tokenizer of a `spinfc quantize` directory)."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


GGUF = GgufReading(
    "gemma3",
    {"ffn_norm": "pre_feedforward_layernorm", "post_attention_norm": "post_attention_layernorm",
     "post_ffw_norm": "post_feedforward_layernorm"},
    rope_base=1_000_000.0, read_config=_gguf_config, undo=_undo_offset, hf_keys=_hf_keys,
)
