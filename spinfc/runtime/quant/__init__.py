"""W8A8 quantization with static activation scales: the schemes (schemes.py), the linear layer a stack runs
them with (linear.py), calibration (calibrate.py) and checkpoints in the compressed-tensors format
(checkpoint.py). `quantize_model` is what `spinfc quantize` runs."""

from __future__ import annotations

from pathlib import Path

from spinfc.runtime.quant.calibrate import Calibration, calibrate, file_sha256, read_texts
from spinfc.runtime.quant.checkpoint import quantize_state, read_quantized, write_checkpoint
from spinfc.runtime.quant.linear import QuantizedLinear
from spinfc.runtime.quant.schemes import SCHEMES, Scheme, UnknownScheme, scheme
from spinfc.runtime.quant.smooth import DEFAULT_ALPHA, smooth_state

__all__ = ["Calibration", "QuantizedLinear", "SCHEMES", "Scheme", "UnknownScheme", "calibrate", "float_model",
           "quantize_model", "quantize_state", "read_quantized", "scheme", "smooth_state", "write_checkpoint"]


def float_model(name: str) -> tuple:
    """(config, float32 state dict, tokenizer, served name, config.json dict) of a GGUF or snapshot model: a
    snapshot keeps its own config.json, a GGUF model gets one written from its metadata (`to_hf`)."""
    import json

    from spinfc import registry
    from spinfc.runtime.loader import _is_quantized
    from spinfc.runtime.weights import UnsupportedModel, load_gguf, read_snapshot
    from spinfc.runtime.weights.hf_config import to_hf

    source = registry.resolve(name)
    tokenizer = registry.load_tokenizer(name)
    if source.gguf is not None:
        config, state, _ = load_gguf(source.gguf)
        ids = {k: getattr(tokenizer, k) for k in ("bos_token_id", "eos_token_id", "pad_token_id")
               if getattr(tokenizer, k, None) is not None}
        hf = to_hf(config, **ids)
    else:
        directory = registry.snapshot_directory(source)
        if _is_quantized(directory):
            raise UnsupportedModel(f"{name} is already quantized: quantize the float model it was made from")
        config, state = read_snapshot(directory)
        hf = json.loads((directory / "config.json").read_text())
    state = {k: v.float() if v.is_floating_point() else v for k, v in state.items()}
    return config, state, tokenizer, source.name, dict(hf, torch_dtype="float32")


def quantize_model(name: str, scheme_name: str, calibration: Path, out: Path,
                   smoothing: float | None = DEFAULT_ALPHA) -> dict:
    """Calibrate `name` (float32, CPU) on the texts of `calibration` (JSONL), smooth its activation outliers into
    the weights (SmoothQuant with strength `smoothing`; None or 0: not), quantize it with `scheme_name` and write
    the checkpoint to `out`; returns the calibration summary."""
    from spinfc.runtime.models import build_model
    from spinfc.runtime.quant.calibrate import channel_maxima, launches_of, sequences_of
    from spinfc.runtime.quant.checkpoint import is_quantized_linear

    chosen = scheme(scheme_name)
    texts = read_texts(calibration)
    config, state, tokenizer, served, hf = float_model(name)
    model = build_model(config, state, name=served, weights_hash="calibration", fuse=False)
    summary = None
    if smoothing:
        x_max = channel_maxima(model, launches_of(sequences_of(tokenizer, texts), model.device))
        state, summary = smooth_state(config, state, x_max, smoothing, lambda key: is_quantized_linear(key, config))
        model = build_model(config, state, name=served, weights_hash="calibration", fuse=False)
    found = calibrate(model, tokenizer, texts, file_sha256(calibration), smoothing=summary)
    quantized = quantize_state(config, state, found, chosen)
    write_checkpoint(out, hf, config, quantized, chosen, found, tokenizer, source=served)
    return {"scheme": chosen.name, **found.summary()}
