"""Llama (SmolLM2, Llama 3): pre-norm layers, rope with one base, SiLU-gated MLP. Its config reader is the one a
Llama-shaped family starts from (`llama_fields`: Qwen3, and each family shaped like it)."""

from __future__ import annotations

from typing import Any

import torch

from spinfc.backend.forward_context import ForwardContext
from spinfc.runtime.models.families import FamilySpec
from spinfc.runtime.models.base import COMMON_LAYER_WEIGHTS, Model
from spinfc.runtime.weights.config import ModelConfig, require, rope_theta, shared_fields
from spinfc.runtime.weights.gguf_file import GgufReading, unpermute


def llama_fields(hf: dict[str, Any], family: str) -> dict[str, Any]:
    """The fields of a Llama-shaped config.json: no biases, a SiLU MLP, rope without scaling."""
    fields = shared_fields(hf, family)
    require(hf, "attention_bias", (None, False), family)
    require(hf, "hidden_act", (None, "silu"), family)
    require(hf, "mlp_bias", (None, False), family)
    return fields


def read_config(hf: dict[str, Any]) -> ModelConfig:
    return ModelConfig(rope_theta=rope_theta(hf), **llama_fields(hf, "llama"))


class LlamaModel(Model):
    family = "llama"
    LAYER_WEIGHTS = {**COMMON_LAYER_WEIGHTS, "post_attn_norm": "post_attention_layernorm.weight"}
    QK_NORM = False

    def layer(self, index: int, x, residual, context: ForwardContext, keep: torch.Tensor | None = None):
        """h = x + residual; h += attn(norm(h)); h += mlp(norm(h)), handed on as (mlp output, residual) (or as
        (None, h) when the adds run inside the matmuls, `project`); with `keep`, only those rows after the
        attention."""
        w = self.layers[index]
        h, residual = self.add_norm(x, residual, w["input_norm"], into=w.get("qkv"))
        heads = self.attention_heads(index, w, h, context, theta=self.config.rope_theta,
                                     window=self.config.window(index), qk_norm=self.QK_NORM, keep=keep)
        if keep is not None:
            residual = residual[keep]  # [R, D]
        x, residual = self.project(heads, w["o"], residual)
        h, residual = self.add_norm(x, residual, w["post_attn_norm"], self.answer_dtype(keep), into=w.get("gate_up"))
        return self.project(self.mlp_hidden(w, h, "silu"), w["down"], residual)


def llama_hf_keys(model_type: str, architecture: str) -> dict[str, Any]:
    """A Llama-shaped family's own keys of a config.json written for it."""
    return {"architectures": [architecture], "model_type": model_type, "hidden_act": "silu", "mlp_bias": False}


def _undo_permutation(name: str, weight, config: ModelConfig):
    """llama.cpp permutes the rows of attn_q and attn_k per head for its interleaved rope."""
    if name.endswith(("attn_q.weight", "attn_k.weight")):
        return unpermute(weight, config.heads if "attn_q" in name else config.kv_heads)
    return weight


GGUF = GgufReading("llama", {"ffn_norm": "post_attention_layernorm"}, undo=_undo_permutation,
                   hf_keys=lambda config: llama_hf_keys("llama", "LlamaForCausalLM"))
FAMILY = FamilySpec(read_config=read_config, stack=LlamaModel, decision_types=("llama",), gguf=GGUF)
