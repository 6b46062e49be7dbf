"""Gemma 4's text config (`gemma4_text`, or the `text_config` of a multimodal `gemma4`) read into a `Gemma4Config`:
Gemma 3's (sliding layers) and, in its `gemma4` field, what only this family has (`Gemma4Options`).

What each option does (transformers' models/gemma4/modeling_gemma4.py is the definition):
  layer_types              per layer, sliding-window or full attention (5:1 by default, the last always full)
  head_dim / global_head_dim   the head width of sliding / full layers (256 / 512 in the published models)
  num_global_key_value_heads   the KV head count of full layers (only where attention_k_eq_v is set)
  rope_parameters          per layer type: `default` (every pair rotated) or `proportional` (the first
                           partial_rotary_factor of the pairs rotated, at frequencies of the full head width; the
                           rest pass through)
  attention_k_eq_v         full layers have no v_proj: the key projection (before its norm and rope) is the value
  num_kv_shared_layers     the last N layers compute no K/V: each reads the K/V of the last earlier layer of its
                           type (after that layer's norms and rope)
  hidden_size_per_layer_input  per-layer input embeddings (PLE): a second token table and a projection of the
                           embeddings give each layer a small vector, gated into the residual after the MLP
  final_logit_softcapping  logits become cap * tanh(logits / cap)
  use_double_wide_mlp      the KV-shared layers' MLP is twice as wide
  enable_moe_block         each layer adds a mixture of experts (a router picks top_k_experts of num_experts, each
                           a GELU-gated MLP of moe_intermediate_size) beside its dense MLP
Norms multiply by w (not 1 + w), v is normed without a weight, and attention scores are not scaled (q and k are
normed instead).
"""

from __future__ import annotations

from typing import Any

import attrs

from spinfc.runtime.models.gemma3.config import Gemma3Config
from spinfc.runtime.weights.config import UnsupportedModel

# Weights of a multimodal checkpoint that the text stack does not read (the towers and their projections).
_MEDIA_PREFIXES = ("model.vision_tower.", "model.audio_tower.", "model.embed_vision.", "model.embed_audio.")

# The defaults transformers applies when config.json leaves a key out (configuration_gemma4.py).
_ROPE_DEFAULTS = {
    "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0},
    "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1_000_000.0},
}


@attrs.frozen
class Gemma4Options:
    head_dims: tuple[int, ...]  # per layer
    kv_heads: tuple[int, ...]  # per layer
    kv_source: tuple[int, ...]  # per layer: the layer whose K/V it attends to (itself, or a shared one's source)
    rope_fractions: tuple[float, float]  # (sliding, full): the fraction of each head's rotary pairs rotated
    k_eq_v: bool  # full layers' values are their keys
    per_layer_hidden: int  # PLE width per layer; 0: no per-layer input
    per_layer_vocab: int
    logit_softcap: float | None
    double_wide_mlp: bool
    experts: int  # 0: no MoE block
    top_k: int
    moe_intermediate: int

    def owns_kv(self, layer: int) -> bool:
        return self.kv_source[layer] == layer

    def has_values(self, layer: int, sliding: bool) -> bool:
        """Whether the layer has its own v_proj."""
        return self.owns_kv(layer) and not (self.k_eq_v and not sliding)

    @classmethod
    def from_dict(cls, fields: dict) -> "Gemma4Options":
        tuples = ("head_dims", "kv_heads", "kv_source", "rope_fractions")
        return cls(**{k: tuple(v) if k in tuples else v for k, v in fields.items()})


@attrs.frozen(kw_only=True)
class Gemma4Config(Gemma3Config):
    gemma4: Gemma4Options

    def kv_shape(self, layer: int) -> tuple[int, int]:
        """(kv heads, head dim) of a layer's keys and values: full layers differ from sliding ones."""
        return self.gemma4.kv_heads[layer], self.gemma4.head_dims[layer]

    @classmethod
    def from_fields(cls, fields: dict) -> "Gemma4Config":
        return super().from_fields({**fields, "gemma4": Gemma4Options.from_dict(fields["gemma4"])})


def text_config(hf: dict[str, Any]) -> dict[str, Any]:
    """The text part of a `gemma4` (multimodal) or `gemma4_text` config.json."""
    return hf.get("text_config") or {} if hf.get("model_type") == "gemma4" else hf


def _rope(hf: dict, kind: str) -> tuple[float, float]:
    """(theta, rotated fraction) of a layer type."""
    params = (hf.get("rope_parameters") or {}).get(kind) or _ROPE_DEFAULTS[kind]
    rope_type = params.get("rope_type", "default")
    if rope_type not in ("default", "proportional") or float(params.get("factor", 1.0)) != 1.0:
        raise UnsupportedModel(f"gemma4 {kind} layers use rope {rope_type!r} (factor {params.get('factor', 1.0)}); "
                               "spinfc implements Gemma 4's default and proportional rope without scaling")
    fraction = float(params.get("partial_rotary_factor", 1.0)) if rope_type == "proportional" else 1.0
    return float(params.get("rope_theta", _ROPE_DEFAULTS[kind]["rope_theta"])), fraction


