"""SmoothQuant: move activation outliers into the weights before W8A8 quantization, as llm-compressor's
`SmoothQuantModifier` does. For each linear input channel j, with max |X_j| from a calibration run and max |W_j|
over the columns of every layer that reads that input,

    s_j = max|X_j|^a / max|W_j|^(1 - a)        (a = `alpha`, 0.5 by default)

the input is divided by s (folded into what produces it) and the weight columns multiplied by s: the float model
computes the same function (up to float rounding), while one static per-tensor input scale now covers channels
whose range was far apart. The mappings (what produces each input, per layer):

    q, k, v   <- the attention's input norm (its weight divided by s; Gemma's (1 + w) norm: w' = (1 + w) / s - 1)
    gate, up  <- the MLP's input norm (Llama: post_attention_layernorm; Gemma: pre_feedforward_layernorm)
    down      <- up_proj's output rows (act(gate) * up is linear in up)
    o         <- v_proj's output rows: attention output channel (head h, dim d) is a mix of v's (kv head of h, d),
                 so with grouped-query attention one factor per (kv head, d), shared by the group's query heads

Only layers that are quantized are smoothed (the last layer's o, gate/up and down stay in float). Every factor is
computed from maxima (exact arithmetic), so the same model and texts give the same smoothed weights."""

from __future__ import annotations

import torch

from spinfc.runtime.models.families import spec_of
from spinfc.runtime.weights.config import ModelConfig, UnsupportedModel

DEFAULT_ALPHA = 0.5
# The mappings as llm-compressor's recipes write them: [[balance layers], the layer that produces their input].
RECIPE_MAPPINGS = [
    [["re:.*q_proj", "re:.*k_proj", "re:.*v_proj"], "re:.*input_layernorm"],
    [["re:.*gate_proj", "re:.*up_proj"], "re:.*(post_attention|pre_feedforward)_layernorm"],
    [["re:.*down_proj"], "re:.*up_proj"],
    [["re:.*o_proj"], "re:.*v_proj"],
]


def factors(x_max: torch.Tensor, weights: list[torch.Tensor], alpha: float) -> torch.Tensor:
    """[K] smoothing factors of an input channel set: x_max [K], weights [N_i, K] read that input."""
    w_max = torch.stack([w.float().abs().amax(dim=0) for w in weights]).amax(dim=0)  # [K]
    s = x_max.float().clamp(min=1e-5).pow(alpha) / w_max.clamp(min=1e-5).pow(1 - alpha)
    # A channel never seen (or a dead weight column) keeps its scale; extremes are held to a sane range.
    s = torch.where((x_max > 0) & (w_max > 0), s, torch.ones_like(s))
    return s.clamp(1e-4, 1e4)


def smooth_state(config: ModelConfig, state: dict[str, torch.Tensor], x_max: dict[str, torch.Tensor],
                 alpha: float = DEFAULT_ALPHA, quantized_layer=lambda key: True) -> tuple[dict, dict]:
    """(the float `state` smoothed, a summary for the calibration file). `x_max`: per-channel input maxima of
    every linear layer (`calibrate.channel_maxima`, on the unsmoothed model); `quantized_layer(key)` says
    whether a layer's weight will be quantized (only those are balanced)."""
    spec = spec_of(config)
    if spec.smoothing_refused is not None:  # a family whose layers break the mappings below
        raise UnsupportedModel(spec.smoothing_refused)
    out = dict(state)
    unit_offset = spec.stack.NORM_UNIT_OFFSET
    H, Hk, Dh = config.heads, config.kv_heads, config.head_dim
    group = H // Hk
    largest = {}
    for i in range(config.layers):
        p = f"model.layers.{i}."
        mlp_norm = p + ("pre_feedforward_layernorm.weight" if p + "pre_feedforward_layernorm.weight" in state
                        else "post_attention_layernorm.weight")
        attention = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj")
        for norm, names in ((p + "input_layernorm.weight", attention), (mlp_norm, ("mlp.gate_proj", "mlp.up_proj"))):
            keys = [f"{p}{n}.weight" for n in names]
            if not all(quantized_layer(k) for k in keys):
                continue
            s = factors(x_max[keys[0]], [out[k] for k in keys], alpha)
            w = out[norm].float()
            out[norm] = ((1.0 + w) / s - 1.0) if unit_offset else w / s
            for k in keys:
                out[k] = out[k].float() * s[None, :]
            largest[keys[0]] = float(s.max())
        down, up = p + "mlp.down_proj.weight", p + "mlp.up_proj.weight"
        if quantized_layer(down):
            s = factors(x_max[down], [out[down]], alpha)
            out[up] = out[up].float() / s[:, None]
            out[down] = out[down].float() * s[None, :]
            largest[down] = float(s.max())
        o, v = p + "self_attn.o_proj.weight", p + "self_attn.v_proj.weight"
        if quantized_layer(o):
            # One factor per (kv head, d): the largest over the query heads that read that kv head.
            xo = x_max[o].float().view(Hk, group, Dh).amax(dim=1)  # [Hk, Dh]
            wo = out[o].float().abs().amax(dim=0).view(Hk, group, Dh).amax(dim=1)  # [Hk, Dh]
            s = factors(xo.reshape(-1), [wo.reshape(1, -1)], alpha).view(Hk, 1, Dh)
            out[v] = out[v].float() / s.reshape(Hk * Dh)[:, None]
            out[o] = out[o].float() * s.expand(Hk, group, Dh).reshape(H * Dh)[None, :]
            largest[o] = float(s.max())
    summary = {"method": "SmoothQuant", "alpha": alpha, "mappings": RECIPE_MAPPINGS,
               "o_proj": "one factor per (kv head, channel), shared by the query heads of a group",
               "largest_factor": dict(sorted(largest.items()))}
    return out, summary
