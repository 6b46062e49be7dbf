"""The content cache: the keys and values of contents read in earlier passes, kept across requests so that a request
whose content was read before reads only its questions (`cached_rows.py` says how a pass reads them).

    key      sha256 over the model's weights hash, its numeric scheme and the content's tokens: one model's keys
             and values are never served to another, nor a scheme's to another (the cache lives in one engine,
             which serves one model for its life; a new engine, as a reload makes, starts empty)
    entry    every layer's keys and values of the content's rows, after rope (the rows a question sees), as the
             pass that read the content computed them
    budget   in content tokens (`--content-cache-tokens`); least recently used entries go first, and an entry larger
             than the whole budget is not kept, so the tokens held never exceed it. Unset: on the CPU the tokens
             that fit a tenth of the machine's memory (at most 4 GiB); on CUDA, where the passes that fill the
             cache replay captured graphs (`GraphedModel.records`), those that fit a quarter of the device memory
             free once the model is loaded and its graphs captured (`default_tokens`)

What a content's rows hold depends on the content's tokens alone: a content starts every segment at position 0 and
its rows see only one another (the segment pass), so its keys and values are the same whatever questions follow it
or whichever pass it was read in. That holds for sliding-window layers too (Gemma 3): the window is measured in
positions, and cached rows keep theirs, so a question row masks the same cached rows as it would have masked had
the content been read with it. Only whole contents are kept, never prefixes of one.

The floor (the questions on an empty content) is not kept here: its scores are cached whole, by question set
(`Engine`'s floor cache). Nor is a content whose own rows are answer rows (a program that reads its contents).
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections import OrderedDict

import attrs
import numpy as np
import torch

from spinfc.runtime.extract.kv import stack_of
from spinfc.runtime.models.base import Model

MIN_TOKENS = 16  # a shorter content costs less to read again than to look up and scatter
DEFAULT_MEMORY_FRACTION = 0.1  # unset on the CPU: the tokens whose keys and values fit this much of the memory,
DEFAULT_MEMORY_CAP = 4 << 30  # at most this many bytes
# unset on CUDA: this much of the device memory free at start-up (after the weights, the graphs and the decode's
# buffers): the rest stays for what requests hold while they run (extraction beams, generations, the allocator's
# slack). On an H200 serving the Llama-3-8B shape that is ~25 GB, ~200,000 content tokens (128 KiB each in fp16).
CUDA_FREE_FRACTION = 0.25


@attrs.frozen(eq=False)
class CachedContent:
    """One content's keys and values: per layer [L, Hk, D], in the dtype its pass computed them in."""

    tokens: int  # L, the content's tokens (what the budget counts)
    keys: tuple[torch.Tensor, ...]
    values: tuple[torch.Tensor, ...]


@attrs.define
class CacheStats:
    hits: int = 0
    misses: int = 0
    evictions: int = 0
    stored: int = 0
    tokens: int = 0  # content tokens held now


def bytes_per_token(model) -> int:
    """What one content token's keys and values take in the cache, over every layer."""
    c = model.config
    return c.layers * 2 * c.kv_heads * c.head_dim * torch.tensor([], dtype=model.dtype).element_size()


def default_tokens(model, device: str, records: bool = False, room: int | None = None) -> int:
    """The budget when none is set: on the CPU the tokens that fit a tenth of the machine's memory (at most 4 GiB);
    on CUDA those that fit `CUDA_FREE_FRACTION` of the device's free memory where the passes that fill the cache
    replay captured graphs (`records`: `GraphedModel.records`), else 0 (off: every pass would run eagerly). `room`
    (bytes: what `--max-memory` leaves, `load.memory.plan_room`) stands for the free memory on CUDA and bounds the
    CPU's share too."""
    if not isinstance(model, Model):  # (a test's stand-in model: off)
        return 0
    if getattr(model, "attention_layers", model.config.layers) != model.config.layers:
        return 0  # a recurrent stack (Qwen3.5's linear-attention layers): a content's state is not its keys alone
    if str(device).startswith("cuda"):
        if not records:
            return 0
        free = room if room is not None else torch.cuda.mem_get_info(torch.device(device))[0]
        return int(free * CUDA_FREE_FRACTION) // bytes_per_token(model)
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        memory = 8 << 30
    share = min(memory * DEFAULT_MEMORY_FRACTION, DEFAULT_MEMORY_CAP)
    share = share if room is None else min(share, room * CUDA_FREE_FRACTION)
    return int(share // bytes_per_token(model))


class ContentCache:
    """An LRU of `CachedContent` under a token budget, for one model (`identity`: its weights hash and scheme). The
    engine's worker thread reads and fills it; `stats` may be read from any thread (under `lock`)."""

    def __init__(self, identity: str, budget: int) -> None:
        if budget < 0:
            raise ValueError(f"content cache budget {budget} tokens: give 0 (off) or more")
        self.identity, self.budget = identity, budget
        self._entries: OrderedDict[str, CachedContent] = OrderedDict()
        self.stats = CacheStats()
        self.lock = threading.Lock()

    @classmethod
    def for_model(cls, model, device: str, budget: int | None = None, room: int | None = None) -> "ContentCache":
        """The cache of an engine serving `model` (a stack, or a wrapper around one) on `device`; `budget` in
        tokens, None for `default_tokens` (within `room` bytes where `--max-memory` is set)."""
        stack, _ = stack_of(model)
        if getattr(stack, "attention_layers", None) not in (None, getattr(getattr(stack, "config", None), "layers",
                                                                          None)):
            budget = 0  # recurrent layers keep state the cache does not hold: always off
        identity = f"{getattr(stack, 'weights_hash', None) or stack.name}:{getattr(stack, 'scheme', '')}"
        records = bool(getattr(model, "records", False))  # a GraphedModel (under any wrapper) with recording graphs
        return cls(identity, default_tokens(stack, device, records, room) if budget is None else budget)

    @property
    def enabled(self) -> bool:
        return self.budget >= MIN_TOKENS

    def key(self, content_tokens: np.ndarray) -> str:
        """The entry's key of a content of these tokens (int64) under this cache's model."""
        digest = hashlib.sha256(self.identity.encode())
        digest.update(np.ascontiguousarray(content_tokens, dtype=np.int64).tobytes())
        return digest.hexdigest()

    def get(self, key: str) -> CachedContent | None:
        """The entry of `key` (now the most recently used), counted as a hit or a miss."""
        with self.lock:
            entry = self._entries.get(key)
            if entry is None:
                self.stats.misses += 1
                return None
            self._entries.move_to_end(key)
            self.stats.hits += 1
            return entry

    def __contains__(self, key: str) -> bool:
        return key in self._entries

    def put(self, key: str, entry: CachedContent) -> bool:
        """Keep `entry`, evicting the least recently used until it fits; False (nothing kept or evicted) where it is
        larger than the whole budget."""
        if entry.tokens > self.budget:
            return False
        with self.lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self.stats.tokens -= old.tokens
            while self.stats.tokens + entry.tokens > self.budget:
                _, evicted = self._entries.popitem(last=False)
                self.stats.tokens -= evicted.tokens
                self.stats.evictions += 1
            self._entries[key] = entry
            self.stats.tokens += entry.tokens
            self.stats.stored += 1
        return True

    def clear(self) -> None:
        """Drop every entry (the engine is closing, or its model is going)."""
        with self.lock:
            self._entries.clear()
            self.stats.tokens = 0

    def __len__(self) -> int:
        return len(self._entries)
