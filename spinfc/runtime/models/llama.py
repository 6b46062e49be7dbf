"""Llama (SmolLM2, Llama 3): pre-norm layers, rope with one base, SiLU-gated MLP."""

from __future__ import annotations

import torch

from spinfc.backend.launch import Launch
from spinfc.runtime.models.base import COMMON_LAYER_WEIGHTS, Model


class LlamaModel(Model):
    family = "llama"
    LAYER_WEIGHTS = {**COMMON_LAYER_WEIGHTS, "post_attn_norm": "post_attention_layernorm.weight"}
    QK_NORM = False

    def layer(self, index: int, x, residual, launch: Launch, keep: torch.Tensor | None = None):
        """h = x + residual; h += attn(norm(h)); h += mlp(norm(h)), handed on as (mlp output, residual) (or as
        (None, h) when the adds run inside the matmuls, `project`); with `keep`, only those rows after the
        attention."""
        w = self.layers[index]
        h, residual = self.add_norm(x, residual, w["input_norm"], into=w.get("qkv"))
        heads = self.attention_heads(w, h, launch, theta=self.config.rope_theta, window=None, qk_norm=self.QK_NORM,
                                     keep=keep)
        if keep is not None:
            residual = residual[keep]  # [R, D]
        x, residual = self.project(heads, w["o"], residual)
        h, residual = self.add_norm(x, residual, w["post_attn_norm"], self.answer_dtype(keep), into=w.get("gate_up"))
        return self.project(self.mlp_hidden(w, h, "silu"), w["down"], residual)
