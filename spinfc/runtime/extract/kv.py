"""The keys and values of one scoring pass, kept for extraction: the pass's forward records every layer's K/V
(after rope, [T, Hk, D]), and a `KeyPool` holds them (and any floor contexts kept from earlier passes) as the keys
that decode steps attend to; on CUDA it copies them into fixed buffers (`PoolStorage`, kept from pass to pass) so
that a decode step captured in a CUDA graph finds them at the same addresses.

Nothing is recomputed: a decode step of an extraction question reads the rows its prompt row sees in the pass
(the content and the question's own prompt, `j <= i < ends[j]`), so the content is read once for scoring and
extraction alike.
"""

from __future__ import annotations

import contextlib

import attrs
import torch

from spinfc.backend.forward_context import ForwardContext
from spinfc.runtime.models.base import Model
from spinfc.runtime.models.families import family_of


def stack_of(model):
    """The model stack under an engine's wrappers (`Guarded`, `GraphedModel`), and the lock its forwards hold."""
    lock = getattr(model, "lock", None)
    while not isinstance(model, Model) and hasattr(model, "model"):
        model = model.model
    return model, (lock if lock is not None else contextlib.nullcontext())


def is_recurrent(model) -> bool:
    """Whether the model's stack has recurrent (linear-attention) layers: its family says (`FamilySpec.recurrent`)."""
    stack, _ = stack_of(model)
    family = getattr(stack.config, "family", None)  # (a stand-in's config may name none: not recurrent)
    return family is not None and family_of(family).spec.recurrent


@torch.inference_mode()
def forward_keeping_kv(model, launch, state_rows=(), states: dict | None = None
                       ) -> tuple[torch.Tensor, list[torch.Tensor], list[torch.Tensor]]:
    """The stack's forward of `launch` (the same [N] logprobs) and every attention layer's keys and values
    ([T, Hk, D] each, after rope), kept by reference as the forward's attention reads them. A recurrent stack
    (Qwen3.5) also fills `states`, per recurrent layer, with its states just before each row of `state_rows` (the
    extraction prompts' last rows): {layer: {parent row: (conv, state)}} (state_flow.TreeFlow)."""
    stack, lock = stack_of(model)
    keys: list[torch.Tensor | None] = [None] * stack.attention_layers
    values: list[torch.Tensor | None] = [None] * stack.attention_layers

    def keep(slot: int, k: torch.Tensor, v: torch.Tensor) -> None:
        keys[slot], values[slot] = k, v  # [T, Hk, D]

    context = ForwardContext(launch, keep=keep, state_rows=tuple(state_rows), states={} if states is None else states)
    with lock:
        out = stack.forward(launch, context)
    if any(k is None for k in keys):
        raise RuntimeError(f"recorded {sum(k is not None for k in keys)} layers of keys, the model has {len(keys)}")
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
    # a recurrent stack's states after the context's last row, per recurrent layer: {layer: (conv, state)}
    states: dict | None = None

    @property
    def length(self) -> int:
        return int(self.positions.shape[0])


def gather_context(keys, values, tokens, positions, ends, row: int, start: int, states: dict | None = None
                   ) -> PromptContext:
    """The `PromptContext` of the prompt row `row` of a pass whose span begins at `start` (copies: the pass's
    tensors can be freed); `states` (the pass's recurrent states by row, `PassKV.states`) gives it the states at
    its last row."""
    rows = visible_rows(ends, row, start)
    last = int(rows[-1]) if rows.numel() else None
    return PromptContext(
        keys=tuple(k[rows.to(k.device)].clone() for k in keys),
        values=tuple(v[rows.to(v.device)].clone() for v in values),
        positions=positions[rows].clone(),
        token=int(tokens[row]),
        position=int(positions[row]),
        states=None if states is None or last is None else states_at(states, last),
    )


def states_at(states: dict, row: int) -> dict:
    """{layer: (conv, state)} at pass row `row` of a pass's {layer: {row: (conv, state)}}."""
    try:
        return {layer: by_row[row] for layer, by_row in states.items()}
    except KeyError:
        raise ValueError(f"the pass kept no recurrent state at row {row}: an extraction prompt's state is kept "
                         "only where the engine asked for it (forward_keeping_kv's state_rows)") from None


def kv_shapes(config) -> tuple[tuple[int, int], ...]:
    """Per layer, (kv heads, head dim) of its keys and values (`ModelConfig.kv_shape`: Gemma 4's differ by layer)."""
    return tuple(config.kv_shape(layer) for layer in range(config.layers))


