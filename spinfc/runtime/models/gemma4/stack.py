"""Gemma 4 (text): Gemma 3's sandwich-normed layers with everything `config.py` lists: sliding and
full layers with their own head widths and KV head counts, default rope on sliding layers and proportional
(partial) rope on full ones, k = v on full layers, KV-shared layers, per-layer input embeddings (PLE), a learned
per-layer output scale, logit soft-capping, double-wide MLPs, and an MoE block beside the dense MLP
(blocks.py). Norms multiply by w; q and k are normed per head (v too, without a weight) and scores are not
scaled. The LM head is the embedding matrix.

A KV-shared layer attends to its source layer's keys and values of the same forward (after that layer's norms and
rope): it hands exactly those tensors to its attention, so whatever records or caches a layer's K/V (the
extraction pool, the decode caches) holds, for a shared layer, the rows its source computed, and a decode step
reads the same rows the scoring pass did.

What one forward carries from layer to layer (each layer's PLE input, the sources' K/V) lives in its
`ForwardContext` (`per_layer`, `shared_kv`), filled by `inputs`, which every path (forward, hidden, decode, the
extraction step) runs first.
"""

from __future__ import annotations

import torch

from spinfc.backend import reference
from spinfc.backend.forward_context import ForwardContext
from spinfc.backend.launch import Launch
from spinfc.runtime.models.base import Model, fuse_into
from spinfc.runtime.models.gemma4 import blocks
from spinfc.runtime.models.gemma4.config import text_weights

_ATTENTION = {"q": "self_attn.q_proj.weight", "o": "self_attn.o_proj.weight", "q_norm": "self_attn.q_norm.weight"}
_OWN_KV = {"k": "self_attn.k_proj.weight", "k_norm": "self_attn.k_norm.weight"}
_NORMS = {
    "input_norm": "input_layernorm.weight",
    "post_attn_norm": "post_attention_layernorm.weight",
    "pre_ff_norm": "pre_feedforward_layernorm.weight",
    "post_ff_norm": "post_feedforward_layernorm.weight",
}
_MLP = {"gate": "mlp.gate_proj.weight", "up": "mlp.up_proj.weight", "down": "mlp.down_proj.weight"}


