"""Calibration: the largest |activation| at the input of every linear layer, over a set of texts, run through
the float32 model. Static activation scales are these maxima over the scheme's range (`schemes.scales_from_max`).

Each text is one causal sequence (a single-span launch) through the model's own forward; a maximum is exact
arithmetic, so the same model and texts give the same scales every time, in any order.
"""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path

import attrs
import torch

from spinfc.backend.launch import Launch

MAX_TOKENS = 512  # per calibration text; longer ones are cut (the scales are maxima, a long tail adds little)


class CalibrationError(ValueError):
    """A calibration file that cannot be used; the message names the file and line."""


@attrs.frozen
class Calibration:
    maxima: dict[str, float]  # checkpoint weight name (…q_proj.weight) -> max |input| seen
    texts: int
    tokens: int
    source_sha256: str
    smoothing: dict | None = None  # what `smooth.smooth_state` did before these maxima were taken, if anything
    kept: dict | None = None  # the layers kept in the half dtype under a gap budget (`sensitivity.Kept.summary`)

    @property
    def kept_modules(self) -> tuple[str, ...]:
        return tuple(self.kept["modules"]) if self.kept else ()

    def summary(self) -> dict:
        found = {"texts": self.texts, "tokens": self.tokens, "sha256": self.source_sha256,
                 "input_max": dict(sorted(self.maxima.items()))}
        found = {**found, "smoothing": self.smoothing} if self.smoothing else found
        return {**found, "kept_in_half": self.kept} if self.kept else found


def read_texts(path: Path) -> list[str]:
    """The `text` of every line of a JSONL file (blank lines skipped)."""
    texts = []
    raw = Path(path).read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        line = raw.count(b"\n", 0, error.start) + 1
        raise CalibrationError(f"{path}:{line}: not UTF-8 (byte {error.start:,} is 0x{raw[error.start]:02x}); save "
                               "the file as UTF-8") from None
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise CalibrationError(f"{path}:{number}:{error.colno}: not JSON ({error.msg}); write one "
                                   '{"text": "..."} object per line') from None
        if not isinstance(record, dict) or not isinstance(record.get("text"), str) or not record["text"].strip():
            raise CalibrationError(f'{path}:{number}: expected an object with a non-empty "text" string')
        texts.append(record["text"])
    if not texts:
        raise CalibrationError(f'{path}: no texts; write one {{"text": "..."}} object per line')
    return texts


def sequence_launch(tokens: list[int], device) -> Launch:
    """One causal sequence as a launch: every row sees the rows before it; the last row is the one answer row."""
    T = len(tokens)
    ids = torch.tensor(tokens, dtype=torch.int64, device=device)
    index = torch.zeros(1, dtype=torch.int64, device=device)
    return Launch(tokens=ids, positions=torch.arange(T, device=device),
                  ends=torch.full((T,), T, dtype=torch.int32, device=device), spans=((0, T),),
                  rows=torch.tensor([T - 1], device=device), read_row=index, read_token=index)


LINEAR_SHORTS = ("q", "k", "v", "o", "gate", "up", "down")
DELTA_NET_SHORTS = ("in_qkv", "z", "b", "a")  # a Gated DeltaNet layer's input projections (its "o" is out_proj)


def weight_names(model, shorts: tuple[str, ...] = LINEAR_SHORTS) -> dict[int, str]:
    """id(weight) -> its checkpoint name, for every linear weight of the stack (unfused) named by `shorts`."""
    names = {}
    for i, layer in enumerate(model.layers):
        if "qkv" in layer:
            raise ValueError("calibrate a model built with fuse=False: fused q/k/v hide which layer reads what")
        for short, long in model.layer_weight_names(i).items():
            if short in shorts:
                names[id(layer[short])] = f"model.layers.{i}.{long}"
    return names


@torch.inference_mode()
def input_maxima(model, launches) -> dict[str, float]:
    """max |x| at each linear input of `model` (a float stack, unfused) over its forward of every launch."""
    return {name: float(m.max()) for name, m in channel_maxima(model, launches).items()}


@torch.inference_mode()
def channel_maxima(model, launches) -> dict[str, torch.Tensor]:
    """max |x| per input channel ([K] float32) at each linear input of `model` (a float stack, unfused) over its
    forward of every launch: what smoothing (`smooth.py`) balances against the weights' columns."""
    names = weight_names(model)
    maxima: dict[str, torch.Tensor] = {}
    view = copy.copy(model)  # the model's own forward, with a linear that looks at its input first

    def observed(x: torch.Tensor, weight, out_dtype: torch.dtype | None = None) -> torch.Tensor:
        name = names.get(id(weight))
        if name is not None:
            seen = x.detach().abs().float().amax(dim=0)
            maxima[name] = torch.maximum(maxima[name], seen) if name in maxima else seen
        return type(model).linear(view, x, weight, out_dtype)

    view.linear = observed
    view.residual_in_matmul = False  # every output projection through `linear`, so its input is seen
    for launch in launches:
        view.forward(launch)
    return maxima


def sequences_of(tokenizer, texts: list[str]) -> list[list[int]]:
    return [tokenizer(text)["input_ids"][:MAX_TOKENS] for text in texts]


def launches_of(sequences: list[list[int]], device):
    return (sequence_launch(ids, device) for ids in sequences)


def calibrate(model, tokenizer, texts: list[str], source_sha256: str = "",
              smoothing: dict | None = None) -> Calibration:
    """Run every text through `model` (a float stack, unfused) and record max |x| at each linear input."""
    sequences = sequences_of(tokenizer, texts)
    maxima = input_maxima(model, launches_of(sequences, model.device))
    return Calibration(maxima=maxima, texts=len(texts), tokens=sum(map(len, sequences)), source_sha256=source_sha256,
                       smoothing=smoothing)


def file_sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()
