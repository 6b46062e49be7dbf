"""Read a GGUF file (the `gguf` package: GGUFReader and its dequantizer) into a `ModelConfig` and a float32
state dict in Hugging Face naming.

llama.cpp's converter changes some tensors; this undoes what it did, as transformers' GGUF loader does
(transformers/modeling_gguf_pytorch_utils.py):
  * llama: the rows of attn_q and attn_k are permuted per head for llama.cpp's interleaved rope; un-permuted here.
  * gemma3: every `*norm.weight` is stored as w + 1; 1 is subtracted here (the stacks multiply by 1 + w).
Metadata a Gemma 3 GGUF may not carry is set as llama.cpp sets it: a sliding layer pattern of 6 (every sixth
layer global), a local rope base of 10,000, and the score scale 1/sqrt(head_dim) (27B: 1/sqrt(hidden/heads));
the keys `attention.sliding_window_pattern`, `rope.freq_base_swa` and `attention.scale` override them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from spinfc.runtime.weights.config import ModelConfig, UnsupportedModel
from spinfc.runtime.weights.whole import reading_gguf

# GGUF tensor name (after `blk.N.`) -> Hugging Face name (after `model.layers.N.`), per family.
_LAYER_NAMES = {
    "attn_norm": "input_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "attn_q_norm": "self_attn.q_norm",
    "attn_k_norm": "self_attn.k_norm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
_FFN_NORM = {
    "llama": "post_attention_layernorm",
    "qwen3": "post_attention_layernorm",
    "gemma3": "pre_feedforward_layernorm",
}
_GEMMA_ONLY = {"post_attention_norm": "post_attention_layernorm", "post_ffw_norm": "post_feedforward_layernorm"}
_GLOBAL_NAMES = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}


def hf_name(gguf_name: str, family: str) -> str:
    """The Hugging Face name of a GGUF tensor; an error names a tensor spinfc does not know what to do with."""
    stem, _, suffix = gguf_name.rpartition(".")
    if stem in _GLOBAL_NAMES:
        return f"{_GLOBAL_NAMES[stem]}.{suffix}"
    parts = stem.split(".")
    if len(parts) == 3 and parts[0] == "blk":
        names = dict(_LAYER_NAMES, ffn_norm=_FFN_NORM[family], **(_GEMMA_ONLY if family == "gemma3" else {}))
        if parts[2] in names:
            return f"model.layers.{parts[1]}.{names[parts[2]]}.{suffix}"
    raise UnsupportedModel(
        f"GGUF tensor {gguf_name!r} has no place in spinfc's {family} stack "
        "(rope frequency tables, biases and extra norms are not supported)"
    )


def _field(reader, key: str, default=None):
    field = reader.fields.get(key)
    return default if field is None else field.contents()


def read_config(reader) -> ModelConfig:
    """The model's shape from GGUF metadata."""
    arch = _field(reader, "general.architecture")
    if arch not in ("llama", "qwen3", "gemma3"):
        raise UnsupportedModel(f"GGUF architecture {arch!r} is not supported; spinfc runs llama, qwen3 and gemma3")
    get = lambda key, default=None: _field(reader, f"{arch}.{key}", default)  # noqa: E731
    if get("rope.scaling.type", "none") not in ("none", None):
        raise UnsupportedModel(f"GGUF rope scaling {get('rope.scaling.type')!r} is not implemented by spinfc")
    names = {tensor.name for tensor in reader.tensors}
    hidden, heads = get("embedding_length"), get("attention.head_count")
    layers = get("block_count")
    vocab = get("vocab_size") or len(reader.fields["tokenizer.ggml.tokens"].data)
    head_dim = get("attention.key_length") or get("rope.dimension_count") or hidden // heads
    common = dict(
        family=arch,
        hidden=hidden,
        layers=layers,
        heads=heads,
        kv_heads=get("attention.head_count_kv", heads),
        head_dim=head_dim,
        intermediate=get("feed_forward_length"),
        vocab=vocab,
        rope_theta=float(get("rope.freq_base", 1_000_000.0 if arch == "gemma3" else 10_000.0)),
        norm_eps=float(get("attention.layer_norm_rms_epsilon")),
        tie_embeddings="output.weight" not in names,
    )
    if arch != "gemma3":
        return ModelConfig(**common)
    pattern = get("attention.sliding_window_pattern", 6)
    if isinstance(pattern, int):
        pattern = [bool((i + 1) % pattern) for i in range(layers)]
    scale = get("attention.scale")
    return ModelConfig(
        rope_local_theta=float(get("rope.freq_base_swa", 10_000.0)),
        sliding_window=get("attention.sliding_window"),
        sliding_layers=tuple(bool(sliding) for sliding in pattern),
        query_pre_attn_scalar=float(scale**-2 if scale else hidden // heads if layers == 62 else head_dim),
        **common,
    )


def _unpermute(weight: np.ndarray, heads: int) -> np.ndarray:
    """Undo llama.cpp's per-head row permutation of attn_q / attn_k: [heads * D, K] back to rotate_half order."""
    half = weight.shape[0] // heads // 2
    return weight.reshape(heads, half, 2, *weight.shape[1:]).swapaxes(1, 2).reshape(weight.shape)


def read_gguf(path: Path) -> tuple[ModelConfig, dict[str, torch.Tensor]]:
    """Dequantize every tensor of a GGUF file to float32 and name it as Hugging Face does."""
    from gguf import GGUFReader
    from gguf.quants import dequantize

    with reading_gguf(path):  # a truncated or zeroed file: one located line
        reader = GGUFReader(str(path))
    config = read_config(reader)
    state: dict[str, torch.Tensor] = {}
    for tensor in reader.tensors:
        name = hf_name(tensor.name, config.family)
        with reading_gguf(path):
            weight = np.asarray(dequantize(tensor.data, tensor.tensor_type), dtype=np.float32)
        if config.family == "llama" and tensor.name.endswith(("attn_q.weight", "attn_k.weight")):
            weight = _unpermute(weight, config.heads if "attn_q" in tensor.name else config.kv_heads)
        if config.family == "gemma3" and tensor.name.endswith("norm.weight"):
            weight = weight - np.float32(1.0)
        weight = np.ascontiguousarray(weight)
        # F32 tensors come as read-only views of the file's memory map
        state[name] = torch.from_numpy(weight if weight.flags.writeable else weight.copy())
    return config, state
