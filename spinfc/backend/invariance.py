"""Row invariance of a CUDA server's products, checked before it reports ready: each linear layer of the first
layer at every launch size's row count, the last layer's (which run on the answer rows) and the LM head at every
size's answer rows. A product is row invariant when a row's result depends on that row alone: the same when the
other rows change, and the same at every row count a pass may launch with (a content's scores must not depend on
what is packed beside it, nor on the launch size its pass took). cuBLAS picks its kernel per shape, and a split-K
kernel breaks this; a library update can change the choice, so it is checked on every start rather than assumed."""

from __future__ import annotations

from collections.abc import Sequence

import torch


class NotRowInvariant(RuntimeError):
    """A GEMM of the launch shape whose rows depend on each other: scores would depend on what is packed."""


def _products(model):
    """(label, weight, which count, the activation's dtype, how the forward runs it) of every product a pass runs:
    'rows' products see the pass's rows, 'answer' products its answer rows. The output projections (o, down) run
    through `Model.project` where the family adds them into the residual stream (a GEMM that adds into it), the
    rest through `Model.linear`; at the answer rows the activations are in the head's dtype (float32 under the
    mixed policy: split products), except o's, the attention's output in the compute dtype."""
    first, last = model.layers[0], model.layers[-1]
    compute, head = model.dtype, model.precision.head
    names = ("qkv", "o", "gate_up", "down") if "qkv" in first else ("q", "k", "v", "o", "gate", "up", "down")
    # Qwen3.5: its first layer is a Gated DeltaNet layer (fused in-projections `in_all`), later ones attention
    names = tuple(dict.fromkeys((*names, "gate_up", "in_all")))

    def run(name: str, weight, out_dtype=None):
        if name in ("o", "down") and getattr(model, "PROJECTS_INTO_RESIDUAL", False):
            return lambda a: _projected(model, a, weight)
        return lambda a: model.linear(a, weight, out_dtype)

    # every distinct product of the layers (one per name and shape: the first layer's where all layers are alike;
    # Gemma 4's differ by layer kind and add PLE, router and expert products), the last layer's answer-row ones apart
    products, seen = [], set()
    for index, layer in enumerate(model.layers):
        for name in names + _EXTRA_ROW_PRODUCTS:
            weight = layer.get(name)
            if weight is None or (index == len(model.layers) - 1 and name in ("o", "gate_up", "down", "gate", "up")):
                continue
            if name.startswith("experts_"):
                weight = weight[0]  # one expert stands for all (same shapes): the dense path runs each on every row
            if (name, tuple(weight.shape)) not in seen:
                seen.add((name, tuple(weight.shape)))
                products.append((f"layer {index} {name}", weight, "rows", compute, run(name, weight)))
    products += [(f"last layer {name}", last[name], "answer", compute if name == "o" else head,
                  run(name, last[name], head)) for name in ("o", "gate_up", "down") if name in last]
    lm_head = getattr(model, "lm_head", None)
    if lm_head is not None:
        products.append(("LM head", lm_head, "answer", head, lambda a: _head(a, lm_head)))
    return products


# Products some families' layers have beyond attention and the MLP (Gemma 4: per-layer inputs, the MoE block).
_EXTRA_ROW_PRODUCTS = ("ple_gate", "ple_projection", "router", "experts_gate_up", "experts_down")


def _projected(model, a: torch.Tensor, weight) -> torch.Tensor:
    """a @ weight^T as `Model.project` hands it on, added into a zero residual stream of the model's dtype for it."""
    residual = torch.zeros(a.shape[0], weight.shape[0], dtype=model.precision.residual, device=a.device)
    x, summed = model.project(a, weight, residual)
    return summed if x is None else x


def _head(hidden: torch.Tensor, lm_head: torch.Tensor) -> torch.Tensor:
    from spinfc.backend.kernels.answer_head import _logits

    return _logits(hidden, lm_head)


@torch.inference_mode()
def invariant_sizes(model, sizes: Sequence[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """The launch sizes (rows, answer rows, reads; ascending, the full pass last) whose every product is row
    invariant, within the size and against the full pass. Raises NotRowInvariant, naming the product and shape, if
    the full pass is not."""
    full_rows, full_answer, _ = sizes[-1]
    g = torch.Generator(device=model.device).manual_seed(0)
    failed: dict[tuple, str] = {}
    for label, weight, count, dtype, run in _products(model):
        K = weight.shape[1]
        M = full_rows if count == "rows" else full_answer
        x = torch.randn(M, K, generator=g, device=model.device).to(dtype)
        full = run(x)
        for size in sizes:
            m = size[0] if count == "rows" else size[1]
            kept = torch.tensor([0, m // 2, m - 1], device=model.device)
            other = torch.randn(m, K, generator=g, device=model.device).to(dtype)
            other[kept] = x[kept]
            if not (torch.equal(run(other)[kept], full[kept]) and torch.equal(run(x[:m])[kept], full[kept])):
                failed.setdefault(size, f"the {label} product ({m} x {K} x {weight.shape[0]}, "
                                        f"{getattr(model, 'scheme', model.dtype)})")
    if sizes[-1] in failed:
        raise NotRowInvariant(
            f"{failed[sizes[-1]]} is not row invariant on this GPU and library: a score would depend on the other "
            "contents of its pass. Try another --token-budget (a multiple of 128, at least 4096) or another --dtype, "
            "and report the torch and CUDA versions")
    return [size for size in sizes if size not in failed]


def check_row_invariance(model, rows: int, answer_rows: int) -> None:
    """Raise NotRowInvariant naming the product where a launch of `rows` rows (and `answer_rows` answer rows) is not
    row invariant: `invariant_sizes` of that one size (the extraction decode's fixed launch)."""
    invariant_sizes(model, [(rows, answer_rows, rows)])
