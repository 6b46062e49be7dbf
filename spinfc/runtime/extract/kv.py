"""The keys and values of one scoring pass, kept for extraction: the pass's forward records every layer's K/V
(after rope, [T, Hk, D]), and a `KeyPool` holds them (and any floor contexts kept from earlier passes) as the keys
that decode steps attend to.

Nothing is recomputed: a decode step of an extraction question reads the rows its prompt row sees in the pass
(the content and the question's own prompt, `j <= i < ends[j]`), so the content is read once for scoring and
extraction alike.
"""

from __future__ import annotations

import contextlib
import copy

import attrs
import torch


class _Recording:
    """The model's ops, with a `tree_attention` that records its k and v (one call per layer, in layer order)."""

    def __init__(self, ops, keys: list, values: list):
        self._ops, self._keys, self._values = ops, keys, values

    def __getattr__(self, name: str):
        return getattr(self._ops, name)

    def tree_attention(self, q, k, v, *args, **kwargs):
        self._keys.append(k)  # [T, Hk, D]
        self._values.append(v)
        return self._ops.tree_attention(q, k, v, *args, **kwargs)


def stack_of(model):
    """The model stack under an engine's wrappers (`Guarded`, `GraphedModel`), and the lock its forwards hold."""
    from spinfc.runtime.models.base import Model

    lock = getattr(model, "lock", None)
    while not isinstance(model, Model) and hasattr(model, "model"):
        model = model.model
    return model, (lock if lock is not None else contextlib.nullcontext())


@torch.inference_mode()
def forward_keeping_kv(model, launch) -> tuple[torch.Tensor, list[torch.Tensor], list[torch.Tensor]]:
    """The stack's forward of `launch` (the same [N] logprobs) and every layer's keys and values ([T, Hk, D] each,
    after rope): the forward of a plain stack run on a shallow copy whose ops record them."""
    stack, lock = stack_of(model)
    keys: list[torch.Tensor] = []
    values: list[torch.Tensor] = []
    view = copy.copy(stack)
    view.ops = _Recording(stack.ops, keys, values)
    with lock:
        out = view.forward(launch)
    if len(keys) != stack.config.layers:
        raise RuntimeError(f"recorded {len(keys)} layers of keys, the model has {stack.config.layers}")
    return out, keys, values


def visible_rows(ends: torch.Tensor, row: int, start: int) -> torch.Tensor:
    """The rows of [start, row) that row `row` sees in the tree (its ancestors): j <= row < ends[j]. [L] int64."""
    j = torch.arange(start, row, dtype=torch.int64)
    return j[ends[start:row].long() > row]


@attrs.frozen
class PromptContext:
    """What a decode needs of one question's prompt on one content: the keys and values of the rows the prompt's
    last token sees (per layer [L, Hk, D]), their positions, and that last token and its position (a decode
    starts by running it again: its output is the first answer token's distribution)."""

    keys: tuple[torch.Tensor, ...]
    values: tuple[torch.Tensor, ...]
    positions: torch.Tensor  # [L] int64
    token: int
    position: int

    @property
    def length(self) -> int:
        return int(self.positions.shape[0])


def gather_context(keys, values, tokens, positions, ends, row: int, start: int) -> PromptContext:
    """The `PromptContext` of the prompt row `row` of a pass whose span begins at `start` (copies: the pass's
    tensors can be freed)."""
    rows = visible_rows(ends, row, start)
    return PromptContext(
        keys=tuple(k[rows.to(k.device)].clone() for k in keys),
        values=tuple(v[rows.to(v.device)].clone() for v in values),
        positions=positions[rows].clone(),
        token=int(tokens[row]),
        position=int(positions[row]),
    )


class KeyPool:
    """Keys and values that decode beams attend to, per layer [P, Hk, D], with each row's position [P]: the rows
    of a pass, then any number of `PromptContext`s appended after them. A beam names the pool rows it sees."""

    def __init__(self, keys, values, positions: torch.Tensor):
        self.keys, self.values = list(keys), list(values)
        self.positions = positions.to(self.keys[0].device) if self.keys else positions

    @property
    def size(self) -> int:
        return int(self.positions.shape[0])

    def append(self, context: PromptContext) -> torch.Tensor:
        """Add a context's rows; returns their indices in the pool ([L] int64)."""
        first = self.size
        self.keys = [torch.cat((k, c.to(k.device))) for k, c in zip(self.keys, context.keys)]
        self.values = [torch.cat((v, c.to(v.device))) for v, c in zip(self.values, context.values)]
        self.positions = torch.cat((self.positions, context.positions.to(self.positions.device)))
        return torch.arange(first, self.size, dtype=torch.int64)