def _per_layer_heads(hf: dict, layer_types: list[str]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(head_dim, kv_heads) per layer: transformers 5.24 writes `per_layer_config` overrides; published configs
    and older versions have `global_head_dim` (default 512) and `num_global_key_value_heads` (used with k = v)."""
    head_dim, kv_heads = hf.get("head_dim", 256), hf.get("num_key_value_heads", 4)
    overrides = {int(k): v for k, v in (hf.get("per_layer_config") or {}).items()}
    if not overrides:
        full = {"head_dim": hf.get("global_head_dim", 512)}
        if hf.get("attention_k_eq_v") and hf.get("num_global_key_value_heads"):
            full["num_key_value_heads"] = hf["num_global_key_value_heads"]
        overrides = {i: full for i, kind in enumerate(layer_types) if kind == "full_attention"}
    dims = tuple(int(overrides.get(i, {}).get("head_dim", head_dim)) for i in range(len(layer_types)))
    heads = tuple(int(overrides.get(i, {}).get("num_key_value_heads", kv_heads)) for i in range(len(layer_types)))
    return dims, heads


def kv_sources(layer_types: list[str], shared: int) -> tuple[int, ...]:
    """Per layer, the layer whose K/V it reads: itself, or for the last `shared` layers the last earlier layer of
    the same type that has its own (transformers' `kv_sharing_modes`: "store" and "reuse")."""
    first_shared = len(layer_types) - shared
    sources = []
    for i, kind in enumerate(layer_types):
        if i < first_shared:
            sources.append(i)
            continue
        owners = [j for j in range(first_shared) if layer_types[j] == kind]
        if not owners:
            raise ValueError(f"layer {i} ({kind}) shares K/V but no earlier layer of its type computes them")
        sources.append(owners[-1])
    return tuple(sources)


def read_config(hf: dict[str, Any]) -> Gemma4Config:
    """The config of the text stack of a Gemma 4 config.json (either model_type)."""
    text = text_config(hf)
    if not text:
        raise UnsupportedModel("a gemma4 config.json without a text_config: spinfc runs Gemma 4's text stack")
    if text.get("hidden_activation", "gelu_pytorch_tanh") != "gelu_pytorch_tanh":
        raise UnsupportedModel(f"gemma4: hidden_activation {text.get('hidden_activation')!r}; spinfc supports "
                               "gelu_pytorch_tanh")
    if text.get("attention_bias"):
        raise UnsupportedModel("gemma4: attention_bias is set; spinfc's stack has no attention biases")
    if text.get("use_bidirectional_attention") == "all":
        raise UnsupportedModel("gemma4: use_bidirectional_attention='all' (an encoder) cannot score causally")
    layers = int(text.get("num_hidden_layers", 30))
    layer_types = list(text.get("layer_types") or
                       ["sliding_attention" if (i + 1) % 6 else "full_attention" for i in range(layers)])
    layer_types[-1] = "full_attention"  # as transformers forces it
    head_dims, kv_heads = _per_layer_heads(text, layer_types)
    local_theta, local_fraction = _rope(text, "sliding_attention")
    theta, fraction = _rope(text, "full_attention")
    experts = int(text.get("num_experts") or 0) if text.get("enable_moe_block") else 0
    first = layer_types.index("sliding_attention") if "sliding_attention" in layer_types else 0
    options = Gemma4Options(
        head_dims=head_dims,
        kv_heads=kv_heads,
        kv_source=kv_sources(layer_types, int(text.get("num_kv_shared_layers") or 0)),
        rope_fractions=(local_fraction, fraction),
        k_eq_v=bool(text.get("attention_k_eq_v", False)),
        per_layer_hidden=int(text.get("hidden_size_per_layer_input") or 0),
        per_layer_vocab=int(text.get("vocab_size_per_layer_input") or text.get("vocab_size", 262_144)),
        logit_softcap=text.get("final_logit_softcapping"),
        double_wide_mlp=bool(text.get("use_double_wide_mlp", False)),
        experts=experts,
        top_k=int(text.get("top_k_experts") or 0) if experts else 0,
        moe_intermediate=int(text.get("moe_intermediate_size") or 0) if experts else 0,
    )
    return Gemma4Config(
        family="gemma4",
        hidden=int(text.get("hidden_size", 2304)),
        layers=layers,
        heads=int(text.get("num_attention_heads", 8)),
        kv_heads=kv_heads[first],
        head_dim=head_dims[first],
        intermediate=int(text.get("intermediate_size", 9216)),
        vocab=int(text.get("vocab_size", 262_144)),
        rope_theta=theta,
        norm_eps=float(text.get("rms_norm_eps", 1e-6)),
        tie_embeddings=bool(hf.get("tie_word_embeddings", text.get("tie_word_embeddings", True))),
        rope_local_theta=local_theta,
        sliding_window=int(text.get("sliding_window", 512)),
        sliding_layers=tuple(kind == "sliding_attention" for kind in layer_types),
        query_pre_attn_scalar=1.0,  # scores are not scaled: q and k are normed
        gemma4=options,
    )


def text_weights(state: dict) -> dict:
    """A state dict in `Gemma4ForCausalLM` naming: a `Gemma4ForConditionalGeneration` checkpoint's text weights
    (`model.language_model.*`) renamed to `model.*`, its media towers left out (unchanged if it has none)."""
    prefix = "model.language_model."
    if not any(key.startswith(prefix) for key in state):
        return state
    return {("model." + key[len(prefix):] if key.startswith(prefix) else key): value
            for key, value in state.items() if not key.startswith(_MEDIA_PREFIXES)}


def snapshot_weights(state: dict, towers: bool) -> dict:
    """A snapshot's weights in the text stack's naming (`text_weights`), the towers' kept beside them with
    `towers` (the loader hands them to the family's towers)."""
    media = {k: v for k, v in state.items() if k.startswith(_MEDIA_PREFIXES)} if towers else {}
    return {**text_weights(state), **media}
