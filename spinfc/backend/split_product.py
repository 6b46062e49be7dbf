"""Products of float32 activations with half-precision weights, written in float32: the head's products under the
mixed precision policy (the LM head, and the last layer's o/gate/up/down at the answer rows).

A float32 activation x is split into two halves in the weights' dtype, hi = half(x) and lo = half(x - hi), and
both are multiplied by the weights in one GEMM of twice the rows, with float32 accumulation and output; the two
halves of the result are added. Every product of a half value by a half weight is exact in float32, so the result
is exact in the weights' values and keeps about 22 bits of the activation (fp16: 11 + 11; bf16: 8 + 8), where a
single half product keeps 11 (or 8). Measured on an H200 for the Llama-3-8B LM head at 672 answer rows: 2.2 ms,
against 14.2 ms for the float32 GEMM, at a max |error| of 3.3e-5 against 1.6e-5 (float32) and 1.2e-3 (one fp16
product).

A row's result is that row's alone: hi and lo of row i sit in rows i and M + i of one GEMM, whose rows do not mix;
the start-up check (`backend.invariance`) runs these products at every launch size's row counts.

On CUDA the half GEMM writes float32 (`torch.mm(..., out_dtype=torch.float32)`, torch >= 2.9); on the CPU, which has
no such kernel, the same halves are multiplied as float32 tensors (the same exact products, float32 sums).
"""

from __future__ import annotations

import logging

import torch

log = logging.getLogger("spinfc.kernels")

HALVES = (torch.float16, torch.bfloat16)
# per (CUDA device, "mm" or "addmm"): whether torch takes out_dtype there (torch >= 2.9 for mm; addmm into a float32
# residual needs a later torch than mm does)
_FLOAT32_OUT: dict[tuple[torch.device, str], bool] = {}


def float32_outputs() -> dict[str, bool]:
    """Which of torch's half GEMMs that write float32 ("mm", "addmm" into a float32 residual) this process found
    on each CUDA device it ran them on (False: the slower fallback ran), for benchmarks to report."""
    return {f"{device} {op}": found for (device, op), found in _FLOAT32_OUT.items()}


def is_split(x: torch.Tensor, weight: torch.Tensor) -> bool:
    """Whether x @ weight^T is a split product: a float32 activation against half-precision weights."""
    return x.dtype == torch.float32 and weight.dtype in HALVES


def halves(x: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """x: [M, K] float32 -> (hi, lo) [M, K] each in `dtype`, hi + lo = x to about twice dtype's precision."""
    hi = x.to(dtype)
    return hi, (x - hi.float()).to(dtype)


def mm_float32(a: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """a: [M, K], weight: [N, K], both in one half dtype -> a @ weight^T [M, N] float32: the exact products summed
    in float32 (never rounded to the half dtype). On a CUDA torch without `out_dtype` (before 2.9) the product is
    written in the half dtype and widened (logged once): a float32 GEMM there would copy the weight to float32 at
    every call."""
    key = (a.device, "mm")
    if not a.is_cuda:
        return torch.matmul(a.float(), weight.float().t())
    if _FLOAT32_OUT.get(key, True):
        try:
            out = torch.mm(a, weight.t(), out_dtype=torch.float32)
            _FLOAT32_OUT[key] = True
            return out
        except torch.OutOfMemoryError:
            raise
        except (TypeError, RuntimeError, NotImplementedError):  # torch < 2.9: no out_dtype
            _FLOAT32_OUT[key] = False
            log.warning("this torch cannot write a %s GEMM in float32 on %s: the head's products are rounded to %s "
                        "(torch >= 2.9 keeps them in float32)", a.dtype, a.device, a.dtype)
    return torch.matmul(a, weight.t()).float()


def split_mm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """x: [M, K] float32 (or already in the weights' dtype), weight: [N, K] half -> x @ weight^T [M, N] float32,
    x split in two halves (see the module's docstring); an x already in the weights' dtype is one product."""
    if x.dtype == weight.dtype:
        return mm_float32(x, weight)
    M = x.shape[0]
    both = mm_float32(torch.cat(halves(x.float(), weight.dtype)), weight)  # [2M, N]: hi's rows, then lo's
    return both[:M] + both[M:]


def add_product(residual: torch.Tensor, a: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """residual [M, N] float32 += a @ weight^T, in place; weight [N, K] half, a [M, K] in its dtype (one GEMM that
    adds into the residual: cuBLAS's beta = 1, the sum rounded once from float32) or float32 (a split product, then
    added). Returns `residual`."""
    if a.dtype != weight.dtype:
        return residual.add_(split_mm(a, weight))
    key = (a.device, "addmm")
    if a.is_cuda:
        if _FLOAT32_OUT.get(key, True):
            try:
                out = torch.addmm(residual, a, weight.t(), out_dtype=torch.float32, out=residual)
                _FLOAT32_OUT[key] = True
                return out
            except torch.OutOfMemoryError:
                raise
            except (TypeError, RuntimeError, NotImplementedError):
                _FLOAT32_OUT[key] = False
        return residual.add_(mm_float32(a, weight))
    return residual.addmm_(a.float(), weight.float().t())


def head_logits(hidden: torch.Tensor, lm_head: torch.Tensor) -> torch.Tensor:
    """hidden: [R, D], lm_head: [V, D] -> [R, V] float32 logits: a split product where hidden is float32 and the
    LM head half (the mixed policy), else the matmul in the head's dtype (hidden cast to it), then float32."""
    if is_split(hidden, lm_head):
        return split_mm(hidden, lm_head)
    return torch.matmul(hidden.to(lm_head.dtype), lm_head.t()).float()
