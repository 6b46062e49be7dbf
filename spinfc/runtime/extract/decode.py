"""The decode loop: every walker's beams in one `DecodeBatch`, one model step per iteration for all of them.

    walk(model, pool, starts)   starts: per walker, (walker, the pool rows its prompt sees, prompt token, position)

Each iteration feeds every live beam its next token ([B] in all), splits the [B, V] log-probabilities by walker,
and lets each walker say which beams go on; the batch keeps those rows (`select`). A walker's beams see the same
pool rows (its prompt's) and their own tokens, so walkers on different contents and of different kinds share steps
without seeing one another.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import torch

from spinfc.runtime.extract.kv import KeyPool
from spinfc.runtime.extract.step import DecodeBatch


@attrs.frozen
class Start:
    walker: object  # beams.Search | beams.Sample | beams.Forced
    rows: torch.Tensor  # [L] int64: the pool rows the prompt's last token sees
    token: int  # the prompt's last token (run again: its output starts the answer)
    position: int
    max_tokens: int  # the most tokens a beam of this walker is fed


@attrs.define
class WalkStats:
    steps: int = 0
    beam_rows: int = 0  # beams fed over all steps: the decode's cost in rows


# torch threads on the CPU while decoding (as for chat generation, runtime/generate.py): a step is a few hundred
# small ops, and waking a thread pool for each costs more than it saves, far more on busy cores.
DECODE_THREADS = 1


def walk(model, pool: KeyPool, starts: Sequence[Start]) -> WalkStats:
    """Run every walker to its end; returns how many steps and beam rows it took."""
    if not starts:
        return WalkStats()
    on_cpu = pool.positions.device.type == "cpu"
    threads = torch.get_num_threads()
    if on_cpu:
        torch.set_num_threads(DECODE_THREADS)
    try:
        return _walk(model, pool, starts)
    finally:
        if on_cpu:
            torch.set_num_threads(threads)


def _walk(model, pool: KeyPool, starts: Sequence[Start]) -> WalkStats:
    stats = WalkStats()
    visible = torch.zeros((len(starts), pool.size), dtype=torch.bool)
    for i, start in enumerate(starts):
        visible[i, start.rows] = True
    positions = torch.tensor([s.position for s in starts], dtype=torch.int64)
    batch = DecodeBatch(model, pool, visible, positions, steps=max(s.max_tokens for s in starts) + 1)
    owners = list(range(len(starts)))  # beam -> walker
    tokens = [s.token for s in starts]
    while owners:
        logprobs = batch.step(torch.tensor(tokens, dtype=torch.int64)).cpu()  # [B, V]
        stats.steps += 1
        stats.beam_rows += len(owners)
        keep, next_owners, next_tokens = [], [], []
        first = 0
        while first < len(owners):
            walker = owners[first]
            last = first
            while last < len(owners) and owners[last] == walker:
                last += 1
            for parent, token in starts[walker].walker.advance(logprobs[first:last]):
                keep.append(first + parent)
                next_owners.append(walker)
                next_tokens.append(token)
            first = last
        if not keep:
            break
        batch.select(torch.tensor(keep, dtype=torch.int64))
        owners, tokens = next_owners, next_tokens
    return stats
