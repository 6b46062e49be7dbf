"""A pass where some contents' rows come from the content cache (`content_cache.py`): only the other rows (the
questions of those contents, every row of the rest) run through the layers; each layer's attention sees the pass's
whole layout, its keys and values at the cached rows taken from the cache.

    layout     the pass as it would run uncached (`Runner.stage`): the same rows, positions, `ends` and spans, so
               every question row's mask, and the order its attention reads keys in, is what it would have been
    computed   [Tc] the layout rows not read from the cache, ascending: the launch the layers run (`inner`)
    attention  per layer, q, k, v of the computed rows are scattered into [T] tensors of the layout, the cached rows'
               keys and values written in (their queries are zero, their outputs dropped), the backend's own
               `tree_attention` runs over the layout, and the computed rows' outputs are gathered back
    media      a content with media is never cached, so its rows are all computed: the towers' rows are renumbered
               into `inner`, its M-RoPE positions taken at the computed rows; the attention reads the layout's
               `firsts`, as it reads the layout's `ends`

A row's projections, norms and MLP depend on that row alone, and its attention on the keys and values it sees, which
are the ones the content's own pass computed: so a cached content's scores are the scores it gets read anew, given
kernels whose row results do not depend on the other rows of a launch (the CUDA kernels' batch invariance; on the
CPU within its rounding tolerance). The layout keeps its shape, so the attention launches at the launch size an
uncached pass takes; the computed rows' launch is smaller.

The hook is `Model.hidden`: a launch with `cached` set runs `CachedRows.hidden`, which runs the computed rows with
itself as the forward context's way of reading (`ForwardContext.reads`). What the context keeps (the extraction
pool's keys and values: `extract.kv.forward_keeping_kv`) is what the tree attention reads, here the layout's: the
cached rows' included, so a decode reads them as it would read a content read in this pass.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import torch

from spinfc.runtime.launch.content_cache import MIN_TOKENS, CachedContent, ContentCache


@dataclasses.dataclass(frozen=True)
class CachedRows:
    """What `Model.hidden` needs of a pass reading cached rows: the layout launch (uncached), the launch of the
    computed rows, and per layer the cached rows' keys and values, gathered for the whole pass."""

    layout: object  # backend.launch.Launch, `cached` None
    inner: object  # Launch of the computed rows: tokens, positions [Tc]; rows and media rows index into them
    computed: torch.Tensor  # [Tc] int64 layout rows
    rows: torch.Tensor  # [C] int64 layout rows read from the cache
    keys: tuple[torch.Tensor, ...]  # per layer [C, Hk, D]
    values: tuple[torch.Tensor, ...]

    def hidden(self, model, context) -> torch.Tensor:
        """`model.hidden` of the pass: the computed rows through the layers, attention over the layout (`attend`),
        keeping what `context` (a `ForwardContext` of the layout launch) keeps."""
        return model.hidden(self.inner, context.on(self.inner, self))

    def attend(self, context, model, layer: int, q, k, v, *, scale: float, window: int | None, firsts=None,
               quant=None) -> torch.Tensor:
        """q, k, v of the computed rows are scattered into [T] tensors of the layout, the cached rows' keys and
        values written in (their queries zero), the tree attention runs over the layout (its `firsts`, as its
        `ends`), and the computed rows' outputs are gathered back: [Tc, H, D]."""
        T, slot = self.layout.budget, model.attention_slots[layer]
        q_all = q.new_zeros((T, *q.shape[1:]))
        k_all = k.new_zeros((T, *k.shape[1:]))
        v_all = v.new_zeros((T, *v.shape[1:]))
        q_all[self.computed] = q
        k_all[self.computed] = k
        v_all[self.computed] = v
        k_all[self.rows] = self.keys[slot].to(k.dtype)
        v_all[self.rows] = self.values[slot].to(v.dtype)
        layout = self.layout
        out = context.tree(model, layer, q_all, k_all, v_all, layout.ends, layout.positions, layout.spans,
                           scale=scale, window=window, firsts=layout.firsts if firsts is not None else None,
                           quant=quant)
        return out[self.computed]

    def to(self, device) -> "CachedRows":
        move = lambda t: t.to(device, non_blocking=True)  # noqa: E731
        return CachedRows(self.layout.to(device), self.inner.to(device), move(self.computed),
                          move(self.rows), tuple(map(move, self.keys)), tuple(map(move, self.values)))


