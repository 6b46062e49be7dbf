"""`ForwardContext`: what one forward of a stack reads and keeps beyond its weights, made by whoever runs the forward
and handed down every layer (`Model.hidden(launch, context)`, `Model.layer(index, x, residual, context, keep)`).

    launch      the rows the layers run: tokens, positions, the question tree (`ends`, `spans`), media, answer rows
    reads       how an attention layer reads its keys: None, the launch's own tree (the backend's
                `tree_attention` over `launch.ends`); or a `Reads` that attends elsewhere: a pass's layout holding
                the content cache's rows (`launch/cached_rows.py`), a decode launch's slots and pool
                (`extract/step.py`), one sequence's cache (`models/decode.py`)
    keep        where each attention layer's keys and values go as the tree attention reads them (a `Keep`: the
                extraction pool's recording, a captured pass's static buffers), or None
    flow        how a recurrent layer's states run through the rows: None, the launch's question tree
                (`state_flow.TreeFlow`, made by the stack on first use, keeping the states just before
                `state_rows` into `states` where those are given); or a decode's own flow

and what the layers of one forward hand each other (Gemma 4's per-layer inputs, and the keys and values of the
layers that others read). An attention layer calls `context.attention(model, layer, q, k, v, ...)` with its own
index; its keys are the `model.attention_slots[layer]`-th that a forward keeps (a recurrent stack's linear layers
have none).
"""

from __future__ import annotations

from typing import Protocol

import attrs
import torch

from spinfc.backend.launch import Launch


class Reads(Protocol):
    def attend(self, context: "ForwardContext", model, layer: int, q: torch.Tensor, k: torch.Tensor,
               v: torch.Tensor, *, scale: float, window: int | None, firsts: torch.Tensor | None,
               quant) -> torch.Tensor:
        """q: [T, H, D], k, v: [T, Hk, D] of the launch's rows -> [T, H, D] in q's dtype (quantized for the
        output projection with `quant`, as the backend's `tree_attention`)."""


class Keep(Protocol):
    def __call__(self, slot: int, k: torch.Tensor, v: torch.Tensor) -> None:
        """Attention slot `slot`'s keys and values, [T, Hk, D] each (after rope), as its attention reads them."""


@attrs.define(eq=False)
class ForwardContext:
    launch: Launch
    reads: Reads | None = None
    keep: Keep | None = None
    flow: object | None = None
    state_rows: tuple[int, ...] = ()
    states: dict | None = None
    # carried from layer to layer within this forward: Gemma 4's per-layer inputs [T, L, P], and the keys and
    # values of the layers that others read, {layer: (k, v)}
    per_layer: torch.Tensor | None = None
    shared_kv: dict = attrs.field(factory=dict)

    def on(self, launch: Launch, reads: Reads | None) -> "ForwardContext":
        """This context's keeping for another launch and way of reading (a pass that reads cached rows runs its
        computed rows, attending over its layout), with nothing carried yet."""
        return ForwardContext(launch, reads, self.keep, None, self.state_rows, self.states)

    def attention(self, model, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, scale: float,
                  window: int | None, firsts: torch.Tensor | None = None, quant=None) -> torch.Tensor:
        """Layer `layer`'s attention: q [T, H, D], k, v [T, Hk, D] -> [T, H, D] (`reads`, or the launch's tree)."""
        if self.reads is not None:
            return self.reads.attend(self, model, layer, q, k, v, scale=scale, window=window, firsts=firsts,
                                     quant=quant)
        launch = self.launch
        return self.tree(model, layer, q, k, v, launch.ends, launch.positions, launch.spans, scale=scale,
                         window=window, firsts=firsts, quant=quant)

    def tree(self, model, layer: int, q, k, v, ends, positions, spans, *, scale: float, window: int | None,
             firsts=None, quant=None) -> torch.Tensor:
        """The backend's tree attention over the layout (`ends`, `positions`, `spans`), the keys and values it
        reads kept first (`keep`)."""
        if self.keep is not None:
            self.keep(model.attention_slots[layer], k, v)
        extra = {} if quant is None else {"quant": quant}
        if firsts is not None:
            extra["firsts"] = firsts
        return model.ops.tree_attention(q, k, v, ends, positions, spans, scale=scale, window=window, **extra)
