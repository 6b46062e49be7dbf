"""How far a result may move between launches of different shapes (a row alone or packed with others, a pass of
another row count): on CUDA not at all, since a pass launches at fixed sizes each checked for row invariance at
start-up (spinfc/backend/invariance.py); on the CPU by `CPU_TOLERANCE`, since its BLAS picks kernels by row count
and sums in another order (docs/api.md: "the same content's logprobs may differ in the last digits"). AMD EPYC and
Intel Xeon pick differently: a comparison that is bit for bit on one is not on the other.

`assert_same_across_launches(got, want, device)` compares tensors, floats and the values that hold them (dicts,
lists, tuples, attrs and dataclass instances), naming the first place where they differ; everything that is not a
float (tokens, texts, ids) must be equal."""

from __future__ import annotations

import dataclasses
import math

import attrs
import torch

CPU_TOLERANCE = 1e-5  # absolute up to 1, relative beyond: float32 rounds in proportion to the value


def tolerance(device: torch.device | str) -> float:
    """0 (bit for bit) on CUDA, CPU_TOLERANCE elsewhere."""
    return 0.0 if torch.device(device).type == "cuda" else CPU_TOLERANCE


def assert_same_across_launches(got, want, device: torch.device | str) -> None:
    """`got` and `want` the same but for `tolerance(device)` in each float; AssertionError names where not."""
    allowed = tolerance(device)
    difference = _first_difference(got, want, allowed, "")
    if difference is not None:
        rule = f"{allowed:g}, relative beyond 1" if allowed else "nothing, bit for bit"
        raise AssertionError(f"{difference} (allowed on {torch.device(device).type}: {rule})")


def _first_difference(got, want, allowed: float, where: str) -> str | None:
    if isinstance(want, torch.Tensor):
        return _tensor_difference(got, want, allowed, where)
    if isinstance(want, float):
        if isinstance(got, (int, float)) and math.isclose(got, want, rel_tol=allowed, abs_tol=allowed):
            return None
        return f"{where or 'the value'}: {got!r} against {want!r}"
    if attrs.has(type(want)) or dataclasses.is_dataclass(want):
        if type(got) is not type(want):
            return f"{where or 'the value'}: a {type(got).__name__} against a {type(want).__name__}"
        names = [f.name for f in (attrs.fields(type(want)) if attrs.has(type(want)) else dataclasses.fields(want))]
        return _first_of(((getattr(got, n), getattr(want, n), f"{where}.{n}") for n in names), allowed)
    if isinstance(want, dict):
        if not isinstance(got, dict) or got.keys() != want.keys():
            return f"{where or 'the value'}: keys {sorted(map(str, got))} against {sorted(map(str, want))}" \
                if isinstance(got, dict) else f"{where or 'the value'}: {got!r} against a dict"
        return _first_of(((got[k], want[k], f"{where}[{k!r}]") for k in want), allowed)
    if isinstance(want, (list, tuple)):
        if not isinstance(got, (list, tuple)) or len(got) != len(want):
            return f"{where or 'the value'}: {got!r} against {len(want)} items"
        return _first_of(((a, b, f"{where}[{k}]") for k, (a, b) in enumerate(zip(got, want))), allowed)
    return None if got == want else f"{where or 'the value'}: {got!r} against {want!r}"


def _first_of(pairs, allowed: float) -> str | None:
    return next((d for a, b, w in pairs if (d := _first_difference(a, b, allowed, w)) is not None), None)


def _tensor_difference(got, want: torch.Tensor, allowed: float, where: str) -> str | None:
    what = where or "the tensor"
    if not isinstance(got, torch.Tensor) or got.shape != want.shape or got.dtype != want.dtype:
        shape = tuple(got.shape) if isinstance(got, torch.Tensor) else type(got).__name__
        return f"{what}: {shape} {getattr(got, 'dtype', '')} against {tuple(want.shape)} {want.dtype}"
    if allowed == 0 or not want.is_floating_point():
        return None if torch.equal(got, want) else f"{what}: not bit for bit ({_largest(got, want)})"
    excess = (got.double() - want.double()).abs() - allowed * want.double().abs().clamp(min=1)
    return None if bool((excess <= 0).all()) else f"{what}: {_largest(got, want)}"


def _largest(got: torch.Tensor, want: torch.Tensor) -> str:
    if not want.is_floating_point():
        return f"{int((got != want).sum())} elements differ"
    gap = (got.double() - want.double()).abs()
    index = tuple(int(i) for i in torch.unravel_index(gap.argmax(), gap.shape))
    return f"largest difference {float(gap.max()):.3g} at {list(index)}: {float(got[index])!r} against " \
           f"{float(want[index])!r}"
