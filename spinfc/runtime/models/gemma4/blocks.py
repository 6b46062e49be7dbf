"""The parts of a Gemma 4 layer beyond attention and the dense MLP: per-layer input embeddings (PLE) and the MoE
block (router and experts). Each follows transformers' modeling_gemma4.py step by step.

The experts themselves are `experts.weighted_sum` (shared with Qwen3.5-MoE).
"""

from __future__ import annotations

import torch

from spinfc.runtime.models import experts

MOE_WEIGHTS = {
    "router": "router.proj.weight",  # [E, D]
    "router_scale": "router.scale",  # [D]
    "expert_scale": "router.per_expert_scale",  # [E]
    "experts_gate_up": "experts.gate_up_proj",  # [E, 2 I, D]
    "experts_down": "experts.down_proj",  # [E, D, I]
    "post_ff_norm_1": "post_feedforward_layernorm_1.weight",
    "pre_ff_norm_2": "pre_feedforward_layernorm_2.weight",
    "post_ff_norm_2": "post_feedforward_layernorm_2.weight",
}


def gated(model, w: dict, h: torch.Tensor) -> torch.Tensor:
    """h: [T, D] normed -> gelu_tanh(gate(h)) * up(h): [T, F] (F per layer: double-wide layers have 2x), written
    as the down projection's `QuantizedInput` where it is quantized."""
    if "gate_up" in w:
        gate, up = model.linear(h, w["gate_up"]).split((w["gate"].shape[0], w["up"].shape[0]), dim=1)
    else:
        gate, up = model.linear(h, w["gate"]), model.linear(h, w["up"])
    reader = model.quantized_reader(w["down"])
    if reader is None:
        return model.ops.gated_act(gate, up, "gelu_tanh")
    return reader.wrap(model.ops.gated_act(gate, up, "gelu_tanh", quant=reader.activation_quant))


def per_layer_inputs(model, tokens: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """tokens: [T], x: [T, D] the scaled embeddings -> [T, L, P]: (norm(x @ W_proj^T / sqrt(D)) + table[tokens] *
    sqrt(P)) / sqrt(2), per layer (transformers' get_per_layer_inputs and project_per_layer_inputs)."""
    c, ple = model.config, model.ple
    L, P, T = c.layers, c.gemma4.per_layer_hidden, tokens.shape[0]
    dtype = model.precision.residual
    table_scale = torch.tensor(P**0.5, dtype=ple["table"].dtype).item()
    identity = (torch.nn.functional.embedding(tokens, ple["table"]) * table_scale).to(dtype).view(T, L, P)
    projected = model.linear(x, ple["projection"], dtype).to(dtype) * c.hidden**-0.5  # [T, L * P]
    projected = model.norm(projected.reshape(T * L, P), ple["norm"], dtype).view(T, L, P)
    return (projected + identity) * 2.0**-0.5


def per_layer_block(model, w: dict, hidden: torch.Tensor, per_layer: torch.Tensor) -> torch.Tensor:
    """hidden: [T, D], per_layer: [T, P] -> the PLE block's output [T, D] (added to the residual):
    post_norm(proj(gelu_tanh(gate(hidden)) * per_layer))."""
    gate = model.linear(hidden.to(model.dtype), w["ple_gate"])  # [T, P]
    mixed = model.ops.gated_act(gate, per_layer.to(gate.dtype), "gelu_tanh")
    return model.norm(model.linear(mixed, w["ple_projection"]), w["ple_norm"], hidden.dtype)


def route(model, w: dict, residual: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """residual: [T, D] (the stream after attention) -> (top-k weights [T, K] float32, expert indices [T, K]):
    softmax over the experts of proj(norm(residual) * scale / sqrt(D)), the top k renormalised, times each chosen
    expert's scale."""
    c = model.config
    normed = model.norm(residual, model.unit(c.hidden), residual.dtype)
    scaled = normed * w["router_scale"].to(normed.dtype) * c.hidden**-0.5
    # in the residual's dtype: under the mixed policy a float32 split product, so the experts chosen are float32's
    # but for near ties (a flipped choice moves a row's output far more than rounding does)
    scores = model.linear(scaled, w["router"], torch.float32)  # [T, E]
    weights, index = experts.choose(scores, c.gemma4.top_k)  # [T, K] each
    return weights * w["expert_scale"].float()[index], index


def moe(model, w: dict, ff: torch.Tensor, residual: torch.Tensor, dtype) -> torch.Tensor:
    """ff: [T, D] the dense MLP's output, residual: [T, D] -> post_norm_1(ff) + post_norm_2(experts(
    pre_norm_2(residual))), [T, D] in the residual's dtype."""
    weights, index = route(model, w, residual)
    x = model.norm(residual, w["pre_ff_norm_2"], dtype)  # [T, D]
    out = experts.weighted_sum(model, w["experts_gate_up"], w["experts_down"], x, weights, index,
                               "gelu_tanh")  # [T, D] float32
    rdtype = residual.dtype
    return model.norm(ff, w["post_ff_norm_1"], rdtype) + model.norm(out.to(x.dtype), w["post_ff_norm_2"], rdtype)

