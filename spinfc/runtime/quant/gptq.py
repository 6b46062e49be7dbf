"""GPTQ for the W4A16 schemes: each linear weight quantized column by column, every column's rounding error spread
over the columns not yet quantized in proportion to the inverse Hessian of the layer's inputs (Frantar et al.,
2022; the algorithm of llm-compressor's `GPTQModifier`, whose defaults are kept: blocks of 128 columns, dampening
0.01 of the mean diagonal, group scales taken when a group's first column is reached, from the columns as updated
so far).

The Hessian of a layer is X^T X over every row its input saw in one calibration run of the float32 model (layers
that read the same input share one: q/k/v, gate/up, a Gated DeltaNet layer's input projections). llm-compressor
calibrates layer by layer on the already-quantized layers before; here every layer sees the float32 model's
inputs (GPTQ's original, non-sequential form), which needs one run instead of one per layer.

On any device (`spinfc quantize --device`), the same Hessians give the same integers and scales: the steps whose
float32 result would depend on the device's reduction order (each launch's X^T X, the inverse's factorizations, the
block updates) run in float64 and are rounded to float32 once (`rounded_product`), and everything else is element by
element (exact in IEEE arithmetic on every device). What float64 leaves is a double rounding: a result that lands
within float64's error of a float32 tie rounds either way, one float32 step (a sum: about one in 10^7; the inverse,
whose float64 error grows with the dampened Hessian's condition: more), and a code can follow. The calibration forward itself is
float32 and its products round in the device's order (cuBLAS on a GPU, the CPU's BLAS on the CPU), so a GPU's layer
inputs, and with them its Hessians, differ from the CPU's by float32's rounding; GPTQ turns that into a few codes one
step apart (docs/quantization.md, "On a GPU"). float64 costs the CPU about twice the time of those products.
"""

from __future__ import annotations

import copy

import torch

from spinfc.runtime.quant.schemes import Scheme

BLOCK = 128  # columns updated together (llm-compressor's block_size)
DAMPENING = 0.01  # of the Hessian's mean diagonal (llm-compressor's dampening_frac)


