"""A forward that also writes every attention layer's keys and values into static buffers: what a pass that fills
the content cache runs, so that it can be captured in a CUDA graph like any other pass (`graphs.GraphedPass`).

    KVBuffers     per attention call (layer order) one key and one value buffer [rows, Hk, D], allocated once for the
                  largest launch, outside any graph; a launch of T rows writes and reads their first T rows (views)
    recording     the stack's forward on a shallow copy whose `tree_attention` copies its k and v into the buffers
                  before attending (the same kernels on the same inputs: the pass's scores are the plain forward's)

A graph's replay writes the buffers in stream order, so whatever reads them (the content cache's `store`, which
clones a content's rows) must be queued behind that replay and before the next one, as the engine does.
`extract.forward_keeping_kv` records the same tensors by reference, for an eager pass.
"""

from __future__ import annotations

import copy

import torch


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
        seen: list[tuple[torch.Size, torch.dtype]] = []

        class _Shapes:
            def __init__(self, ops):
                self._ops = ops

            def __getattr__(self, name):
                return getattr(self._ops, name)

            def tree_attention(self, q, k, v, *args, **kwargs):
                seen.append((k.shape, k.dtype))
                return self._ops.tree_attention(q, k, v, *args, **kwargs)

        view = copy.copy(model)
        view.ops = _Shapes(model.ops)
        view.forward(launch)
        return cls(seen, rows, launch.tokens.device)

    def views(self, T: int) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """The first T rows of every buffer: per attention call [T, Hk, D] keys and values."""
        return [k[:T] for k in self.keys], [v[:T] for v in self.values]

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (*self.keys, *self.values))


class _Into:
    """The model's ops, with a `tree_attention` that copies its k and v into the given buffers (in call order)."""

    def __init__(self, ops, keys: list[torch.Tensor], values: list[torch.Tensor]):
        self._ops, self._keys, self._values, self._call = ops, keys, values, 0

    def __getattr__(self, name: str):
        return getattr(self._ops, name)

    def tree_attention(self, q, k, v, *args, **kwargs):
        i = self._call
        self._call += 1
        self._keys[i].copy_(k)  # [T, Hk, D]
        self._values[i].copy_(v)
        return self._ops.tree_attention(q, k, v, *args, **kwargs)


def recording(model, launch, keys: list[torch.Tensor], values: list[torch.Tensor]) -> torch.Tensor:
    """`model.forward(launch)` ([N] logprobs), every attention call's k and v written into `keys` and `values`
    (`KVBuffers.views(launch.budget)`)."""
    view = copy.copy(model)
    view.ops = _Into(model.ops, keys, values)
    out = view.forward(launch)
    if view.ops._call != len(keys):
        raise RuntimeError(f"the forward made {view.ops._call} attention calls, the buffers hold {len(keys)}")
    return out
