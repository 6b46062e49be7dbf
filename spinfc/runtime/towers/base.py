"""What every tower shares: `MediaRead` (one media piece as the text stack sees it) and the `Tower` contract.

A tower turns decoded media into (a) placeholder tokens for the content, some of whose rows take its embeddings,
and (b) those embeddings. (a) runs on the compile thread (the processor: resize, patches, mel features, frames);
(b) on the worker, once per content, batched across the contents of a pass (`Tower.embed`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar

import attrs
import torch


@attrs.frozen(eq=False)
class MediaRead:
    """One image, clip or video as its tower read it. `tokens`: its placeholder tokens, in content order;
    `embedded`: the offsets into `tokens` whose rows take the tower's embeddings (in the order `Tower.embed`
    returns them); `blocks`: [start, stop) offsets whose rows attend each other both ways (an image's soft tokens
    where the model reads images bidirectionally); `inputs`: the processor's tensors for this piece."""

    kind: str
    tower: str  # the tower's name in `Towers`
    tokens: tuple[int, ...]
    embedded: tuple[int, ...]
    blocks: tuple[tuple[int, int], ...]
    inputs: dict = attrs.field(factory=dict, repr=False)


class Tower:
    """A tower: which kinds it reads, the processor (`read`) and the forward (`embed`)."""

    name: ClassVar[str]
    kinds: ClassVar[frozenset[str]]

    def read(self, kind: str, decoded, encode: Callable[[str], tuple[int, ...]]) -> MediaRead:
        """Decoded media (a PIL image, a (waveform, rate) pair, a list of frames) -> its `MediaRead`. `encode`
        writes text as the model's tokens (for text the model's processor puts around the media)."""
        raise NotImplementedError

    def embed(self, reads: Sequence[MediaRead], device) -> torch.Tensor:
        """The embeddings of every `embedded` row of `reads`, in order: [sum of len(read.embedded), D]."""
        raise NotImplementedError


def prefixed(state: dict, prefix: str) -> dict:
    """The entries of `state` under `prefix`, popped, with the prefix removed."""
    keys = [key for key in state if key.startswith(prefix)]
    return {key[len(prefix):]: state.pop(key) for key in keys}
