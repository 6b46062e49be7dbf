"""`check_row_invariance`: before a CUDA server reports ready, each linear layer of the first layer (and the last
layer's, which run on the answer rows) is run at the launch's row count, twice, with every row but three changed
in between: those three rows must come out bit-identical. cuBLAS picks its kernel per shape, and a split-K kernel
would make a row's result depend on the other rows; a library update can change the choice, so it is checked on
every start rather than assumed."""

from __future__ import annotations

import torch


class NotRowInvariant(RuntimeError):
    """A GEMM of the launch shape whose rows depend on each other: scores would depend on what is packed."""


@torch.inference_mode()
def check_row_invariance(model, rows: int, answer_rows: int) -> None:
    """Raise NotRowInvariant naming the layer and shape where a row changed when the other rows changed."""
    first, last = model.layers[0], model.layers[-1]
    names = ("qkv", "o", "gate_up", "down") if "qkv" in first else ("q", "k", "v", "o", "gate", "up", "down")
    checks = [(f"layer 0 {name}", first[name], rows) for name in names]
    checks += [(f"last layer {name}", last[name], answer_rows) for name in ("o", "gate_up", "down") if name in last]
    g = torch.Generator(device=model.device).manual_seed(0)
    for label, weight, M in checks:
        K = weight.shape[1]
        x = torch.randn(M, K, generator=g, device=model.device).to(model.dtype)
        kept = torch.tensor([0, M // 2, M - 1], device=model.device)
        other = torch.randn(M, K, generator=g, device=model.device).to(model.dtype)
        other[kept] = x[kept]
        if not torch.equal(model.linear(x, weight)[kept], model.linear(other, weight)[kept]):
            raise NotRowInvariant(
                f"the {label} product ({M} x {K} x {weight.shape[0]}, {model.scheme}) is not row invariant on this "
                "GPU and library: a score would depend on the other contents of its pass. Try another --token-budget "
                "(a multiple of 128, at least 512) or another --dtype, and report the torch and CUDA versions")
