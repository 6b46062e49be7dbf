"""`spinfc quantize`'s work: a model calibrated (and smoothed), its most sensitive layers kept within a gap
budget, quantized and written as a compressed-tensors checkpoint; `quantize_model` is what the command runs."""

from __future__ import annotations

from pathlib import Path

import attrs

from spinfc.runtime.models import build_model
from spinfc.runtime.quant.calibrate import (Calibration, channel_maxima, file_sha256, input_maxima, launches_of,
                                            read_texts, sequences_of)
from spinfc.runtime.quant.checkpoint import is_quantized_linear, quantize_state, write_checkpoint
from spinfc.runtime.quant.float_model import float_model
from spinfc.runtime.quant.linear import QuantizedLinear
from spinfc.runtime.quant.progress import Silent
from spinfc.runtime.quant.schemes import Scheme, scheme
from spinfc.runtime.quant.sensitivity import choose
from spinfc.runtime.quant.smooth import DEFAULT_ALPHA, smooth_state
from spinfc.runtime.quant.weight_only import quantize_weight_only
from spinfc.runtime.weights import UnsupportedModel
from spinfc.runtime.weights.folder import location_of, naming_files


def calibrated(name: str, calibration: Path, strengths=(DEFAULT_ALPHA,), device: str = "cpu", steps=None):
    """Yield (strength, config, float32 state, Calibration, tokenizer, served name, config.json dict) of `name` for
    each smoothing strength in `strengths` (0: no smoothing): one pass of the float32 model (the reference ops on
    `device`) over the texts of `calibration` gives the per-channel input maxima (the unsmoothed calibration,
    and what smoothing balances); each strength above 0 smooths the weights (`smooth.smooth_state`) and takes the
    maxima again on the smoothed model, the one that is quantized. `steps` (`progress.Steps`) hears each step."""
    steps = steps or Silent()
    texts, sha = read_texts(calibration), file_sha256(calibration)
    steps.say(f"reading {name} as float32 (a GGUF model is dequantized) and its tokenizer")
    config, state, tokenizer, served, hf = float_model(name)
    sequences = sequences_of(tokenizer, texts)
    counts = {"texts": len(texts), "tokens": sum(map(len, sequences)), "source_sha256": sha}
    steps.say(f"calibrating on {len(texts)} texts ({counts['tokens']:,} tokens) from {calibration}")
    with naming_files(location_of(name)):  # a tensor missing or of the wrong shape: the file that holds it
        model = build_model(config, state, name=served, weights_hash="calibration", fuse=False, device=device)
    launches = launches_of(sequences, model.device)
    launches = steps.over(launches, len(launches), f"calibrating ({len(launches)} launches of packed texts)")
    x_max = {k: v.cpu() for k, v in channel_maxima(model, launches).items()}
    del model
    for strength in strengths:
        if not strength:
            found = Calibration(maxima={k: float(v.max()) for k, v in x_max.items()}, **counts)
            yield strength, config, state, found, tokenizer, served, hf
            continue
        steps.say(f"smoothing (strength {strength:g}) and calibrating the smoothed model again")
        smoothed, summary = smooth_state(config, state, x_max, strength, lambda k: is_quantized_linear(k, config))
        model = build_model(config, smoothed, name=served, weights_hash="calibration", fuse=False, device=device)
        launches = launches_of(sequences, model.device)
        launches = steps.over(launches, len(launches), "calibrating (smoothed)")
        found = Calibration(maxima=input_maxima(model, launches), smoothing=summary, **counts)
        del model
        yield strength, config, smoothed, found, tokenizer, served, hf


def quantize_model(name: str, scheme_name: str, calibration: Path, out: Path, smoothing: float = 0.0,
                   device: str = "cpu", steps=None, max_gap: float | None = None,
                   group_size: int | None = None) -> dict:
    """Calibrate `name` (float32, the reference ops on `device`: `spinfc quantize --device`, the CPU by default) on the
    texts of `calibration` (JSONL; `DEFAULT_CALIBRATION`, the bundled set, when None), smooth its activation
    outliers into the weights (SmoothQuant with strength `smoothing`; 0, the default: none, as it narrowed Gemma's gap and widened SmolLM2's, docs/quantization.md),
    keep the layers that bring the gap within `max_gap` in the half dtype (`keep_within`; None: quantize every
    layer), quantize it with `scheme_name` and write the checkpoint to `out`; returns the calibration summary. A
    weight-only scheme (w4a16) is quantized by GPTQ instead (`weight_only.quantize_weight_only`): it has no
    activation scales to smooth or to keep layers for; `group_size` (None: the scheme's 128) sets its groups."""
    chosen = scheme(scheme_name)
    if group_size is not None:
        if not chosen.weight_only:
            raise UnsupportedModel(f"--group-size applies to the int4 schemes (w4a16, w4a16-asym), not {chosen.name}, "
                                   "whose weights have one scale per output channel; leave it out")
        chosen = attrs.evolve(chosen, group_size=group_size)
    if chosen.weight_only:
        if smoothing or max_gap is not None:
            raise UnsupportedModel(f"{chosen.name} quantizes weights only (GPTQ): --smoothing and --max-gap apply to "
                                   "the W8A8 schemes' activation scales; leave them out")
        return quantize_weight_only(name, chosen, calibration, out, device, steps)
    for _, config, state, found, tokenizer, served, hf in calibrated(name, calibration, (smoothing,), device, steps):
        if max_gap is not None:
            found = keep_within(max_gap, chosen, config, state, found, tokenizer, calibration, served, device, steps)
        if steps is not None:
            steps.say(f"quantizing the linear layers ({chosen.name}) and writing {out}")
        write_quantized(out, chosen, config, state, found, tokenizer, served, hf)
    return {"scheme": chosen.name, **found.summary()}


def keep_within(max_gap: float, chosen: Scheme, config, state: dict, found: Calibration, tokenizer, calibration: Path,
                served: str, device: str = "cpu", steps=None) -> Calibration:
    """`found` with the layers to keep in the half dtype so that the gap to float32 on the calibration texts is
    at most `max_gap` (`sensitivity.choose`; `steps`, a `progress.Steps`, hears each measurement)."""
    quantized = {k: v for k, v in quantize_state(config, state, found, chosen).items()
                 if isinstance(v, QuantizedLinear)}
    model = build_model(config, state, name=served, weights_hash="calibration", fuse=False, device=device)
    kept = choose(model, quantized, sequences_of(tokenizer, read_texts(calibration)), max_gap, steps)
    return attrs.evolve(found, kept=kept.summary())


def write_quantized(out: Path, chosen: Scheme, config, state: dict, found: Calibration, tokenizer, served: str,
                    hf: dict) -> None:
    """Quantize a calibrated float32 state (from `calibrated`) with `chosen` and write its checkpoint to `out`."""
    write_checkpoint(out, hf, config, quantize_state(config, state, found, chosen), chosen, found, tokenizer,
                     source=served)
