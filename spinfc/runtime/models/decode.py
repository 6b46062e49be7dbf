"""A KV-cached forward of one sequence, for generation: the family's own layers, with an attention that reads and
extends a cache of keys and values instead of attending over a packed tree.

`decode(model, tokens, cache)` runs the stack on the plain PyTorch reference ops (`Model.with_ops`: it runs on any
device and never a kernel compiled for the engine's fixed launch shapes), with a forward context whose attention
(`CachedReads`) attends the new rows to the cached rows of their layer and appends theirs, and whose recurrent
layers continue the cache's states (`state_flow.CacheFlow`). Weights are shared with the model, so a cache costs
only its keys and values: 2 x layers x length x kv_heads x head_dim (and a recurrent layer's states).
"""

from __future__ import annotations

import torch

from spinfc.backend import reference
from spinfc.backend.forward_context import ForwardContext
from spinfc.backend.launch import Launch
from spinfc.runtime.models.state_flow import CacheFlow, StateCache


class KVCache:
    """The keys and values of one sequence, per layer, and the position of each cached row."""

    def __init__(self, layers: int, device: torch.device | str = "cpu"):
        self.keys: list[torch.Tensor | None] = [None] * layers  # per layer: [S, Hk, Dh]
        self.values: list[torch.Tensor | None] = [None] * layers  # per layer: [S, Hk, Dh]
        self.positions = torch.empty(0, dtype=torch.int64, device=device)  # [S]
        self.recurrent = StateCache(layers)  # a recurrent layer's states (a stack without one leaves them None)

    @property
    def length(self) -> int:
        """Tokens the cache holds."""
        return int(self.positions.shape[0])


class CachedReads:
    """Attention over `cache` (the launch's ends and spans are not read)."""

    def __init__(self, cache: KVCache):
        self._cache = cache

    def attend(self, context, model, layer: int, q, k, v, *, scale: float, window: int | None, firsts=None,
               quant=None) -> torch.Tensor:
        """q: [T, H, D], k, v: [T, Hk, D] for the new rows at `positions` [T] -> [T, H, D] in q.dtype. A new row
        sees every cached row and the new rows up to itself; with a window, only rows fewer than `window`
        positions back (the rule of `reference.tree_attention`). Softmax in float32. Appends k, v to the cache.
        With `quant`, the output is quantized for the output projection (as `ops.tree_attention`)."""
        cache, positions = self._cache, context.launch.positions
        if cache.keys[layer] is not None:
            k = torch.cat((cache.keys[layer], k))  # [S + T, Hk, D]
            v = torch.cat((cache.values[layer], v))
        cache.keys[layer], cache.values[layer] = k, v
        key_pos = torch.cat((cache.positions, positions))  # [S + T]
        visible = key_pos[None, :] <= positions[:, None]  # [T, S + T]
        if window is not None:
            visible &= (positions[:, None] - key_pos[None, :]) < window
        T, H, D = q.shape
        Hk = k.shape[1]
        group = H // Hk
        q32 = q.float().reshape(T, Hk, group, D).permute(1, 2, 0, 3)  # [Hk, G, T, D]
        k32 = k.float().permute(1, 0, 2)[:, None]  # [Hk, 1, S + T, D]
        v32 = v.float().permute(1, 0, 2)[:, None]  # [Hk, 1, S + T, D]
        scores = torch.matmul(q32, k32.transpose(-1, -2)) * scale  # [Hk, G, T, S + T]
        weights = torch.softmax(scores.masked_fill(~visible, float("-inf")), dim=-1)
        out = torch.matmul(weights, v32)  # [Hk, G, T, D]
        out = out.permute(2, 0, 1, 3).reshape(T, H, D).to(q.dtype)
        return quant.reference(out) if quant is not None else out


@torch.inference_mode()
def decode(model, tokens: torch.Tensor, cache: KVCache) -> torch.Tensor:
    """tokens: [T] int64, the next tokens of the sequence `cache` holds (all of a prompt, then one at a time) ->
    [V] float32 logits of the token after the last of them. Appends the tokens' keys and values to `cache`."""
    view = model.with_ops(reference)
    tokens = tokens.to(model.device)
    T = int(tokens.shape[0])
    positions = torch.arange(cache.length, cache.length + T, dtype=torch.int64, device=model.device)  # [T]
    empty = torch.empty(0, dtype=torch.int64, device=model.device)
    launch = Launch(tokens=tokens, positions=positions, ends=empty.int(), spans=(), rows=empty, read_row=empty,
                    read_token=empty)
    context = ForwardContext(launch, reads=CachedReads(cache), flow=CacheFlow(model.config, cache.recurrent))
    x, residual = view.inputs(context), None  # [T, D]
    for index in range(model.config.layers):
        x, residual = view.layer(index, x, residual, context)
    cache.positions = torch.cat((cache.positions, positions))
    # [1, D] (reference ops), in the head's dtype as `Model.hidden` writes it
    final, _ = view.add_norm(None if x is None else x[-1:], residual[-1:], model.final_norm, model.precision.head)
    return model.head_logits(final)[0]  # [V] float32
