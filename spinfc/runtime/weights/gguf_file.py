"""Read a GGUF file (the `gguf` package: GGUFReader and its dequantizer) into a `ModelConfig` and a float32
state dict in Hugging Face naming.

What differs by family is the family's (`FamilySpec.gguf`, a `GgufReading`): its architecture name, its own tensor
names, the metadata only it has, and what llama.cpp's converter changed in its tensors, undone as transformers'
GGUF loader does (transformers/modeling_gguf_pytorch_utils.py). Llama's q and k rows are permuted per head (undone
by `unpermute`); Gemma 3's norms are stored as w + 1.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import torch

from spinfc.runtime.models.families import FAMILIES, family_of
from spinfc.runtime.weights.config import ModelConfig, UnsupportedModel
from spinfc.whole_files import reading_gguf

# GGUF tensor name (after `blk.N.`) -> Hugging Face name (after `model.layers.N.`), every family's; a family adds
# its own (`GgufReading.layer_names`: where `ffn_norm` goes, and any other norms).
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
_GLOBAL_NAMES = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}


@attrs.frozen
class GgufReading:
    """How a family's GGUF files are read (a family's `FamilySpec.gguf`): what llama.cpp's converter names its
    architecture, the family's own layer tensor names, its config from the metadata, and what the converter did to
    its tensors, undone."""

    architecture: str  # `general.architecture`
    layer_names: dict[str, str]  # GGUF name after `blk.N.` -> Hugging Face name after `model.layers.N.`
    rope_base: float = 10_000.0  # `rope.freq_base` where the file has none
    # (get, fields) -> the config: `get(key, default)` reads `<architecture>.<key>`, `fields` are every family's;
    # None: a plain `ModelConfig` of the fields
    read_config: Callable[[Callable, dict[str, Any]], ModelConfig] | None = None
    # (GGUF tensor name, its float32 weight, config) -> the weight as the Hugging Face checkpoint has it
    undo: Callable[[str, np.ndarray, ModelConfig], np.ndarray] | None = None
    # config -> the family's own keys of a config.json written for it (`weights/hf_config.py`), model_type and
    # architectures among them
    hf_keys: Callable[[ModelConfig], dict[str, Any]] | None = None


def readings() -> dict[str, tuple[str, GgufReading]]:
    """(family, reading) of the families that read GGUF files, by the architecture name a file gives."""
    return {f.spec.gguf.architecture: (f.name, f.spec.gguf) for f in FAMILIES if f.spec.gguf is not None}


def reading_of(family: str) -> GgufReading:
    """The GGUF reading of a family (one that has none: UnsupportedModel)."""
    reading = family_of(family).spec.gguf
    if reading is None:
        raise UnsupportedModel(f"the {family} family reads no GGUF files, so spinfc writes no config.json for one")
    return reading


def hf_name(gguf_name: str, reading: GgufReading, family: str) -> str:
    """The Hugging Face name of a GGUF tensor; an error names a tensor spinfc does not know what to do with."""
    stem, _, suffix = gguf_name.rpartition(".")
    if stem in _GLOBAL_NAMES:
        return f"{_GLOBAL_NAMES[stem]}.{suffix}"
    parts = stem.split(".")
    if len(parts) == 3 and parts[0] == "blk":
        names = {**_LAYER_NAMES, **reading.layer_names}
        if parts[2] in names:
            return f"model.layers.{parts[1]}.{names[parts[2]]}.{suffix}"
    raise UnsupportedModel(
        f"GGUF tensor {gguf_name!r} has no place in spinfc's {family} stack "
        "(rope frequency tables, biases and extra norms are not supported)"
    )


def _field(reader, key: str, default=None):
    field = reader.fields.get(key)
    return default if field is None else field.contents()


def read_config(reader) -> tuple[ModelConfig, GgufReading]:
    """The model's shape from GGUF metadata, and how its family's tensors are read."""
    arch = _field(reader, "general.architecture")
    known = readings()
    if arch not in known:
        raise UnsupportedModel(f"GGUF architecture {arch!r} is not supported; spinfc runs "
                               f"{', '.join(list(known)[:-1])} and {list(known)[-1]}")
    family, reading = known[arch]
    get = lambda key, default=None: _field(reader, f"{arch}.{key}", default)  # noqa: E731
    if get("rope.scaling.type", "none") not in ("none", None):
        raise UnsupportedModel(f"GGUF rope scaling {get('rope.scaling.type')!r} is not implemented by spinfc")
    names = {tensor.name for tensor in reader.tensors}
    hidden, heads = get("embedding_length"), get("attention.head_count")
    vocab = get("vocab_size") or len(reader.fields["tokenizer.ggml.tokens"].data)
    fields = dict(
        family=family,
        hidden=hidden,
        layers=get("block_count"),
        heads=heads,
        kv_heads=get("attention.head_count_kv", heads),
        head_dim=get("attention.key_length") or get("rope.dimension_count") or hidden // heads,
        intermediate=get("feed_forward_length"),
        vocab=vocab,
        rope_theta=float(get("rope.freq_base", reading.rope_base)),
        norm_eps=float(get("attention.layer_norm_rms_epsilon")),
        tie_embeddings="output.weight" not in names,
    )
    config = reading.read_config(get, fields) if reading.read_config is not None else ModelConfig(**fields)
    return config, reading


def unpermute(weight: np.ndarray, heads: int) -> np.ndarray:
    """Undo llama.cpp's per-head row permutation of attn_q / attn_k: [heads * D, K] back to rotate_half order."""
    half = weight.shape[0] // heads // 2
    return weight.reshape(heads, half, 2, *weight.shape[1:]).swapaxes(1, 2).reshape(weight.shape)


def read_gguf(path: Path) -> tuple[ModelConfig, dict[str, torch.Tensor]]:
    """Dequantize every tensor of a GGUF file to float32 and name it as Hugging Face does."""
    from gguf import GGUFReader
    from gguf.quants import dequantize

    with reading_gguf(path):  # a truncated or zeroed file: one located line
        reader = GGUFReader(str(path))
    config, reading = read_config(reader)
    state: dict[str, torch.Tensor] = {}
    for tensor in reader.tensors:
        name = hf_name(tensor.name, reading, config.family)
        with reading_gguf(path):
            weight = np.asarray(dequantize(tensor.data, tensor.tensor_type), dtype=np.float32)
        if reading.undo is not None:
            weight = reading.undo(tensor.name, weight, config)
        weight = np.ascontiguousarray(weight)
        # F32 tensors come as read-only views of the file's memory map
        state[name] = torch.from_numpy(weight if weight.flags.writeable else weight.copy())
    return config, state
