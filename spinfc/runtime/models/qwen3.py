"""Qwen3 (dense): Llama's layer with an RMS norm over each query and key head before rope."""

from __future__ import annotations

from typing import Any

from spinfc.runtime.models.families import FamilySpec
from spinfc.runtime.models.llama import LlamaModel, llama_fields, llama_hf_keys
from spinfc.runtime.weights.config import ModelConfig, require, rope_theta
from spinfc.runtime.weights.gguf_file import GgufReading


class Qwen3Model(LlamaModel):
    family = "qwen3"
    LAYER_WEIGHTS = {
        **LlamaModel.LAYER_WEIGHTS,
        "q_norm": "self_attn.q_norm.weight",
        "k_norm": "self_attn.k_norm.weight",
    }
    QK_NORM = True


def read_config(hf: dict[str, Any]) -> ModelConfig:
    fields = llama_fields(hf, "qwen3")
    require(hf, "use_sliding_window", (None, False), "qwen3")
    return ModelConfig(rope_theta=rope_theta(hf), **fields)


GGUF = GgufReading("qwen3", {"ffn_norm": "post_attention_layernorm"},
                   hf_keys=lambda config: llama_hf_keys("qwen3", "Qwen3ForCausalLM"))
FAMILY = FamilySpec(read_config=read_config, stack=Qwen3Model, decision_types=("qwen3",), gguf=GGUF)
