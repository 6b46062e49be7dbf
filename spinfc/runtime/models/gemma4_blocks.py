"""The parts of a Gemma 4 layer beyond attention and the dense MLP: per-layer input embeddings (PLE) and the MoE
block (router and experts). Each follows transformers' modeling_gemma4.py step by step.

The experts run two ways with the same arithmetic per row: on the CPU, each expert on the rows routed to it
(transformers' loop); on CUDA, each expert on every row with a zero weight where it was not chosen, so that every
product has the pass's fixed row count (no host synchronisation, capturable in a CUDA graph, and a row's bits do
not depend on how many other rows chose the same expert). That costs num_experts / top_k times the experts'
FLOPs of a sparse dispatch (16x on 26B-A4B): correct and batch-invariant first; a grouped GEMM is the next step.
"""

from __future__ import annotations

import torch

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
    probabilities = torch.softmax(scores.float(), dim=-1)
    weights, index = torch.topk(probabilities, k=c.gemma4.top_k, dim=-1)  # [T, K] each
    weights = weights / weights.sum(dim=-1, keepdim=True)
    return weights * w["expert_scale"].float()[index], index


def moe(model, w: dict, ff: torch.Tensor, residual: torch.Tensor, dtype) -> torch.Tensor:
    """ff: [T, D] the dense MLP's output, residual: [T, D] -> post_norm_1(ff) + post_norm_2(experts(
    pre_norm_2(residual))), [T, D] in the residual's dtype."""
    weights, index = route(model, w, residual)
    x = model.norm(residual, w["pre_ff_norm_2"], dtype)  # [T, D]
    experts = _experts_dense if x.is_cuda else _experts_routed
    out = experts(model, w, x, weights, index)  # [T, D] float32
    rdtype = residual.dtype
    return model.norm(ff, w["post_ff_norm_1"], rdtype) + model.norm(out.to(x.dtype), w["post_ff_norm_2"], rdtype)


def _expert(model, w: dict, e: int, x: torch.Tensor) -> torch.Tensor:
    """x: [M, D] -> expert e's output [M, D]: down(gelu_tanh(gate(x)) * up(x))."""
    gate, up = model.linear(x, w["experts_gate_up"][e]).chunk(2, dim=-1)
    return model.linear(model.ops.gated_act(gate, up, "gelu_tanh"), w["experts_down"][e])


def _experts_routed(model, w, x, weights, index) -> torch.Tensor:
    """Each expert on the rows that chose it, weighted and added per row in expert order."""
    out = torch.zeros(x.shape, dtype=torch.float32, device=x.device)
    for e in torch.unique(index).tolist():
        rows, slot = torch.where(index == e)
        contribution = _expert(model, w, e, x[rows]).float() * weights[rows, slot, None]
        out.index_add_(0, rows, contribution)
    return out


def _experts_dense(model, w, x, weights, index) -> torch.Tensor:
    """Each expert on every row, weighted by its routing weight (0 where not chosen), added in expert order: the
    same sum per row as `_experts_routed` at a fixed row count."""
    T, E = x.shape[0], w["experts_gate_up"].shape[0]
    dense = torch.zeros((T, E), dtype=torch.float32, device=x.device).scatter_(1, index, weights)  # [T, E]
    out = torch.zeros(x.shape, dtype=torch.float32, device=x.device)
    for e in range(E):
        out += _expert(model, w, e, x).float() * dense[:, e:e + 1]
    return out
