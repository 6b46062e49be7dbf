"""`to_hf`: a `ModelConfig` as a Hugging Face `config.json` dictionary (what `from_hf` reads back to the same
config), so weights spinfc writes (a GGUF model quantized by `spinfc quantize`) load in transformers and vLLM."""

from __future__ import annotations

from typing import Any

from spinfc.runtime.weights.config import ModelConfig

_TYPES = {"llama": ("llama", "LlamaForCausalLM"), "qwen3": ("qwen3", "Qwen3ForCausalLM"),
          "gemma3": ("gemma3_text", "Gemma3ForCausalLM")}


def to_hf(config: ModelConfig, *, dtype: str = "float32", max_positions: int = 8192, **extra: Any) -> dict:
    """The config.json of `config`; `extra` adds keys (bos_token_id, eos_token_id, ...)."""
    model_type, architecture = _TYPES[config.family]
    hf: dict[str, Any] = {
        "architectures": [architecture], "model_type": model_type,
        "hidden_size": config.hidden, "intermediate_size": config.intermediate,
        "num_hidden_layers": config.layers, "num_attention_heads": config.heads,
        "num_key_value_heads": config.kv_heads, "head_dim": config.head_dim, "vocab_size": config.vocab,
        "rms_norm_eps": config.norm_eps, "rope_theta": config.rope_theta,
        "tie_word_embeddings": config.tie_embeddings, "max_position_embeddings": max_positions,
        "attention_bias": False, "torch_dtype": dtype,
    }
    if config.family == "gemma3":
        hf.update(
            hidden_activation="gelu_pytorch_tanh", rope_local_base_freq=config.rope_local_theta,
            sliding_window=config.sliding_window, query_pre_attn_scalar=_whole(config.query_pre_attn_scalar),
            layer_types=["sliding_attention" if s else "full_attention" for s in config.sliding_layers],
            final_logit_softcapping=None, attn_logit_softcapping=None,
        )
    else:
        hf.update(hidden_act="silu", mlp_bias=False)
    hf.update(extra)
    return hf


def _whole(value: float | None):
    """An integral float as an int: transformers' Gemma 3 config types query_pre_attn_scalar as int and refuses
    256.0 when a checkpoint's config.json is read back (by the tokenizer of a `spinfc quantize` directory)."""
    return int(value) if isinstance(value, float) and value.is_integer() else value
