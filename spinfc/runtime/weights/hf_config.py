"""`to_hf`: a `ModelConfig` as a Hugging Face `config.json` dictionary (what `from_hf` reads back to the same
config), so weights spinfc writes (a GGUF model quantized by `spinfc quantize`) load in transformers and vLLM. The
keys only a family has (its model_type and architecture among them) are its GGUF reading's (`GgufReading.hf_keys`).
"""

from __future__ import annotations

from typing import Any

from spinfc.runtime.weights.config import ModelConfig
from spinfc.runtime.weights.gguf_file import reading_of


def to_hf(config: ModelConfig, *, dtype: str = "float32", max_positions: int = 8192, **extra: Any) -> dict:
    """The config.json of `config`; `extra` adds keys (bos_token_id, eos_token_id, ...)."""
    own = reading_of(config.family).hf_keys(config)
    hf: dict[str, Any] = {
        "architectures": own.pop("architectures"), "model_type": own.pop("model_type"),
        "hidden_size": config.hidden, "intermediate_size": config.intermediate,
        "num_hidden_layers": config.layers, "num_attention_heads": config.heads,
        "num_key_value_heads": config.kv_heads, "head_dim": config.head_dim, "vocab_size": config.vocab,
        "rms_norm_eps": config.norm_eps, "rope_theta": config.rope_theta,
        "tie_word_embeddings": config.tie_embeddings, "max_position_embeddings": max_positions,
        "attention_bias": False, "torch_dtype": dtype,
    }
    hf.update(own)
    hf.update(extra)
    return hf
