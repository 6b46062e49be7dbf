"""The weight-only path of `spinfc quantize` (W4A16): one calibration run of the float32 model collects each
linear layer's input Hessian (`gptq.input_hessians`), GPTQ quantizes every layer `is_quantized_linear` names, and
the checkpoint is written in compressed-tensors' pack-quantized format (`checkpoint.write_checkpoint`)."""

from __future__ import annotations

from pathlib import Path

import torch

from spinfc.runtime.models import build_model
from spinfc.runtime.quant.calibrate import (Calibration, DELTA_NET_SHORTS, LINEAR_SHORTS, file_sha256, launches_of,
                                            read_texts, sequences_of, weight_names)
from spinfc.runtime.quant.checkpoint import is_quantized_linear, write_checkpoint
from spinfc.runtime.quant.float_model import float_model
from spinfc.runtime.quant.gptq import gptq, input_hessians
from spinfc.runtime.quant.int4 import Int4Linear
from spinfc.runtime.quant.progress import Silent
from spinfc.runtime.quant.schemes import Scheme
from spinfc.runtime.weights.config import UnsupportedModel


def check_groups(config, state: dict[str, torch.Tensor], chosen: Scheme) -> list[str]:
    """The weights `chosen` quantizes; raises UnsupportedModel, naming a group size that fits, where a layer's input
    width is not a multiple of the scheme's (compressed-tensors' groups must tile the width)."""
    keys = [key for key in state if is_quantized_linear(key, config, weight_only=True)]
    for key in keys:
        if state[key].shape[1] % chosen.group_size:
            fits = [g for g in (128, 64, 32) if all(state[k].shape[1] % g == 0 for k in keys)]
            hint = f"give --group-size {fits[0]}" if fits else "no group size of 32, 64 or 128 fits every layer"
            raise UnsupportedModel(f"{key}: its input width {state[key].shape[1]} is not a multiple of the group size "
                                   f"{chosen.group_size}: {hint}")
    return keys


def gptq_state(config, state: dict[str, torch.Tensor], hessians: dict[str, torch.Tensor], chosen: Scheme,
               device: str = "cpu", steps=None) -> dict:
    """The float `state` with every weight `is_quantized_linear` names (weight-only) as an `Int4Linear` (GPTQ with
    its input's Hessian, on `device`); the rest as it is."""
    steps = steps or Silent()
    chosen_keys = check_groups(config, state, chosen)
    out = dict(state)
    for key in steps.over(chosen_keys, len(chosen_keys), "GPTQ"):
        if key not in hessians:
            raise ValueError(f"calibration saw no input of {key}: calibrate the same model")
        q, scale, zero = gptq(state[key].to(device), hessians[key].to(device), chosen)
        out[key] = Int4Linear.from_integers(chosen, q, scale, zero, chosen.group_size).to("cpu")  # packed on `device`
    return out


def quantize_weight_only(name: str, chosen: Scheme, calibration: Path, out: Path, device: str = "cpu",
                         steps=None) -> dict:
    """Calibrate `name` (float32, the reference ops on `device`) on the texts of `calibration`, quantize it with
    GPTQ to `chosen` (a weight-only scheme) and write the checkpoint to `out`; returns the calibration summary."""
    steps = steps or Silent()
    texts, sha = read_texts(calibration), file_sha256(calibration)
    steps.say(f"reading {name} as float32 (a GGUF model is dequantized) and its tokenizer")
    config, state, tokenizer, served, hf = float_model(name)
    check_groups(config, state, chosen)  # before the calibration run, not after it
    sequences = sequences_of(tokenizer, texts)
    steps.say(f"calibrating on {len(texts)} texts ({sum(map(len, sequences)):,} tokens) from {calibration}")
    model = build_model(config, state, name=served, weights_hash="calibration", fuse=False, device=device)
    names = {i: key for i, key in weight_names(model, LINEAR_SHORTS + DELTA_NET_SHORTS).items()
             if is_quantized_linear(key, config, weight_only=True)}
    launches = launches_of(sequences, model.device)
    launches = steps.over(launches, len(launches), f"calibrating ({len(launches)} launches of packed texts)")
    hessians, maxima = input_hessians(model, launches, names)
    del model
    found = Calibration(maxima=maxima, texts=len(texts), tokens=sum(map(len, sequences)), source_sha256=sha)
    quantized = gptq_state(config, state, hessians, chosen, device, steps)
    steps.say(f"writing {out} ({chosen.name}, pack-quantized)")
    write_checkpoint(out, hf, config, quantized, chosen, found, tokenizer, source=served)
    return {"scheme": chosen.name, **found.summary()}
