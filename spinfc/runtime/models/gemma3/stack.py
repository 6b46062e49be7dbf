"""Gemma 3 (text): embeddings scaled by sqrt(hidden), norms that multiply by (1 + w), q/k norms, a norm after
each block as well as before it, GELU-tanh MLP, and two kinds of layer: sliding-window layers (a window in
positions, the local rope base) and global layers (the global rope base). The LM head is the embedding matrix."""

from __future__ import annotations

import torch

from spinfc.backend.forward_context import ForwardContext
from spinfc.runtime.models.base import COMMON_LAYER_WEIGHTS, Model


class Gemma3Model(Model):
    family = "gemma3"
    NORM_UNIT_OFFSET = True
    PROJECTS_INTO_RESIDUAL = False  # o and down are normed before they are added
    LAYER_WEIGHTS = {
        **COMMON_LAYER_WEIGHTS,
        "q_norm": "self_attn.q_norm.weight",
        "k_norm": "self_attn.k_norm.weight",
        "post_attn_norm": "post_attention_layernorm.weight",
        "pre_ff_norm": "pre_feedforward_layernorm.weight",
        "post_ff_norm": "post_feedforward_layernorm.weight",
    }

    def embed(self, tokens: torch.Tensor) -> torch.Tensor:
        # The scale is rounded to the model's dtype first, as transformers does; a Python scalar (not a tensor
        # made on the host) so that the pass can be captured in a CUDA graph.
        scale = torch.tensor(self.config.hidden**0.5, dtype=self.dtype).item()
        return super().embed(tokens) * scale  # [T, D]

    def layer(self, index: int, x, residual, context: ForwardContext, keep: torch.Tensor | None = None):
        """h = x + residual; h += post_norm(attn(norm(h))); h += post_ff_norm(mlp(pre_ff_norm(h))); with `keep`,
        only those rows after the attention."""
        c, w = self.config, self.layers[index]
        sliding = c.is_sliding(index)
        h, residual = self.add_norm(x, residual, w["input_norm"], into=w.get("qkv"))
        attn = self.attention(
            index, w, h, context,
            theta=c.rope_local_theta if sliding else c.rope_theta,
            window=c.sliding_window if sliding else None,
            qk_norm=True,
            keep=keep,
        )
        if keep is not None:
            residual = residual[keep]  # [R, D]
        # The post-block norms feed the residual sum: written in its dtype. After `keep`, rows are answer rows.
        residual_dtype = self.precision.residual
        h, residual = self.add_norm(self.norm(attn, w["post_attn_norm"], residual_dtype), residual, w["pre_ff_norm"],
                                    self.answer_dtype(keep), into=w.get("gate_up"))
        return self.norm(self.mlp(w, h, "gelu_tanh"), w["post_ff_norm"], residual_dtype), residual
