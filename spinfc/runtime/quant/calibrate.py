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
PACK_TOKENS = 512  # rows of one calibration launch: short texts packed together (`launches_of`)


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
    return packed_launch([tokens], device)


def packed_launch(sequences: list[list[int]], device="cpu", scored: int | None = None,
                  every_row: bool = False) -> Launch:
    """Causal sequences in one launch, each a span of its own (positions from 0) that no other row sees. The answer
    rows: each sequence's last row (reading nothing of note: token 0), or with `scored` the last `scored` positions
    of each, reading the log p of the token after them (the last token is only read), or with `every_row` every
    row, reading nothing (`Model.hidden` gives them all)."""
    tokens, positions, ends, spans, rows, read_token = [], [], [], [], [], []
    for sequence in sequences:
        start, T = len(tokens), len(sequence) - (scored is not None)
        tokens += sequence[:T]
        positions += range(T)
        ends += [start + T] * T
        spans.append((start, start + T))
        if scored is not None:
            first = max(0, T - scored)
            rows += range(start + first, start + T)
            read_token += sequence[first + 1:T + 1]
        else:
            rows += range(start, start + T) if every_row else [start + T - 1]
            read_token += [] if every_row else [0]
    tensor = lambda values, dtype=torch.int64: torch.tensor(values, dtype=dtype, device=device)  # noqa: E731
    return Launch(tokens=tensor(tokens), positions=tensor(positions), ends=tensor(ends, torch.int32),
                  spans=tuple(spans), rows=tensor(rows), read_row=torch.arange(len(read_token), device=device),
                  read_token=tensor(read_token))


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


def launches_of(sequences: list[list[int]], device, tokens: int = PACK_TOKENS) -> list[Launch]:
    """The sequences packed into launches of at most `tokens` rows (a longer sequence alone): a small model's
    forward reads every weight whatever its rows, so one launch of many short texts costs about what one text
    does. A row sees only its own sequence, so its activations are what the text alone gives."""
    launches, group, size = [], [], 0
    for sequence in sequences:
        if group and size + len(sequence) > tokens:
            launches.append(packed_launch(group, device))
            group, size = [], 0
        group.append(sequence)
        size += len(sequence)
    return launches + ([packed_launch(group, device)] if group else [])


def calibrate(model, tokenizer, texts: list[str], source_sha256: str = "",
              smoothing: dict | None = None) -> Calibration:
    """Run every text through `model` (a float stack, unfused) and record max |x| at each linear input."""
    sequences = sequences_of(tokenizer, texts)
    maxima = input_maxima(model, launches_of(sequences, model.device))
    return Calibration(maxima=maxima, texts=len(texts), tokens=sum(map(len, sequences)), source_sha256=source_sha256,
                       smoothing=smoothing)


def file_sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()