def reading(launch, starts: Sequence[int], entries: Sequence[CachedContent | None]):
    """`launch` (a pass as staged, uncached) with `cached` set for the segments whose entry is given (segment i at
    row starts[i]); `launch` itself where none is."""
    if not any(e is not None for e in entries):
        return launch
    T, device = launch.budget, launch.tokens.device
    from_cache = torch.zeros(T, dtype=torch.bool)
    spans = []
    for start, entry in zip(starts, entries):
        if entry is not None:
            from_cache[start:start + entry.tokens] = True
            spans.append((start, entry))
    computed = (~from_cache).nonzero().squeeze(1)
    index = torch.zeros(T, dtype=torch.int64)
    index[computed] = torch.arange(computed.shape[0])
    rows = torch.cat([torch.arange(start, start + e.tokens) for start, e in spans])
    layers = len(spans[0][1].keys)
    keys = tuple(torch.cat([e.keys[i] for _, e in spans]) for i in range(layers))
    values = tuple(torch.cat([e.values[i] for _, e in spans]) for i in range(layers))
    computed, index, rows = computed.to(device), index.to(device), rows.to(device)
    layout = dataclasses.replace(launch, block=None, cached=None, host=None)  # its rows are not the host's
    inner = dataclasses.replace(layout, tokens=launch.tokens[computed], positions=launch.positions[computed],
                                ends=launch.ends[computed], spans=(), rows=index[launch.rows],
                                **_computed_media(launch, computed, index, from_cache))
    return dataclasses.replace(launch, cached=CachedRows(layout, inner, computed, rows, keys, values))


def _computed_media(launch, computed: torch.Tensor, index: torch.Tensor, from_cache: torch.Tensor) -> dict:
    """The media fields of the computed rows' launch: the towers' rows renumbered into it (a content with media is
    never cached, so every one is computed), and per computed row its `firsts` (layout rows, as its `ends`: the
    attention runs over the layout and reads the layout's) and its three M-RoPE positions."""
    fields = {}
    if launch.media is not None:
        if from_cache[launch.media.rows.cpu()].any():
            raise ValueError("a content read from the content cache holds media rows; a content with media is "
                             "never cached (PassCache.key)")
        fields["media"] = dataclasses.replace(launch.media, rows=index[launch.media.rows])
    if launch.firsts is not None:
        fields["firsts"] = launch.firsts[computed]
    if launch.rope_positions is not None:
        fields["rope_positions"] = launch.rope_positions[:, computed]  # [3, Tc]
    return fields


class PassCache:
    """The engine's side of the content cache: which of a pass's segments read from it, and what a pass that read
    contents anew leaves in it."""

    def __init__(self, cache: ContentCache):
        self.cache = cache

    def key(self, unit) -> str | None:
        """The cache key of a unit's content, or None where it is not cached (a floor, a content whose rows are
        answer rows, a short one, one with media: its placeholder tokens do not say which image they hold)."""
        length = len(unit.segment.content_tokens)
        if not self.cache.enabled or unit.floor_key is not None or unit.segment.read_contents or length < MIN_TOKENS:
            return None
        if getattr(unit.arrays, "media", ()):
            return None
        return self.cache.key(unit.arrays.tokens[:length])

    def lookup(self, units) -> tuple[list[str | None], list[CachedContent | None]]:
        """Per unit: its key and its entry (None: read anew)."""
        keys = [self.key(unit) for unit in units]
        return keys, [self.cache.get(k) if k is not None else None for k in keys]

    @staticmethod
    def wants(keys, entries) -> bool:
        """Whether the pass should record its keys and values: some content it reads anew is to be kept."""
        return any(k is not None and e is None for k, e in zip(keys, entries))

    def store(self, units, keys, entries, starts, recorded) -> None:
        """Keep the contents the pass read anew: `recorded` is its (keys, values) per layer, [T, Hk, D] each."""
        if recorded is None:
            return
        layer_keys, layer_values = recorded
        for unit, key, entry, start in zip(units, keys, entries, starts):
            if key is None or entry is not None or key in self.cache:
                continue
            length = len(unit.segment.content_tokens)
            self.cache.put(key, CachedContent(
                length, tuple(k[start:start + length].clone() for k in layer_keys),
                tuple(v[start:start + length].clone() for v in layer_values)))
