"""`ModelConfig`: the shape of a model, whichever file it came from, and its reading from a Hugging Face
`config.json` dictionary.

A config names only what the stacks need. Features the stacks do not implement (rope scaling, logit soft-capping,
attention biases, other activations) are refused here with a message, never silently ignored.
"""

from __future__ import annotations

import json
from typing import Any, Literal

import attrs

from spinfc.runtime.weights.errors import UnsupportedModel  # noqa: F401 (re-exported)
from spinfc.runtime.weights.gemma4_config import Gemma4Options, from_hf_gemma4

Family = Literal["llama", "qwen3", "gemma3", "gemma4", "qwen3_5"]
FAMILIES: tuple[str, ...] = ("llama", "qwen3", "gemma3", "gemma4", "qwen3_5")



class WeightMismatch(UnsupportedModel):
    """A tensor the stack needs is missing, has the wrong shape, or is one it has no use for: `tensor` is its
    Hugging Face name (the loader names the file that holds it, runtime/weights/folder.py)."""

    def __init__(self, message: str, tensor: str) -> None:
        super().__init__(message)
        self.tensor = tensor


@attrs.frozen
class ModelConfig:
    family: Family
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    rope_theta: float  # the rope base of global (full-attention) layers
    norm_eps: float
    tie_embeddings: bool
    # Gemma 3: sliding layers use a window (in positions) and their own rope base; the scores scale by
    # query_pre_attn_scalar ** -0.5 rather than head_dim ** -0.5.
    rope_local_theta: float | None = None
    sliding_window: int | None = None
    sliding_layers: tuple[bool, ...] = ()  # per layer: True where the layer is a sliding-window layer
    query_pre_attn_scalar: float | None = None
    # Gemma 4: per-layer head shapes, shared K/V, PLE, MoE, ... (weights/gemma4_config.py); None for the others.
    gemma4: "Gemma4Options | None" = None
    # Qwen3.5: the Gated DeltaNet layers' shape (None in other families) and the rotated dims of a head (partial rope)
    linear: "LinearAttention | None" = None
    rotary_dim: int | None = None
    # Qwen3.5 with a vision tower: M-RoPE's (t, h, w) sections of the rotary frequencies (`mrope_section`), which a
    # pass holding images turns by each row's three positions (`Launch.rope_positions`); None: plain rope only
    mrope_sections: tuple[int, ...] | None = None
    # Qwen3.5-MoE: every layer's MLP is a sparse block of routed experts beside a gated shared expert (whose width
    # is `intermediate`); None for dense models (Gemma 4's MoE block is in `gemma4`)
    experts: "Experts | None" = None
    # a decision model (weights/decision_head.py): the codes its head reads, its labels in head order; None: the
    # head reads the vocabulary
    codes: tuple[str, ...] | None = None

    def kv_shape(self, layer: int) -> tuple[int, int]:
        """(kv heads, head dim) of a layer's keys and values (Gemma 4's full layers differ from its sliding ones)."""
        if self.gemma4 is not None:
            return self.gemma4.kv_heads[layer], self.gemma4.head_dims[layer]
        return self.kv_heads, self.head_dim

    @property
    def attention_scale(self) -> float:
        return (self.query_pre_attn_scalar or self.head_dim) ** -0.5

    def is_sliding(self, layer: int) -> bool:
        return bool(self.sliding_layers) and self.sliding_layers[layer]

    def to_json(self) -> str:
        return json.dumps(attrs.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "ModelConfig":
        fields = json.loads(text)
        fields["sliding_layers"] = tuple(fields.get("sliding_layers", ()))
        if fields.get("mrope_sections") is not None:
            fields["mrope_sections"] = tuple(fields["mrope_sections"])
        if fields.get("linear") is not None:
            fields["linear"] = LinearAttention(**{**fields["linear"], "layers": tuple(fields["linear"]["layers"])})
        if fields.get("gemma4") is not None:
            fields["gemma4"] = Gemma4Options.from_dict(fields["gemma4"])
        if fields.get("experts") is not None:
            fields["experts"] = Experts(**fields["experts"])
        if fields.get("codes") is not None:
            fields["codes"] = tuple(fields["codes"])
        return cls(**fields)


@attrs.frozen
class LinearAttention:
    """Qwen3.5's Gated DeltaNet layers: which layers they are, their heads (value heads share key heads in groups)
    and the depthwise causal convolution's kernel size."""

    layers: tuple[bool, ...]  # per layer: True where the layer is a linear-attention (Gated DeltaNet) layer
    key_heads: int
    value_heads: int
    key_dim: int
    value_dim: int
    conv_kernel: int

    @property
    def conv_channels(self) -> int:
        """The channels of the convolution: q, k and v of every head (2 Hk Dk + Hv Dv)."""
        return 2 * self.key_heads * self.key_dim + self.value_heads * self.value_dim


@attrs.frozen
class Experts:
    """A sparse MoE block's shape: `count` experts of width `intermediate`, `top_k` chosen per token (their softmax
    weights renormalised over the chosen), beside one shared expert gated per token by sigmoid(w . x)."""

    count: int
    top_k: int
    intermediate: int


def _rope_theta(hf: dict[str, Any], layer_type: str | None = None, default: float = 10000.0) -> float:
    """The rope base, from transformers 4's `rope_theta` or 5's `rope_parameters` (flat, or per layer type)."""
    params = hf.get("rope_parameters") or {}
    if layer_type is not None and isinstance(params.get(layer_type), dict):
        params = params[layer_type]
    _refuse_rope_scaling(hf.get("rope_scaling"), params)
    if "rope_theta" in params:
        return float(params["rope_theta"])
    key = "rope_local_base_freq" if layer_type == "sliding_attention" else "rope_theta"
    return float(hf.get(key, default))


def _refuse_rope_scaling(*settings: dict | None) -> None:
    for setting in settings:
        kind = (setting or {}).get("rope_type", (setting or {}).get("type", "default"))
        if setting and kind != "default":
            raise UnsupportedModel(
                f"rope scaling of type {kind!r} is not implemented by spinfc's model stacks; "
                "use a checkpoint without rope scaling"
            )


def _require(hf: dict[str, Any], key: str, allowed: tuple, what: str) -> None:
    if hf.get(key) not in allowed:
        raise UnsupportedModel(f"{what}: config.json has {key}={hf.get(key)!r}; spinfc supports {allowed}")


def from_hf(hf: dict[str, Any]) -> ModelConfig:
    """Read a Hugging Face `config.json` dictionary of a llama, qwen3, gemma3(_text), gemma4(_text) or qwen3_5 model;
    a `*ForSequenceClassification` checkpoint of one is a decision model (`codes`: weights/decision_head.py)."""
    from spinfc.runtime.weights.decision_head import codes_of

    codes = codes_of(hf, UnsupportedModel)
    config = _stack_config(hf)
    return config if codes is None else attrs.evolve(config, codes=codes)


def _stack_config(hf: dict[str, Any]) -> ModelConfig:
    """The config of the stack (everything but a decision model's codes)."""
    model_type = hf.get("model_type")
    if model_type in ("qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text"):
        from spinfc.runtime.weights.qwen3_5 import qwen3_5_config

        return qwen3_5_config(hf)
    if model_type in ("gemma4", "gemma4_text"):
        return from_hf_gemma4(hf, UnsupportedModel)
    if model_type == "gemma3" and isinstance(hf.get("text_config"), dict):  # multimodal: its towers are separate
        hf = {"tie_word_embeddings": hf.get("tie_word_embeddings", True), **hf["text_config"],
              "model_type": "gemma3_text"}
        model_type = "gemma3_text"
    family = {"llama": "llama", "qwen3": "qwen3", "gemma3_text": "gemma3"}.get(model_type)
    if model_type == "gemma3":
        raise UnsupportedModel("a multimodal Gemma 3 config.json without its text_config: use the checkpoint's own "
                               "config.json")
    if family is None:
        raise UnsupportedModel(
            f"model_type {model_type!r} is not supported; spinfc runs llama, qwen3, gemma3_text, gemma3, gemma4 and "
            "qwen3_5"
        )
    heads = hf["num_attention_heads"]
    common = dict(
        family=family,
        hidden=hf["hidden_size"],
        layers=hf["num_hidden_layers"],
        heads=heads,
        kv_heads=hf.get("num_key_value_heads") or heads,
        head_dim=hf.get("head_dim") or hf["hidden_size"] // heads,
        intermediate=hf["intermediate_size"],
        vocab=hf["vocab_size"],
        norm_eps=float(hf.get("rms_norm_eps", 1e-6)),
        tie_embeddings=bool(hf.get("tie_word_embeddings", family == "gemma3")),
    )
    _require(hf, "attention_bias", (None, False), family)
    if family in ("llama", "qwen3"):
        _require(hf, "hidden_act", (None, "silu"), family)
        _require(hf, "mlp_bias", (None, False), family)
        if family == "qwen3":
            _require(hf, "use_sliding_window", (None, False), family)
        return ModelConfig(rope_theta=_rope_theta(hf), **common)
    _require(hf, "hidden_activation", ("gelu_pytorch_tanh",), family)
    _require(hf, "final_logit_softcapping", (None,), family)
    _require(hf, "attn_logit_softcapping", (None,), family)
    _require(hf, "use_bidirectional_attention", (None, False), family)
    layer_types = hf.get("layer_types")
    if layer_types is None:
        pattern = hf.get("sliding_window_pattern", hf.get("_sliding_window_pattern", 6))
        layer_types = ["sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(common["layers"])]
    return ModelConfig(
        rope_theta=_rope_theta(hf, "full_attention", 1_000_000.0),
        rope_local_theta=_rope_theta(hf, "sliding_attention", 10_000.0),
        sliding_window=hf.get("sliding_window", 4096),
        sliding_layers=tuple(kind == "sliding_attention" for kind in layer_types),
        query_pre_attn_scalar=float(hf.get("query_pre_attn_scalar", 256)),
        **common,
    )