class PoolStorage:
    """Fixed buffers a `KeyPool` lives in on CUDA (per layer [capacity, Hk, D], positions [capacity]), kept from
    pass to pass so that a captured decode step reads them at the same addresses. `version` changes when the
    buffers are replaced by larger ones (a captured step over the old ones must be captured again)."""

    def __init__(self, shapes: tuple[tuple[int, int], ...], dtype: torch.dtype, device, capacity: int):
        """`shapes`: per layer (kv heads, head dim) (`kv_shapes`)."""
        self.shapes, self.dtype, self.device = tuple(shapes), dtype, device
        self.version = 0
        self._allocate(capacity)

    def _allocate(self, capacity: int) -> None:
        self.keys = [torch.zeros((capacity, *shape), dtype=self.dtype, device=self.device) for shape in self.shapes]
        self.values = [torch.zeros((capacity, *shape), dtype=self.dtype, device=self.device) for shape in self.shapes]
        self.positions = torch.zeros(capacity, dtype=torch.int64, device=self.device)
        self.capacity = capacity
        self.version += 1

    def ensure(self, rows: int, keep: int) -> None:
        """Room for `rows` rows, the first `keep` of them kept (grows by half again, at least to `rows`)."""
        if rows <= self.capacity:
            return
        old = (self.keys, self.values, self.positions)
        self._allocate(max(rows, self.capacity * 3 // 2))
        for new, kept in zip(self.keys + self.values + [self.positions], old[0] + old[1] + [old[2]]):
            new[:keep].copy_(kept[:keep])

    def fits(self, shapes: tuple[tuple[int, int], ...], dtype: torch.dtype) -> bool:
        return (tuple(shapes), dtype) == (self.shapes, self.dtype)


class KeyPool:
    """Keys and values that decode beams attend to, per layer [P, Hk, D], with each row's position [P]: the rows
    of a pass, then any number of `PromptContext`s appended after them (each once). A beam names the pool rows it
    sees. With a `PoolStorage` (CUDA) the rows are copied into its fixed buffers, whose rows past `size` are not
    read; without one, the pool is the pass's own tensors, grown by concatenation."""

    def __init__(self, keys, values, positions: torch.Tensor, storage: PoolStorage | None = None):
        self._storage = storage
        self._size = int(positions.shape[0])
        self._appended: dict[int, torch.Tensor] = {}
        # a recurrent stack's states by pool row ({row: {layer: (conv, state)}}): where a decode's table starts
        self.states: dict[int, dict] = {}
        if storage is None:
            self._keys, self._values = list(keys), list(values)
            self._positions = positions.to(self._keys[0].device) if self._keys else positions
            return
        storage.ensure(self._size, 0)
        for target, source in zip(storage.keys + storage.values, list(keys) + list(values)):
            target[:self._size].copy_(source)
        storage.positions[:self._size].copy_(positions)

    @property
    def keys(self) -> list[torch.Tensor]:
        return self._storage.keys if self._storage is not None else self._keys

    @property
    def values(self) -> list[torch.Tensor]:
        return self._storage.values if self._storage is not None else self._values

    @property
    def positions(self) -> torch.Tensor:
        return self._storage.positions if self._storage is not None else self._positions

    @property
    def size(self) -> int:
        """Rows in use (a storage's buffers may hold more)."""
        return self._size

    @property
    def version(self) -> tuple:
        """Changes when the pool's tensors move (a captured step reads them by address)."""
        return (id(self._storage), self._storage.version) if self._storage is not None else (id(self), self._size)

    def append(self, context: PromptContext) -> torch.Tensor:
        """Add a context's rows (once: the same context again returns the same rows); returns their indices in
        the pool ([L] int64)."""
        if id(context) in self._appended:
            return self._appended[id(context)]
        first, rows = self._size, context.length
        if self._storage is not None:
            self._storage.ensure(first + rows, first)
            for target, source in zip(self._storage.keys + self._storage.values, context.keys + context.values):
                target[first:first + rows].copy_(source)
            self._storage.positions[first:first + rows].copy_(context.positions)
        else:
            self._keys = [torch.cat((k, c.to(k.device))) for k, c in zip(self._keys, context.keys)]
            self._values = [torch.cat((v, c.to(v.device))) for v, c in zip(self._values, context.values)]
            self._positions = torch.cat((self._positions, context.positions.to(self._positions.device)))
        self._size = first + rows
        if context.states is not None and rows:
            self.states[self._size - 1] = context.states
        self._appended[id(context)] = torch.arange(first, self._size, dtype=torch.int64)
        return self._appended[id(context)]
