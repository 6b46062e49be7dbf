"""The schemes: what each stores, and how an activation is quantized (a static scale, or one per token: W8A8) or
left in the compute dtype (W4A16).

    fp8-static   weights float8 e4m3 with one scale per output channel; activations float8 e4m3 with one static
                 scale per linear layer input (max |x| over a calibration run / 448)
    int8-static  weights int8, symmetric, one scale per output channel; activations int8 with one static scale
                 per linear layer input (max |x| / 127.5, the compressed-tensors convention); round half to even
    fp8-dynamic  weights as fp8-static; activations float8 e4m3 with one scale per token (row), computed from
                 that row when it is multiplied (max |x_row| / 448): compressed-tensors' FP8_DYNAMIC preset, what
                 llm-compressor writes for most fp8 checkpoints; no activation calibration
    w4a16        weights int4 in groups of 128 input channels, symmetric (one scale per group and output channel),
                 quantized by GPTQ (`gptq.py`), packed eight to an int32 (compressed-tensors' pack-quantized, what
                 llm-compressor's W4A16 preset writes); activations stay in the compute dtype
    w4a16-asym   the same with a zero point per group (llm-compressor's W4A16_ASYM)

Scales follow compressed-tensors' own arithmetic (`calculate_qparams`: scale = max |x| / (range / 2)), so a
checkpoint spinfc writes holds what llm-compressor's min-max observers would have written for the same maxima.
A static per-tensor activation scale keeps batch invariance: a row is quantized the same way whatever else is in
the pass (a dynamic per-tensor scale would not be); so does a per-token one, computed from the row alone.
"""

from __future__ import annotations

import attrs
import torch

FP8 = torch.float8_e4m3fn
FP8_MAX = float(torch.finfo(FP8).max)  # 448


@attrs.frozen
class Scheme:
    name: str  # spinfc's name, in fingerprints and on the command line
    kind: str  # "float" or "int": the compressed-tensors QuantizationType
    storage: torch.dtype  # what the weights and the quantized activations are stored as
    format: str  # the compressed-tensors format of the checkpoint
    q_min: float
    q_max: float
    bits: int = 8
    group_size: int | None = None  # weights: one scale per group of this many input channels (None: per channel)
    symmetric: bool = True
    weight_only: bool = False  # activations stay in the compute dtype (no input scale)
    dynamic: bool = False  # activations scaled per token at run time (`token_scales`), not by a static scale

    def quantize(self, x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        """x (any float dtype), scale: a float32 scalar tensor -> x / scale in `storage`, clamped to the range
        (int: rounded half to even, as torch.round and compressed-tensors do). Computed in float32."""
        scaled = (x.float() / scale).clamp_(self.q_min, self.q_max)
        if self.kind == "int":
            scaled = scaled.round_()
        return scaled.to(self.storage)

    def dequantize(self, q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        """q in `storage` times its scale (broadcast), in float32."""
        return q.float() * scale

    def args(self, *, activations: bool) -> dict:
        """The compressed-tensors QuantizationArgs (as a dict) of the weights or the input activations."""
        common = {"num_bits": self.bits, "type": self.kind, "symmetric": self.symmetric, "dynamic": False}
        if self.weight_only:
            if activations:
                raise ValueError(f"{self.name} quantizes weights only: its activations have no quantization args")
            return {**common, "strategy": "group", "group_size": self.group_size, "observer": "minmax"}
        if activations and self.dynamic:
            return {**common, "strategy": "token", "dynamic": True}
        if activations:
            return {**common, "strategy": "tensor", "observer": "static_minmax"}
        return {**common, "strategy": "channel", "observer": "minmax"}


SCHEMES: dict[str, Scheme] = {
    "fp8-static": Scheme("fp8-static", "float", FP8, "float-quantized", -FP8_MAX, FP8_MAX),
    "int8-static": Scheme("int8-static", "int", torch.int8, "int-quantized", -128.0, 127.0),
    "fp8-dynamic": Scheme("fp8-dynamic", "float", FP8, "float-quantized", -FP8_MAX, FP8_MAX, dynamic=True),
    "w4a16": Scheme("w4a16", "int", torch.int32, "pack-quantized", -8.0, 7.0, bits=4, group_size=128,
                    weight_only=True),
    "w4a16-asym": Scheme("w4a16-asym", "int", torch.int32, "pack-quantized", -8.0, 7.0, bits=4, group_size=128,
                         symmetric=False, weight_only=True),
}

W8A8 = tuple(name for name, chosen in SCHEMES.items() if not chosen.weight_only)  # quantized with static scales


class UnknownScheme(ValueError):
    """A scheme name spinfc does not implement; the message lists those it does."""


def scheme(name: str) -> Scheme:
    if name not in SCHEMES:
        raise UnknownScheme(f"unknown quantization scheme {name!r}: use one of {', '.join(SCHEMES)}")
    return SCHEMES[name]


def scales_from_max(amax: torch.Tensor, chosen: Scheme) -> torch.Tensor:
    """max |x| (any shape) -> float32 scales, by compressed-tensors' `calculate_qparams` (symmetric): a zero
    maximum gets the dtype's eps instead of 0, so nothing is ever divided by zero."""
    from compressed_tensors.quantization import QuantizationArgs
    from compressed_tensors.quantization.utils import calculate_qparams

    args = QuantizationArgs(**chosen.args(activations=False))
    amax = amax.float()
    scales, _ = calculate_qparams(-amax, amax, args)
    return scales.float().reshape(amax.shape)


def quantize_weight(weight: torch.Tensor, chosen: Scheme) -> tuple[torch.Tensor, torch.Tensor]:
    """weight [N, K] (float) -> (quantized [N, K] in `storage`, per-output-channel scales [N] float32)."""
    scale = scales_from_max(weight.float().abs().amax(dim=1), chosen)  # [N]
    return chosen.quantize(weight, scale[:, None]), scale
