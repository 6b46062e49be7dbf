"""The Triton backend as an `ops` namespace: the same functions, with the same signatures, as
`spinfc.backend.reference`, so a model stack takes either (`ops=triton_ops`).

Each op runs its Triton kernel when its tensors are on a GPU (or when `TRITON_INTERPRET=1`, for the CPU tests),
and falls back to the reference otherwise. Differences from the reference a caller must know:
  - `apply_rope` rotates its input in place (and returns it);
  - `tree_attention` reads only `ends` (not `spans`): it relies on the layout's invariants (an `end` never
    passes its own span; a padding row j has ends[j] = j + 1), and on contents starting at multiples of
    `kernels.tree_attention.ALIGNMENT`; T must be a multiple of it too;
  - with `quant`, the norms, the gated activation and tree attention write the next linear layer's 8-bit input
    in their own store (one rounding, from float32), where the reference rounds the same float32 result in torch:
    the two agree within a quantization step (the float32 results differ in their last bits). Where this
    device's conversion to the 8-bit dtype does not match torch's (`kernels.quantize`'s start-up check), torch
    quantizes the kernel's unquantized result, so a score never depends on how a Triton build converts.
Nothing here synchronises with the host, so a whole pass can be captured in a CUDA graph (`backend.graphs`).
"""

from __future__ import annotations

import os

import torch

from spinfc.backend import reference
from spinfc.backend.kernels import answer_head, gated_act as _gated_act, rms_norm as _rms_norm, rope
from spinfc.backend.kernels import decode_attention as _decode_attention, quantize as _quantize
from spinfc.backend.kernels import tree_attention as _tree_attention
from spinfc.backend.kernels.quantize_reference import ActivationQuant

ALIGNMENT = _tree_attention.ALIGNMENT


def _on_triton(t: torch.Tensor) -> bool:
    return t.is_cuda or os.environ.get("TRITON_INTERPRET") == "1"


def _converts(t: torch.Tensor, quant: ActivationQuant | None) -> bool:
    """Whether a kernel may write `quant`'s 8-bit dtype itself on t's device (no quant: nothing to convert)."""
    return quant is None or _quantize._kernel_ok(t.device, quant.storage, quant.q_min, quant.q_max)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float, unit_offset: bool,
             out_dtype: torch.dtype | None = None, quant: ActivationQuant | None = None) -> torch.Tensor:
    if not _on_triton(x):
        return reference.rms_norm(x, weight, eps, unit_offset, out_dtype, quant)
    if not _converts(x, quant):
        return quant.reference(_rms_norm.rms_norm(x, weight, eps, unit_offset, torch.float32))
    return _rms_norm.rms_norm(x, weight, eps, unit_offset, out_dtype, quant)


def add_rms_norm(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float, unit_offset: bool,
    out_dtype: torch.dtype | None = None, quant: ActivationQuant | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    if not _on_triton(x):
        return reference.add_rms_norm(x, residual, weight, eps, unit_offset, out_dtype, quant)
    if not _converts(x, quant):
        normed, summed = _rms_norm.add_rms_norm(x, residual, weight, eps, unit_offset, torch.float32)
        return quant.reference(normed), summed
    return _rms_norm.add_rms_norm(x, residual, weight, eps, unit_offset, out_dtype, quant)


def apply_rope(x: torch.Tensor, positions: torch.Tensor, theta: float, rotated: int | None = None,
               sections: tuple[int, ...] | None = None) -> torch.Tensor:
    if not _on_triton(x):
        return reference.apply_rope(x, positions, theta, rotated, sections)
    return rope.apply_rope(x, positions, theta, rotated, sections)


def tree_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    ends: torch.Tensor,
    positions: torch.Tensor,
    spans: tuple[tuple[int, int], ...],
    *,
    scale: float,
    window: int | None,
    quant: ActivationQuant | None = None,
    firsts: torch.Tensor | None = None,
) -> torch.Tensor:
    if not _on_triton(q):
        return reference.tree_attention(q, k, v, ends, positions, spans, scale=scale, window=window, quant=quant,
                                        firsts=firsts)
    if not _converts(q, quant):
        return quant.reference(_tree_attention.tree_attention(q, k, v, ends, positions, spans, scale=scale,
                                                              window=window, firsts=firsts))
    return _tree_attention.tree_attention(q, k, v, ends, positions, spans, scale=scale, window=window, quant=quant,
                                          firsts=firsts)


def decode_attention(q: torch.Tensor, *args, scale: float, window: int | None) -> torch.Tensor:
    """The extraction decode's attention (`reference.decode_attention` has the arguments)."""
    if not _on_triton(q):
        return reference.decode_attention(q, *args, scale=scale, window=window)
    return _decode_attention.decode_attention(q, *args, scale=scale, window=window)


def gated_act(gate: torch.Tensor, up: torch.Tensor, kind: str, quant: ActivationQuant | None = None) -> torch.Tensor:
    if not _on_triton(gate):
        return reference.gated_act(gate, up, kind, quant)
    if not _converts(gate, quant):
        return quant.reference(_gated_act.gated_act(gate.float(), up.float(), kind))
    return _gated_act.gated_act(gate, up, kind, quant)


def answer_logprobs(
    hidden: torch.Tensor, lm_head: torch.Tensor, read_row: torch.Tensor, read_token: torch.Tensor,
    softcap: float | None = None,
) -> torch.Tensor:
    if not _on_triton(hidden):
        return reference.answer_logprobs(hidden, lm_head, read_row, read_token, softcap)
    return answer_head.answer_logprobs(hidden, lm_head, read_row, read_token, softcap)
