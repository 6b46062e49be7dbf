"""A segment's rows as arrays, made once on the compile thread (what the runner's staging copies): `TreeArrays` for a
question tree (shared by every segment that places it), `SegmentArrays` for a content with its tree: token ids,
positions (one a row; and with M-RoPE media, every row's three), the tree mask's `ends`, the answer rows and reads,
and a content's media."""

from __future__ import annotations

import attrs
import numpy as np

from spinfc.ir.nodes import Segment, TreeRows


@attrs.frozen(eq=False)
class TreeArrays:
    """A question tree's rows (`TreeRows`) as arrays, counted from the tree's first row: made once per tree, shared
    (read-only) by the arrays of every segment that places it."""

    tokens: np.ndarray  # [t] int64
    depths: np.ndarray  # [t] int64
    ends: np.ndarray  # [t] int32
    answer_rows: np.ndarray  # [r] int64 distinct rows holding a read, ascending
    read_row: np.ndarray  # [n] int64 index into answer_rows, one per read in row order
    read_token: np.ndarray  # [n] int64

    @classmethod
    def of(cls, tree: TreeRows) -> "TreeArrays":
        rows = np.fromiter((k for k, _ in tree.reads), np.int64, len(tree.reads))
        answer_rows, read_row = np.unique(rows, return_inverse=True)
        arrays = cls(tokens=np.asarray(tree.tokens, np.int64).reshape(-1),
                     depths=np.asarray(tree.depths, np.int64).reshape(-1),
                     ends=np.asarray(tree.ends, np.int32).reshape(-1), answer_rows=answer_rows.astype(np.int64),
                     read_row=read_row.astype(np.int64).reshape(-1),
                     read_token=np.fromiter((r.token for _, r in tree.reads), np.int64, len(tree.reads)))
        for array in attrs.astuple(arrays, recurse=False):
            array.flags.writeable = False
        return arrays


@attrs.frozen(eq=False)
class SegmentArrays:
    """A segment's rows as arrays, made once on the compile thread: what staging copies."""

    tokens: np.ndarray  # [L] int64
    positions: np.ndarray  # [L] int64
    ends: np.ndarray  # [L] int32, from 0
    answer_rows: np.ndarray  # [r] int64 distinct answer rows, ascending
    read_row: np.ndarray  # [n] int64 index into answer_rows, one per read in the segment's read order
    read_token: np.ndarray  # [n] int64
    # a content with media: (row of the first placeholder, towers.MediaRead) per piece, and `firsts` [L] int32 from
    # 0 (the first row that sees each key: its image block's start inside a block, else the key itself)
    media: tuple = ()
    firsts: np.ndarray | None = None
    # a content whose media turn rope by three positions (M-RoPE, Qwen3.5's images): every row's (t, h, w), [3, L]
    # (`positions` is then their t: a text row's one position, all three being equal)
    rope_positions: np.ndarray | None = None

    @classmethod
    def of(cls, segment: Segment, tree: TreeArrays | None = None) -> "SegmentArrays":
        """`tree`: `TreeArrays.of(segment.tree)`, made once for every segment of a tree (made here when not given).
        Each question row's position is its depth after the content's last position (the content's length, or
        with M-RoPE media the position its text continues from)."""
        tree = TreeArrays.of(segment.tree) if tree is None else tree
        length = len(segment.content_tokens)
        content = _rope_positions(segment)
        if content is None:
            positions, rope = np.concatenate((np.arange(length, dtype=np.int64), tree.depths + length)), None
        else:
            content, after = content
            rope = np.concatenate((content, np.broadcast_to(tree.depths + after, (3, len(tree.depths)))), axis=1)
            positions = rope[0].copy()
        return cls(
            tokens=np.concatenate((np.asarray(segment.content_tokens, np.int64).reshape(-1), tree.tokens)),
            positions=positions,
            ends=np.concatenate((np.full(length, segment.length, np.int32), tree.ends + np.int32(length))),
            answer_rows=tree.answer_rows + length, read_row=tree.read_row, read_token=tree.read_token,
            media=tuple((piece.start, piece.read) for piece in segment.media), firsts=_firsts(segment),
            rope_positions=rope,
        )


def _rope_positions(segment: Segment) -> tuple[np.ndarray, int] | None:
    """The (t, h, w) positions [3, length] of a content whose media have them (`MediaRead.positions`, M-RoPE), as
    transformers' Qwen3.5 `get_rope_index` gives them, and the position the text after the content takes: text rows
    count on by one in all three, a piece's rows sit at its offsets from the position it starts at, and the text
    after it continues from their max + 1; None for a content without such media."""
    if not any(piece.read.positions is not None for piece in segment.media):
        return None
    length = len(segment.content_tokens)
    out = np.empty((3, length), np.int64)
    row = position = 0
    for piece in segment.media:  # in content order
        read, start = piece.read, piece.start
        out[:, row:start] = np.arange(position, position + start - row)
        position += start - row
        n = len(read.tokens)
        offsets = read.positions if read.positions is not None else np.broadcast_to(np.arange(n), (3, n))
        out[:, start:start + n] = position + offsets
        position += int(offsets.max()) + 1
        row = start + n
    out[:, row:] = np.arange(position, position + length - row)
    return out, position + length - row


def _firsts(segment: Segment) -> np.ndarray | None:
    """The segment's `firsts` where a media piece has blocks that attend both ways, else None."""
    blocks = [(piece.start + a, piece.start + b) for piece in segment.media for a, b in piece.read.blocks]
    if not blocks:
        return None
    firsts = np.arange(segment.length, dtype=np.int32)
    for a, b in blocks:
        firsts[a:b] = a
    return firsts
