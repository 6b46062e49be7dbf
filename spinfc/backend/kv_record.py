"""A forward that also writes every attention layer's keys and values into static buffers: what a pass that fills
the content cache runs, so that it can be captured in a CUDA graph like any other pass (`graphs.GraphedPass`).

    KVBuffers     per attention call (layer order) one key and one value buffer [rows, Hk, D], allocated once for the
                  largest launch, outside any graph; a launch of T rows writes and reads their first T rows (views)
    recording     the stack's forward with a context that copies each attention layer's k and v into the buffers
                  before attending (`ForwardContext.keep`: the same kernels on the same inputs, so the pass's scores
                  are the plain forward's)

A graph's replay writes the buffers in stream order, so whatever reads them (the content cache's `store`, which
clones a content's rows) must be queued behind that replay and before the next one, as the engine does.
`extract.forward_keeping_kv` records the same tensors by reference, for an eager pass.
"""

from __future__ import annotations

import torch

from spinfc.backend.forward_context import ForwardContext


class KVBuffers:
    """Static key and value buffers, one pair per attention call of a forward, of `rows` rows each."""

    def __init__(self, shapes: list[tuple[torch.Size, torch.dtype]], rows: int, device) -> None:
        """`shapes`: per attention call the (shape [T, Hk, D], dtype) of the keys a forward handed it."""
        self.rows = rows
        self.keys = [torch.empty((rows, *shape[1:]), dtype=dtype, device=device) for shape, dtype in shapes]
        self.values = [torch.empty((rows, *shape[1:]), dtype=dtype, device=device) for shape, dtype in shapes]

    @classmethod
    def for_model(cls, model, launch, rows: int) -> "KVBuffers":
        """Buffers of `rows` rows for `model` (a stack), shaped by one eager forward of `launch` (any launch)."""
        seen: dict[int, tuple[torch.Size, torch.dtype]] = {}

        def shape_of(slot: int, k: torch.Tensor, v: torch.Tensor) -> None:
            seen[slot] = (k.shape, k.dtype)

        model.forward(launch, ForwardContext(launch, keep=shape_of))
        return cls([seen[slot] for slot in sorted(seen)], rows, launch.tokens.device)

    def views(self, T: int) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """The first T rows of every buffer: per attention call [T, Hk, D] keys and values."""
        return [k[:T] for k in self.keys], [v[:T] for v in self.values]

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (*self.keys, *self.values))


def recording(model, launch, keys: list[torch.Tensor], values: list[torch.Tensor]) -> torch.Tensor:
    """`model.forward(launch)` ([N] logprobs), every attention layer's k and v written into `keys` and `values`
    (`KVBuffers.views(launch.budget)`), in slot order (`Model.attention_slots`)."""
    if model.attention_layers != len(keys):
        raise RuntimeError(f"the model has {model.attention_layers} attention layers, the buffers hold {len(keys)}")

    def into(slot: int, k: torch.Tensor, v: torch.Tensor) -> None:
        keys[slot].copy_(k)  # [T, Hk, D]
        values[slot].copy_(v)

    return model.forward(launch, ForwardContext(launch, keep=into))
