"""What every tower shares: `MediaRead` (one media piece as the text stack sees it) and the `Tower` contract.

A tower turns decoded media into (a) placeholder tokens for the content, some of whose rows take its embeddings,
and (b) those embeddings. (a) runs on the compile thread (the processor: resize, patches, mel features, frames);
(b) on the worker, once per content, batched across the contents of a pass (`Tower.embed`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import ClassVar, TypeVar

import attrs
import numpy as np
import torch

T = TypeVar("T")

# Media pieces (images, frames) per tower forward. Every forward has exactly this batch, the last padded with copies
# of its final piece, so the kernels a piece meets (their shapes) never depend on what else shares its pass: a
# content's media embeddings, and so its scores, are the same bits alone and packed.
TOWER_BATCH = 4


@attrs.frozen(eq=False)
class MediaRead:
    """One image, clip or video as its tower read it. `tokens`: its placeholder tokens, in content order;
    `embedded`: the offsets into `tokens` whose rows take the tower's embeddings (in the order `Tower.embed`
    returns them); `blocks`: [start, stop) offsets whose rows attend each other both ways (an image's soft tokens
    where the model reads images bidirectionally); `inputs`: the processor's tensors for this piece; `positions`:
    where the model turns its rope by three positions (M-RoPE: Qwen3.5), the (t, h, w) of each token as offsets from
    the piece's first position ([3, len(tokens)] int64; the text after the piece continues from their max + 1),
    else None (one position per token, as text)."""

    kind: str
    tower: str  # the tower's name in `Towers`
    tokens: tuple[int, ...]
    embedded: tuple[int, ...]
    blocks: tuple[tuple[int, int], ...]
    inputs: dict = attrs.field(factory=dict, repr=False)
    positions: np.ndarray | None = attrs.field(default=None, repr=False)


class Tower:
    """A tower: which kinds it reads, the processor (`read`) and the forward (`embed`)."""

    name: ClassVar[str]
    kinds: ClassVar[frozenset[str]]

    def read(self, kind: str, decoded, encode: Callable[[str], tuple[int, ...]]) -> MediaRead:
        """Decoded media (a PIL image, a (waveform, rate) pair, a `Video`: its frames and rate) -> its `MediaRead`.
        `encode` writes text as the model's tokens (for text the model's processor puts around the media)."""
        raise NotImplementedError

    def embed(self, reads: Sequence[MediaRead], device) -> torch.Tensor:
        """The embeddings of every `embedded` row of `reads`, in order: [sum of len(read.embedded), D]."""
        raise NotImplementedError


def prefixed(state: dict, prefix: str) -> dict:
    """The entries of `state` under `prefix`, popped, with the prefix removed."""
    keys = [key for key in state if key.startswith(prefix)]
    return {key[len(prefix):]: state.pop(key) for key in keys}


def fixed_batches(pieces: Sequence[T], size: int = TOWER_BATCH) -> Iterator[tuple[list[T], int]]:
    """`pieces` in batches of exactly `size` (the last padded by repeating its final piece), each with how many of
    its pieces are real (the padding comes after them)."""
    for start in range(0, len(pieces), size):
        batch = list(pieces[start:start + size])
        real = len(batch)
        yield batch + [batch[-1]] * (size - real), real
