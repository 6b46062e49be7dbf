"""The float model a quantized checkpoint is made from: what every scheme's calibration starts with."""

from __future__ import annotations

from spinfc import registry
from spinfc.runtime.quant.reading import is_quantized
from spinfc.runtime.weights import UnsupportedModel, load_gguf, read_snapshot
from spinfc.runtime.weights.folder import hf_config, model_config
from spinfc.runtime.weights.hf_config import to_hf


def float_model(name: str) -> tuple:
    """(config, float32 state dict, tokenizer, served name, config.json dict) of a GGUF or snapshot model: a
    snapshot keeps its own config.json, a GGUF model gets one written from its metadata (`to_hf`)."""

    source = registry.resolve(name)
    if source.gguf is None:  # a folder's config.json checked before transformers reads it with the tokenizer
        directory = registry.snapshot_directory(source)
        model_config(directory, hf_config(directory))
    tokenizer = registry.load_tokenizer(name)
    if source.gguf is not None:
        config, state, _ = load_gguf(source.gguf)
        ids = {k: getattr(tokenizer, k) for k in ("bos_token_id", "eos_token_id", "pad_token_id")
               if getattr(tokenizer, k, None) is not None}
        hf = to_hf(config, **ids)
    else:
        directory = registry.snapshot_directory(source)
        hf = hf_config(directory)
        if is_quantized(hf):
            raise UnsupportedModel(f"{name} is already quantized: quantize the float model it was made from")
        config, state = read_snapshot(directory)
    state = {k: v.float() if v.is_floating_point() else v for k, v in state.items()}
    return config, state, tokenizer, source.name, dict(hf, torch_dtype="float32")
