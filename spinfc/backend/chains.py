"""Chains: a pass's rows as the sequences a recurrence runs along, read off the tree mask of a `Launch`.

A linear-attention (recurrent) layer cannot see the content through a mask: a question continues the content's
state. In a pass, each content and its question tree are one span in depth-first order, `ends[j]` the end of row
j's subtree. Row i's parent (the token before it in its own sequence) is its nearest ancestor: i - 1 when
ends[i - 1] > i, else the nearest earlier row whose subtree holds i. A *segment* is a run of rows that one
recurrence reads in order: it starts at a span's first row or wherever a row is not its parent's only child (a
branch point: the parent's subtree holds more than this row's), and it runs while each next row is the only child
of the row before. Every segment but a span's stem starts from the state at its parent row, the last row of its
parent segment, so segments are processed in levels: the stems (level 0, from a zero state), then every segment
whose parent is in level 0, and so on (a content, a question stem and its options: 3 levels). Nothing is read
twice: each row is in exactly one segment.

`split_before` (rows) starts a segment at each of those rows as well, so that the state just before it is a
segment's final state (the extraction decode re-runs a prompt's last token from the state before it).

Padding rows (outside every span) are in no segment; a recurrent layer writes zeros there. With `live` (the
answer rows), rows whose subtree holds no live row are in no segment either: no read depends on them (a
one-token option's own row, read from its parent), so the recurrence skips them. A live row's ancestors are live,
so a segment keeps a prefix of its rows and nothing below a dead row is live.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Level:
    rows: torch.Tensor  # [n] int64: the rows of this level's segments, each segment's rows in order, one after another
    lengths: tuple[int, ...]  # [S] rows of each segment
    parents: torch.Tensor  # [S] int64: each segment's parent segment, an index into the previous level's (-1: none)
    last_rows: tuple[int, ...]  # [S] each segment's last row

    @property
    def cu_seqlens(self) -> list[int]:
        """[S + 1]: where each segment starts in `rows`, and the end."""
        out = [0]
        for length in self.lengths:
            out.append(out[-1] + length)
        return out


@dataclass(frozen=True)
class Chains:
    parent: torch.Tensor  # [T] int64: each row's parent row, -1 at a sequence's first row and at padding rows
    levels: tuple[Level, ...]

    def taps(self, count: int) -> torch.Tensor:
        """[count, T] int64: row i's ancestors 0..count-1 steps back along its chain (row i itself first), -1 where
        the chain is shorter: the rows a causal convolution of kernel `count` reads for row i."""
        return ancestor_taps(self.parent, count)


def ancestor_taps(parent: torch.Tensor, count: int) -> torch.Tensor:
    """[count, T]: row i, parent[i], parent[parent[i]], ... (-1 once a chain has started)."""
    T = int(parent.shape[0])
    taps = [torch.arange(T, dtype=torch.int64, device=parent.device)]
    for _ in range(count - 1):
        previous = taps[-1]
        taps.append(torch.where(previous >= 0, parent[previous.clamp(min=0)], previous))
    return torch.stack(taps)


def chains_of(ends: torch.Tensor, spans: Iterable[tuple[int, int]], split_before: Iterable[int] = (),
              live: Iterable[int] | None = None) -> Chains:
    """The chains of a pass (module docstring) from its `ends` [T] and spans; computed on the host. `live`: the
    rows that must be computed with their ancestors (None: every row of every span)."""
    end = ends.tolist()
    T = len(end)
    device = ends.device
    split = set(split_before)
    parent = _parents(end, spans)
    alive = _alive(parent, set(live) | split, spans) if live is not None else None
    seg_of: dict[int, int] = {}  # a segment's last row -> (level, index in level) is looked up through this
    levels: list[list] = []  # per level: [(first row, length, parent segment index)]
    level_of_seg: list[tuple[int, int]] = []  # global segment -> (level, index in level)
    for start, stop in spans:
        current = -1  # the global index of the open segment
        for i in range(start, stop):
            if alive is not None and not alive[i]:
                continue
            p = parent[i]
            continues = p == i - 1 and p >= 0 and end[i] == end[p] and i not in split
            if continues:
                level, index = level_of_seg[current]
                first, length, up = levels[level][index]
                levels[level][index] = (first, length + 1, up)
            else:
                if p < 0:
                    level, up = 0, -1
                else:
                    owner = seg_of[p]  # p ends a segment: it branches here, or a split starts after it
                    level, up = level_of_seg[owner][0] + 1, level_of_seg[owner][1]
                if len(levels) <= level:
                    levels.append([])
                levels[level].append((i, 1, up))
                level_of_seg.append((level, len(levels[level]) - 1))
                current = len(level_of_seg) - 1
            seg_of[i] = current
    out = []
    for segments in levels:
        rows = [r for first, length, _ in segments for r in range(first, first + length)]
        out.append(Level(
            rows=torch.tensor(rows, dtype=torch.int64, device=device),
            lengths=tuple(length for _, length, _ in segments),
            parents=torch.tensor([up for _, _, up in segments], dtype=torch.int64, device=device),
            last_rows=tuple(first + length - 1 for first, length, _ in segments),
        ))
    return Chains(torch.tensor(parent, dtype=torch.int64, device=device), tuple(out))


def _parents(end: list[int], spans) -> list[int]:
    """Each row's nearest ancestor (-1 at a span's first row and outside spans)."""
    parent = [-1] * len(end)
    for start, stop in spans:
        stack: list[int] = []  # ancestors of the current row
        for i in range(start, stop):
            while stack and end[stack[-1]] <= i:
                stack.pop()
            parent[i] = stack[-1] if stack else -1
            stack.append(i)
    return parent


def _alive(parent: list[int], live: set[int], spans) -> list[bool]:
    """Rows that are live or have a live row below them (children come after their parent: one backward sweep)."""
    alive = [False] * len(parent)
    for start, stop in spans:
        for i in range(stop - 1, start - 1, -1):
            if i in live:
                alive[i] = True
            if alive[i] and parent[i] >= 0:
                alive[parent[i]] = True
    return alive