def rounded_product(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a [M, J] @ b [J, N] of float32 values, in float64 and rounded once to float32 [M, N]: every product is exact
    (24 + 24 bits of 53) and the sums carry 29 bits more than float32, so the order a device sums them in shows only
    where a sum lands within float64's error of a float32 tie (about one element in 10^7, one float32 step)."""
    return (a.double() @ b.double()).float()


@torch.inference_mode()
def input_hessians(model, launches, names: dict[int, str]) -> tuple[dict[str, torch.Tensor], dict[str, float]]:
    """(X^T X [K, K] float32, max |x|) at the input of every linear weight `names` lists (id(weight) -> its
    checkpoint name) of `model` (a float stack, unfused, on any device), over its forward of every launch; the
    Hessians on the model's device. Each launch's X^T X is taken in float64 and added in float32, launch after
    launch: the sum is the same bits on every device for the same inputs (the module's docstring). Consecutive layers
    that read the same input tensor share one Hessian tensor."""
    hessians: dict[str, torch.Tensor] = {}
    maxima: dict[str, torch.Tensor] = {}  # on the device, read once at the end (a read per layer waits on the queue)
    last: list = [None, None]  # the input seen last and its Hessian
    view = copy.copy(model)  # the model's own forward, with a linear that looks at its input first

    def observed(x: torch.Tensor, weight, out_dtype: torch.dtype | None = None) -> torch.Tensor:
        name = names.get(id(weight))
        if name is not None:
            if last[0] is x:
                hessians.setdefault(name, last[1])
            else:
                rows = x.detach().reshape(-1, x.shape[-1]).float()  # [T, K]
                product = rounded_product(rows.t(), rows)  # [K, K]
                if name in hessians:
                    hessians[name].add_(product)
                else:
                    hessians[name] = product
                last[:] = [x, hessians[name]]
            seen = x.detach().abs().amax().float()
            maxima[name] = torch.maximum(maxima[name], seen) if name in maxima else seen
        return type(model).linear(view, x, weight, out_dtype)

    view.linear = observed
    view.residual_in_matmul = False  # every output projection through `linear`, so its input is seen
    for launch in launches:
        view.forward(launch)
    return hessians, {name: float(m) for name, m in maxima.items()}


def group_qparams(w: torch.Tensor, chosen: Scheme) -> tuple[torch.Tensor, torch.Tensor | None]:
    """w: [N, G] one group's columns -> (scale [N], zero point [N] or None): compressed-tensors' `calculate_qparams`
    arithmetic (the range widened to hold 0; symmetric: max |w| / 7.5; asymmetric: (max - min) / 15 and the zero
    point -8 - min / scale, clamped and rounded, 0 for an all-zero group; a zero scale becomes float32's eps), written out here because
    it runs once per group of every layer (a test checks it against compressed-tensors' own)."""
    low, high = w.amin(dim=1).clamp_max(0.0), w.amax(dim=1).clamp_min(0.0)
    span = chosen.q_max - chosen.q_min
    if chosen.symmetric:
        scale = torch.maximum(-low, high) / (span / 2)
        zero = None
    else:
        scale = (high - low) / span
        zero = (chosen.q_min - low / scale).nan_to_num(0.0).clamp(chosen.q_min, chosen.q_max).round()  # 0/0: 0
    return torch.where(scale == 0, torch.finfo(torch.float32).eps, scale), zero


def quantize_column(w: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor | None, chosen: Scheme) -> torch.Tensor:
    """w: [N] -> the integers [N] float32 in [q_min, q_max]: round(w / scale + zero), half to even."""
    shifted = w / scale if zero is None else w / scale + zero
    return shifted.round().clamp(chosen.q_min, chosen.q_max)


def gptq(weight: torch.Tensor, hessian: torch.Tensor, chosen: Scheme) -> tuple:
    """weight [N, K] float, hessian [K, K] -> (q [N, K] int8, scale [N, K / G] float32, zero [N, K / G] float32
    or None) of `chosen` (group size G dividing K and 128)."""
    G = chosen.group_size
    W = weight.float().clone()
    N, K = W.shape
    if K % G or BLOCK % G:
        raise ValueError(f"GPTQ with groups of {G}: the input width {K} must be a multiple of it, and {BLOCK} too")
    H = hessian.to(torch.float64, copy=True)  # float64 through the factorizations: the same bits on any device
    dead = H.diagonal() == 0  # input channels calibration never saw non-zero
    H[dead, dead] = 1.0
    W[:, dead] = 0.0
    H.diagonal().add_(DAMPENING * H.diagonal().mean())
    Hinv = torch.linalg.cholesky(torch.cholesky_inverse(torch.linalg.cholesky(H)), upper=True).float()  # [K, K]
    Q = torch.zeros_like(W)
    scales = torch.zeros(N, K // G, device=W.device)
    zeros = None if chosen.symmetric else torch.zeros(N, K // G, device=W.device)
    for i1 in range(0, K, BLOCK):
        i2 = min(i1 + BLOCK, K)
        W1, Hinv1 = W[:, i1:i2].clone(), Hinv[i1:i2, i1:i2]
        errors = torch.zeros_like(W1)
        for i in range(i2 - i1):
            column = i1 + i
            if column % G == 0:
                scale, zero = group_qparams(W1[:, i:i + G], chosen)
                scales[:, column // G] = scale
                if zeros is not None:
                    zeros[:, column // G] = zero
            w, d = W1[:, i], Hinv1[i, i]
            q = quantize_column(w, scale, zero, chosen)
            Q[:, column] = q
            error = (w - (q if zero is None else q - zero) * scale) / d
            W1[:, i:] -= error[:, None] * Hinv1[i, i:][None, :]
            errors[:, i] = error
        W[:, i2:] -= rounded_product(errors, Hinv[i1:i2, i2:])
    return Q.to(torch.int8), scales, zeros
