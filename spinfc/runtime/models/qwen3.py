"""Qwen3 (dense): Llama's layer with an RMS norm over each query and key head before rope."""

from __future__ import annotations

from spinfc.runtime.models.llama import LlamaModel


class Qwen3Model(LlamaModel):
    family = "qwen3"
    LAYER_WEIGHTS = {
        **LlamaModel.LAYER_WEIGHTS,
        "q_norm": "self_attn.q_norm.weight",
        "k_norm": "self_attn.k_norm.weight",
    }
    QK_NORM = True
