"""Qwen3.5 (`qwen3_5`): the text model's config (`Qwen3_5Config`: the Gated DeltaNet layers' shape, partial rope,
M-RoPE's sections, a MoE block's experts), from a text checkpoint (`qwen3_5_text`, Qwen3_5ForCausalLM) or
the text part of a multimodal one (`qwen3_5`, Qwen3_5ForConditionalGeneration: its `text_config`, and weights
under `model.language_model.`, renamed by `text_weights`; the vision tower and the multi-token-prediction head are
left out)."""

from __future__ import annotations

import re
from typing import Any

import attrs
import torch

from spinfc.runtime.weights.config import ModelConfig, UnsupportedModel, refuse_rope_scaling

MULTIMODAL = ("qwen3_5", "qwen3_5_moe")  # the model_types of a checkpoint with a vision tower
_MULTIMODAL_PREFIX = "model.language_model."
_LEFT_OUT = ("model.visual.", "mtp.")


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


@attrs.frozen(kw_only=True)
class Qwen3_5Config(ModelConfig):
    linear: LinearAttention  # the Gated DeltaNet layers' shape
    rotary_dim: int  # the rotated dims of a head (partial rope)
    # with a vision tower: M-RoPE's (t, h, w) sections of the rotary frequencies (`mrope_section`), which a pass
    # holding images turns by each row's three positions (`Launch.rope_positions`); None: plain rope only
    mrope_sections: tuple[int, ...] | None = None
    # Qwen3.5-MoE: every layer's MLP is a sparse block of routed experts beside a gated shared expert (whose width
    # is `intermediate`); None for dense models
    experts: Experts | None = None

    def is_recurrent(self, layer: int) -> bool:
        return self.linear.layers[layer]

    @classmethod
    def from_fields(cls, fields: dict) -> "Qwen3_5Config":
        linear, experts = fields["linear"], fields.get("experts")
        fields = {**fields, "linear": LinearAttention(**{**linear, "layers": tuple(linear["layers"])}),
                  "experts": Experts(**experts) if experts is not None else None}
        return super().from_fields(fields)


def read_config(hf: dict[str, Any]) -> Qwen3_5Config:
    """The `ModelConfig` of a Qwen3.5 config.json: dense (`qwen3_5`, `qwen3_5_text`) or mixture of experts
    (`qwen3_5_moe`, `qwen3_5_moe_text`: every layer's MLP a sparse block, `config.experts`)."""
    multimodal = hf.get("model_type") in MULTIMODAL
    text = hf["text_config"] if multimodal and hf.get("text_config") else hf
    moe = hf.get("model_type", "").startswith("qwen3_5_moe")
    experts = None
    if moe:
        experts = Experts(count=text.get("num_experts", 256), top_k=text.get("num_experts_per_tok", 8),
                          intermediate=text.get("moe_intermediate_size", 512))
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
    refuse_rope_scaling(text.get("rope_scaling"), {k: v for k, v in rope.items() if k == "rope_type"})
    partial = float(rope.get("partial_rotary_factor", text.get("partial_rotary_factor", 0.25)))
    heads = text["num_attention_heads"]
    head_dim = text.get("head_dim") or text["hidden_size"] // heads
    rotary_dim = int(head_dim * partial)
    sections = None
    if multimodal and hf.get("vision_config"):  # images turn by (t, h, w) positions (M-RoPE, interleaved)
        sections = tuple(int(n) for n in rope.get("mrope_section", (11, 11, 10)))
        if len(sections) != 3 or sum(sections) != rotary_dim // 2:
            raise UnsupportedModel(f"qwen3_5: mrope_section {list(sections)} must be three sections summing to the "
                                   f"{rotary_dim // 2} rotary frequencies of a head")
    return Qwen3_5Config(
        family="qwen3_5",
        hidden=text["hidden_size"],
        layers=layers,
        heads=heads,
        kv_heads=text.get("num_key_value_heads") or heads,
        head_dim=head_dim,
        # a MoE layer's dense part is its shared expert
        intermediate=text.get("shared_expert_intermediate_size", 512) if moe else text["intermediate_size"],
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
        rotary_dim=rotary_dim,
        experts=experts,
        mrope_sections=sections,
    )


def text_weights(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A checkpoint's weights in the text model's naming: `model.language_model.X` -> `model.X`, the vision tower
    and the multi-token-prediction layers left out (a text checkpoint comes back as it is, less `mtp.`); a MoE
    checkpoint's per-expert weights stacked as transformers holds them (`fused_experts`)."""
    out = {}
    for name, tensor in state.items():
        if name.startswith(_LEFT_OUT):
            continue
        out["model." + name[len(_MULTIMODAL_PREFIX):] if name.startswith(_MULTIMODAL_PREFIX) else name] = tensor
    return fused_experts(out)


_EXPERT = re.compile(r"(model\.layers\.\d+\.mlp\.experts)\.(\d+)\.(gate|up|down)_proj\.weight")


def fused_experts(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Qwen3.5-MoE checkpoints store each expert's `experts.E.{gate,up,down}_proj.weight`; transformers (and the
    stack) hold a layer's experts as `experts.gate_up_proj` [E, 2 I, D] (each expert's gate above its up) and
    `experts.down_proj` [E, D, I]. A state already in that layout comes back as it is."""
    parts: dict[str, dict[int, dict[str, torch.Tensor]]] = {}
    for name in [n for n in state if _EXPERT.fullmatch(n)]:
        prefix, expert, kind = _EXPERT.fullmatch(name).groups()
        parts.setdefault(prefix, {}).setdefault(int(expert), {})[kind] = state.pop(name)
    for prefix, by_expert in parts.items():
        count = len(by_expert)
        if sorted(by_expert) != list(range(count)) or any(len(p) != 3 for p in by_expert.values()):
            raise UnsupportedModel(f"{prefix}: the checkpoint's experts are incomplete (every expert 0..E-1 needs "
                                   "gate_proj, up_proj and down_proj)")
        experts = [by_expert[e] for e in range(count)]
        if not all(isinstance(t, torch.Tensor) for p in experts for t in p.values()):
            raise UnsupportedModel(f"{prefix}: the checkpoint's routed experts are quantized; spinfc reads them in "
                                   "a float dtype (`spinfc quantize` keeps them so): use the float checkpoint")
        state[f"{prefix}.gate_up_proj"] = torch.stack([torch.cat((p["gate"], p["up"])) for p in experts])
        state[f"{prefix}.down_proj"] = torch.stack([p["down"] for p in experts])
    return state
