"""One decode step for many beams at once: [B] new tokens, each attending to its own rows of a `KeyPool` and to
its own earlier tokens, through the model's own layers.

`DecodeBatch` holds, per beam, which pool rows it sees (`visible` [B, P]), its own tokens' keys and values
(per layer [B, G, Hk, D], G the most steps), how many it has (`length` [B]) and its next position. A step writes
each beam's new key and value at its own `length`, so every tensor keeps its shape from step to step: padding B and
G to fixed sizes gives a step of one shape (what a CUDA graph needs); beams that are done keep running harmlessly
until they are dropped by `select`.
"""

from __future__ import annotations

import copy

import torch

from spinfc.backend import reference
from spinfc.backend.launch import Launch
from spinfc.runtime.extract.kv import KeyPool, stack_of


class DecodeBatch:
    def __init__(self, model, pool: KeyPool, visible: torch.Tensor, positions: torch.Tensor, steps: int):
        """`visible` [B, P] bool: the pool rows each beam sees; `positions` [B] int64: the position of each beam's
        first token; `steps`: the most tokens any beam will be given (the size G of its own cache)."""
        self.model, self.lock = stack_of(model)
        c = self.model.config
        device = self.model.device
        B = int(visible.shape[0])
        self.pool = pool
        self.visible = visible.to(device)  # [B, P]
        self.next_position = positions.to(device)  # [B]
        self.length = torch.zeros(B, dtype=torch.int64, device=device)  # [B]
        dtype = pool.keys[0].dtype if pool.keys else self.model.dtype
        shape = (B, steps, c.kv_heads, c.head_dim)
        self.keys = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(c.layers)]  # [B, G, Hk, D]
        self.values = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(c.layers)]
        self.own_positions = torch.zeros((B, steps), dtype=torch.int64, device=device)  # [B, G]
        self.layer = 0

    @property
    def size(self) -> int:
        return int(self.visible.shape[0])

    def select(self, index: torch.Tensor) -> None:
        """Keep beams `index` ([B'] into the current beams, repeats allowed: a beam that forks is copied)."""
        index = index.to(self.visible.device)
        self.visible = self.visible[index]
        self.next_position = self.next_position[index]
        self.length = self.length[index]
        self.own_positions = self.own_positions[index]
        self.keys = [k[index] for k in self.keys]
        self.values = [v[index] for v in self.values]

    @torch.inference_mode()
    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens: [B] int64, one per beam -> [B, V] float32 log-probabilities of each beam's next token."""
        model = self.model
        view = copy.copy(model)
        view.ops = _StepOps(self)
        tokens = tokens.to(model.device)
        positions = self.next_position
        B = self.size
        rows = torch.arange(B, device=tokens.device)
        self.own_positions[rows, self.length] = positions
        empty = torch.empty(0, dtype=torch.int64, device=tokens.device)
        launch = Launch(tokens=tokens, positions=positions, ends=empty.int(), spans=(), rows=empty, read_row=empty,
                        read_token=empty)
        with self.lock:
            x, residual = view.embed(tokens), None  # [B, D]
            for index in range(model.config.layers):
                self.layer = index
                x, residual = view.layer(index, x, residual, launch)
            final, _ = view.add_norm(x, residual, model.final_norm)  # [B, D]
            logits = torch.matmul(final.to(model.lm_head.dtype), model.lm_head.t()).float()  # [B, V]
        self.length = self.length + 1
        self.next_position = positions + 1
        return torch.log_softmax(logits, dim=-1)


class _StepOps:
    """The reference ops, with a `tree_attention` over a beam's pool rows and its own tokens (see `DecodeBatch`)."""

    def __init__(self, batch: DecodeBatch):
        self._batch = batch

    def __getattr__(self, name: str):
        return getattr(reference, name)

    def tree_attention(self, q, k, v, ends, positions, spans, *, scale: float, window: int | None) -> torch.Tensor:
        """q: [B, H, D], k, v: [B, Hk, D] (each beam's new row) -> [B, H, D] in q.dtype; softmax in float32.
        A beam sees its visible pool rows and its own rows up to the new one; with a window, only rows fewer
        than `window` positions back (the rule of `reference.tree_attention`)."""
        batch = self._batch
        layer, B = batch.layer, q.shape[0]
        rows = torch.arange(B, device=q.device)
        own_k, own_v = batch.keys[layer], batch.values[layer]  # [B, G, Hk, D]
        own_k[rows, batch.length] = k.to(own_k.dtype)
        own_v[rows, batch.length] = v.to(own_v.dtype)
        G = own_k.shape[1]
        see_own = torch.arange(G, device=q.device)[None, :] <= batch.length[:, None]  # [B, G]
        see_pool = batch.visible  # [B, P]
        if window is not None:
            see_pool = see_pool & ((positions[:, None] - batch.pool.positions[None, :]) < window)
            see_own = see_own & ((positions[:, None] - batch.own_positions) < window)
        H, D = q.shape[1], q.shape[2]
        Hk = k.shape[1]
        group = H // Hk
        q32 = q.float().reshape(B, Hk, group, D)  # [B, Hk, G', D]
        pool_k = batch.pool.keys[layer].float()  # [P, Hk, D]
        pool_v = batch.pool.values[layer].float()
        scores_pool = torch.einsum("bhgd,phd->bhgp", q32, pool_k) * scale  # [B, Hk, G', P]
        scores_own = torch.einsum("bhgd,bthd->bhgt", q32, own_k.float()) * scale  # [B, Hk, G', G]
        scores_pool = scores_pool.masked_fill(~see_pool[:, None, None, :], float("-inf"))
        scores_own = scores_own.masked_fill(~see_own[:, None, None, :], float("-inf"))
        weights = torch.softmax(torch.cat((scores_pool, scores_own), dim=-1), dim=-1)
        P = pool_k.shape[0]
        out = torch.einsum("bhgp,phd->bhgd", weights[..., :P], pool_v)
        out = out + torch.einsum("bhgt,bthd->bhgd", weights[..., P:], own_v.float())
        return out.reshape(B, H, D).to(q.dtype)