class Gemma4Model(Model):
    family = "gemma4"
    PROJECTS_INTO_RESIDUAL = False  # o and down are normed before they are added

    def __init__(self, config, state_dict, **options):
        super().__init__(config, text_weights(state_dict), **options)
        self._units: dict[tuple[int, torch.dtype], torch.Tensor] = {}

    # ---- weights ------------------------------------------------------------------------------------------------

    def take_stack(self, take) -> list[dict]:
        """Each layer's weights (which a layer has depends on its kind: `layer_weight_names`), and the PLE tables."""
        g = self.config.gemma4
        self.ple = {}
        if g.per_layer_hidden:
            self.ple = {
                "table": take("model.embed_tokens_per_layer.weight"),  # [Vp, L * P]
                "projection": take("model.per_layer_model_projection.weight"),  # [L * P, D]
                "norm": take("model.per_layer_projection_norm.weight"),  # [P]
            }
        return super().take_stack(take)

    def layer_weight_names(self, i: int) -> dict[str, str]:
        return layer_weight_names(self.config, i)

    def _check_shapes(self) -> None:
        c, g = self.config, self.config.gemma4
        for i, w in enumerate(self.layers):
            Hk, Dh = c.kv_shape(i)
            wide = 2 if g.double_wide_mlp and not g.owns_kv(i) else 1
            want = {"q": (c.heads * Dh, c.hidden), "k": (Hk * Dh, c.hidden), "v": (Hk * Dh, c.hidden),
                    "o": (c.hidden, c.heads * Dh), "gate": (wide * c.intermediate, c.hidden),
                    "down": (c.hidden, wide * c.intermediate)}
            for short, shape in want.items():
                if short in w:
                    self.check_shape(i, short, shape)
        self._check_tensor("model.embed_tokens.weight", self.embed_weight, (c.vocab, c.hidden))

    def fuse_projections(self) -> None:
        """q with whichever of k and v the layer has ([rows, D] stacked as `qkv`), and gate/up as `gate_up`; the
        parts become views into them (as `Model.fuse_projections`)."""
        for w in self.layers:
            if "qkv" in w or "gate_up" in w:
                continue
            fuse_into(w, "qkv", tuple(name for name in ("q", "k", "v") if name in w))
            fuse_into(w, "gate_up", ("gate", "up"))

    def unit(self, width: int) -> torch.Tensor:
        """A weight of ones [width] (v's norm has none), in the norms' dtype."""
        key = (width, self.final_norm.dtype)
        if key not in self._units:
            self._units[key] = torch.ones(width, dtype=self.final_norm.dtype, device=self.device)
        return self._units[key]

    # ---- the forward --------------------------------------------------------------------------------------------

    def embed(self, tokens: torch.Tensor) -> torch.Tensor:
        """The scaled embeddings [T, D]."""
        scale = torch.tensor(self.config.hidden**0.5, dtype=self.embed_weight.dtype).item()
        return super().embed(tokens) * scale  # [T, D]

    def inputs(self, context: ForwardContext) -> torch.Tensor:
        """The embedded rows, media placed, and the PLE inputs of every layer (`context.per_layer`), made as
        transformers makes them: a media row's token read as the pad token, its projection from the placed
        embedding."""
        x = super().inputs(context)
        if self.ple:
            media, tokens = context.launch.media, context.launch.tokens
            if media is not None:
                pad = self.towers.pad_token_id
                tokens = (tokens.masked_fill(media.mask, pad) if media.placed is not None else
                          tokens.index_fill(0, media.rows, pad))
            context.per_layer = blocks.per_layer_inputs(self, tokens, x)
        return x

    def head_logits(self, final: torch.Tensor) -> torch.Tensor:
        return reference.soft_cap(super().head_logits(final), self.config.gemma4.logit_softcap)

    @torch.inference_mode()
    def forward(self, launch: Launch, context: ForwardContext | None = None) -> torch.Tensor:
        return self.ops.answer_logprobs(self.hidden(launch, context), self.lm_head, launch.read_row,
                                        launch.read_token, softcap=self.config.gemma4.logit_softcap)

    __call__ = forward

    def layer(self, index: int, x, residual, context: ForwardContext, keep: torch.Tensor | None = None):
        """h = x + residual; h += post_norm(attn(norm(h))); h += post_ff_norm(mlp(pre_ff_norm(h)) [+ MoE]);
        h += PLE(h); h *= layer_scalar, handed on as (None, h); with `keep`, only those rows after the attention."""
        c, w = self.config, self.layers[index]
        h, residual = self.add_norm(x, residual, w["input_norm"], into=w.get("qkv"))
        attn = self.linear(self.attention_heads_of(index, h, context, keep), w["o"], self.answer_dtype(keep))
        per_layer = context.per_layer[:, index] if context.per_layer is not None else None  # [T, P]
        if keep is not None:
            residual = residual[keep]  # [R, D]
            per_layer = per_layer[keep] if per_layer is not None else None
        dtype = self.precision.residual  # the post-block norms feed the residual sum
        h, residual = self.add_norm(self.norm(attn, w["post_attn_norm"], dtype), residual, w["pre_ff_norm"],
                                    self.answer_dtype(keep), into=w.get("gate_up"))
        ff = self.linear(blocks.gated(self, w, h), w["down"])
        if c.gemma4.experts:
            ff = blocks.moe(self, w, ff, residual, self.answer_dtype(keep))
        hidden = residual + self.norm(ff, w["post_ff_norm"], dtype)
        if per_layer is not None:
            hidden = hidden + blocks.per_layer_block(self, w, hidden, per_layer)
        return None, hidden * w["scalar"].to(hidden.dtype)

    def attention_heads_of(self, index: int, h: torch.Tensor, context: ForwardContext, keep) -> torch.Tensor:
        """h: [T, D] normed -> the heads' attention output [T or R, H * Dh] of layer `index` (before o_proj)."""
        c, g, w, T, launch = self.config, self.config.gemma4, self.layers[index], h.shape[0], context.launch
        H, (Hk, Dh) = c.heads, c.kv_shape(index)
        sliding = c.is_sliding(index)
        theta = c.rope_local_theta if sliding else c.rope_theta
        rotated = int(g.rope_fractions[1 - sliding] * Dh // 2)  # rotary pairs rotated (the rest pass through)
        names = [name for name in ("q", "k", "v") if name in w]
        if "qkv" in w:
            parts = dict(zip(names, self.linear(h, w["qkv"]).split([w[n].shape[0] for n in names], dim=1)))
        else:
            parts = {name: self.linear(h, w[name]) for name in names}
        q = self.norm(parts["q"].reshape(T * H, Dh), w["q_norm"]).view(T, H, Dh)
        q = self.ops.apply_rope(q, launch.positions, theta, rotated)
        source = g.kv_source[index]
        if source == index:
            k_raw = parts["k"].reshape(T * Hk, Dh)
            v_raw = parts["v"].reshape(T * Hk, Dh) if "v" in parts else k_raw  # k = v: the key before its norm
            v = self.norm(v_raw, self.unit(Dh)).view(T, Hk, Dh)
            k = self.norm(k_raw, w["k_norm"]).view(T, Hk, Dh)
            k = self.ops.apply_rope(k, launch.positions, theta, rotated)
            if index in g.kv_source[index + 1:]:
                context.shared_kv[index] = (k, v)
        else:
            k, v = context.shared_kv[source]
        # image blocks attend both ways on sliding layers only (transformers' create_masks_for_vision_model: full
        # layers stay causal)
        out = context.attention(self, index, q, k, v, scale=c.attention_scale,
                                window=c.sliding_window if sliding else None,
                                firsts=launch.firsts if sliding else None)
        if keep is not None:
            out = out[keep]  # [R, H, Dh]
        return out.reshape(out.shape[0], H * Dh)


def layer_weight_names(config, i: int) -> dict[str, str]:
    """Layer i's weights, short name -> name under `model.layers.i.`: a KV-shared layer has no k/v projections or
    k norm, a full layer under k = v no v_proj; PLE and MoE layers have their blocks' weights."""
    g = config.gemma4
    names = {**_ATTENTION, **_NORMS, **_MLP, "scalar": "layer_scalar"}
    if g.owns_kv(i):
        names.update(_OWN_KV)
        if g.has_values(i, config.is_sliding(i)):
            names["v"] = "self_attn.v_proj.weight"
    if g.per_layer_hidden:
        names.update(ple_gate="per_layer_input_gate.weight", ple_projection="per_layer_projection.weight",
                     ple_norm="post_per_layer_input_norm.weight")
    if g.experts:
        names.update(blocks.MOE_WEIGHTS)
    return names
