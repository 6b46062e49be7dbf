"""Random packed layouts for the attention tests: contents with random question trees, placed at multiples of
an alignment, with padding rows (ends[j] = j + 1, position 0) between and after them."""

from __future__ import annotations

import random

import torch


def random_tree(rng: random.Random, content: int, max_depth: int = 3) -> tuple[list[int], list[int]]:
    """One content of `content` tokens with a random tree of branches below it, in depth-first order:
    (ends relative to the tree's first row, positions)."""
    ends: list[int] = []
    positions: list[int] = []

    def node(position: int, length: int, depth: int) -> None:
        first = len(ends)
        for offset in range(length):
            ends.append(0)
            positions.append(position + offset)
        if depth < max_depth:
            for _ in range(rng.randint(0, 3)):
                node(position + length, rng.randint(1, 5), depth + 1)
        for row in range(first, first + length):
            ends[row] = len(ends)

    node(0, content, 0)
    return ends, positions


def random_layout(
    rng: random.Random, rows: int, align: int, contents: int, content_tokens: tuple[int, int] = (1, 40)
) -> tuple[torch.Tensor, torch.Tensor, tuple[tuple[int, int], ...]]:
    """Up to `contents` random trees packed into `rows` rows -> (ends [rows] int32, positions [rows] int64, spans).
    A tree that does not fit is dropped; gaps of a random number of blocks are left between trees."""
    ends = list(range(1, rows + 1))
    positions = [0] * rows
    spans = []
    cursor = 0
    for _ in range(contents):
        tree_ends, tree_positions = random_tree(rng, rng.randint(*content_tokens))
        start = -(-cursor // align) * align + align * rng.randint(0, 1)
        if start + len(tree_ends) > rows:
            continue
        ends[start : start + len(tree_ends)] = [start + e for e in tree_ends]
        positions[start : start + len(tree_ends)] = tree_positions
        spans.append((start, start + len(tree_ends)))
        cursor = start + len(tree_ends)
    return torch.tensor(ends, dtype=torch.int32), torch.tensor(positions, dtype=torch.int64), tuple(spans)


def place(
    ends: torch.Tensor, positions: torch.Tensor, span: tuple[int, int], rows: int, start: int
) -> tuple[torch.Tensor, torch.Tensor, tuple[tuple[int, int], ...]]:
    """The content at `span` moved alone into an otherwise padded layout of `rows` rows, starting at `start`."""
    a, b = span
    moved_ends = torch.arange(1, rows + 1, dtype=torch.int32)
    moved_positions = torch.zeros(rows, dtype=torch.int64)
    moved_ends[start : start + b - a] = ends[a:b] - a + start
    moved_positions[start : start + b - a] = positions[a:b]
    return moved_ends, moved_positions, ((start, start + b - a),)
