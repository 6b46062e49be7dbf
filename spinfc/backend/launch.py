"""A `Launch`: one pass as tensors, the contract between the backend (which builds it) and the model stacks.

Rows are the pass's token budget T; answer rows are gathered before the LM head, so a stack computes logits for
`rows` only, and returns one log-probability per read: log p(read_token | everything row read_row[k] sees).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from spinfc.ir.nodes import PassLayout


@dataclass(frozen=True)
class Launch:
    tokens: torch.Tensor  # [T] int64 token ids
    positions: torch.Tensor  # [T] int64 position of each row in its own sequence (M-RoPE media: its t, below)
    ends: torch.Tensor  # [T] int32; query i sees key j iff j <= i < ends[j]
    spans: tuple[tuple[int, int], ...]  # [start, stop) of each content with its tree; the mask never crosses one
    rows: torch.Tensor  # [R] int64 answer rows (distinct), padded with row 0 where R is fixed
    read_row: torch.Tensor  # [N] int64 index into `rows`
    read_token: torch.Tensor  # [N] int64 the token scored
    # where the tensors are views of one byte buffer laid out by `packed` (its leading `packed_bytes`): that buffer,
    # which one copy moves (the runner's pinned staging buffers, a CUDA graph's static inputs)
    block: torch.Tensor | None = None
    # where some contents' keys and values come from the content cache: `runtime.cached_rows.CachedRows`, which
    # `Model.hidden` runs the pass through (None: every row is computed)
    cached: object | None = None
    # a pass holding media: the rows whose embeddings are the towers' (`MediaRows`), and `firsts` [T] int32, the
    # first row that sees each key (j, or the start of the key's image block, whose rows see each other both
    # ways): query i sees key j iff firsts[j] <= i < ends[j]. None for text only (firsts[j] = j).
    media: "MediaRows | None" = None
    firsts: torch.Tensor | None = None
    # a pass holding media whose rope turns by three positions (M-RoPE: Qwen3.5's images): every row's (t, h, w),
    # [3, T] int64 (a text row's three equal to its position). None: plain rope at `positions`, as every text pass.
    rope_positions: torch.Tensor | None = None
    # a launch moved to the device: the launch it was moved from, in host memory, whose tensors host-side planning
    # (a recurrent stack's chains) reads without waiting for the device (None: a launch made where it runs)
    host: "Launch | None" = None

    @property
    def budget(self) -> int:
        return int(self.tokens.shape[0])

    def to(self, device: torch.device | str) -> "Launch":
        if self.cached is not None:
            return dataclasses.replace(dataclasses.replace(self, cached=None).to(device),
                                       cached=self.cached.to(device))
        host = self.host or (self if self.tokens.device.type == "cpu" else None)
        if self.block is not None:  # one copy, then the same views of the copy
            T, R, N = self.budget, int(self.rows.shape[0]), int(self.read_row.shape[0])
            moved = packed(self.block.to(device, non_blocking=True), T, R, N, self.spans)
        else:
            move = lambda t: t.to(device, non_blocking=True)  # noqa: E731
            moved = Launch(move(self.tokens), move(self.positions), move(self.ends), self.spans, move(self.rows),
                           move(self.read_row), move(self.read_token))
        return dataclasses.replace(moved._with_media_of(self, device), host=host)

    def _with_media_of(self, other: "Launch", device) -> "Launch":
        if other.media is None and other.firsts is None and other.rope_positions is None:
            return self
        move = lambda t: None if t is None else t.to(device, non_blocking=True)  # noqa: E731
        media = other.media and MediaRows(move(other.media.rows), other.media.reads)
        return dataclasses.replace(self, media=media, firsts=move(other.firsts),
                                   rope_positions=move(other.rope_positions))


@dataclass(frozen=True)
class MediaRows:
    """The rows of a pass that take the towers' embeddings instead of their tokens' (a content's images, audio,
    video frames), and the tower inputs: the embeddings of `reads` (`towers.MediaRead`, in row order),
    concatenated, are the rows' [M, D]."""

    rows: torch.Tensor  # [M] int64
    reads: tuple
    # the embeddings already at their rows, as a captured pass takes them (backend/graphs.py `MediaInputs`):
    # `placed` [T, D] in the stack's dtype, `mask` [T] bool (True at `rows`); None: the towers run in the forward
    placed: torch.Tensor | None = None
    mask: torch.Tensor | None = None


# `packed`'s layout: the int64 fields first (so each starts 8-byte aligned), then `ends`
_PACKED = (("tokens", torch.int64, 0), ("positions", torch.int64, 0), ("rows", torch.int64, 1),
           ("read_row", torch.int64, 2), ("read_token", torch.int64, 2), ("ends", torch.int32, 0))


def packed_bytes(T: int, R: int, N: int) -> int:
    """The bytes of a packed launch of T rows, R answer rows and N reads."""
    return sum((T, R, N)[count] * dtype.itemsize for _, dtype, count in _PACKED)


def packed(block: torch.Tensor, T: int, R: int, N: int, spans: tuple = ()) -> Launch:
    """A launch of shape (T, R, N) whose tensors are views of the byte buffer `block` (uint8, at least
    `packed_bytes(T, R, N)` long), in one layout for every buffer of the shape: copying the leading bytes of one
    such buffer into another moves a whole pass's inputs at once."""
    views, offset = {}, 0
    for name, dtype, count in _PACKED:
        size = (T, R, N)[count] * dtype.itemsize
        views[name] = block[offset:offset + size].view(dtype)
        offset += size
    return Launch(spans=spans, block=block[:offset], **views)


def lower(layout: PassLayout, rows_padded_to: int | None = None, reads_padded_to: int | None = None) -> Launch:
    """Turn one pass layout into tensors. With `rows_padded_to`/`reads_padded_to` the answer tensors get a
    fixed length (padding reads score token 0 at row 0 and are dropped by the caller). A layout's content rows
    (a program that reads its contents) are answer rows too (`Model.hidden` returns their hidden states)."""
    rows = sorted({read.row for read in layout.reads} | {c.row for c in layout.content_rows})
    index = {row: i for i, row in enumerate(rows)}
    read_row = [index[read.row] for read in layout.reads]
    read_token = [read.token for read in layout.reads]
    if rows_padded_to is not None:
        if len(rows) > rows_padded_to:
            raise ValueError(f"pass {layout.index} has {len(rows)} answer rows, more than the fixed {rows_padded_to}")
        rows += [0] * (rows_padded_to - len(rows))
    if reads_padded_to is not None:
        if len(read_row) > reads_padded_to:
            raise ValueError(f"pass {layout.index} has {len(read_row)} reads, more than the fixed {reads_padded_to}")
        pad = reads_padded_to - len(read_row)
        read_row += [0] * pad
        read_token += [0] * pad
    return Launch(
        tokens=torch.tensor(layout.tokens, dtype=torch.int64),
        positions=torch.tensor(layout.positions, dtype=torch.int64),
        ends=torch.tensor(layout.ends, dtype=torch.int32),
        spans=layout.spans,
        rows=torch.tensor(rows, dtype=torch.int64),
        read_row=torch.tensor(read_row, dtype=torch.int64),
        read_token=torch.tensor(read_token, dtype=torch.int64),
    )
