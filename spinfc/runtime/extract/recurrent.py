"""The extraction decode of a stack with recurrent layers (Qwen3.5's Gated DeltaNet): a `DecodeBatch` whose slots
also carry each recurrent layer's states.

A beam continues its prompt's state: the scoring pass kept, per recurrent layer, the conv and recurrent states just
before each extraction prompt's last token (`forward_keeping_kv`'s `state_rows`), and the pool holds them under
the last row of the prompt's table (`KeyPool.states`). A slot's first row (own 1: the prompt's last token, run
again) starts from its table's state; each later row continues its slot's state, and after every launch each slot
holds the state after its last row. `select` carries the states with the slots it keeps (a beam that forks is
copied). Rows of one slot in one launch (an answer read at once on the floor) are one chain. The full-attention
layers read the pool and the slots' own keys as every stack's decode does.

It runs eagerly on every device (the chains are read on the host, as in a scoring pass).
"""

from __future__ import annotations

import torch

from spinfc.backend.chains import ancestor_taps
from spinfc.backend.gated_delta import causal_conv, gated_delta
from spinfc.runtime.extract.kv import is_recurrent, stack_of  # noqa: F401 (is_recurrent re-exported)
from spinfc.runtime.extract.step import DecodeBatch


def batch_class(model) -> type[DecodeBatch]:
    return RecurrentBatch if is_recurrent(model) else DecodeBatch


class RecurrentBatch(DecodeBatch):
    def __init__(self, model, pool, tables, slots, slot_rows, rows):
        super().__init__(model, pool, tables, slots, slot_rows, None)
        c = self.model.config
        lin, device = c.linear, pool.positions.device
        K, C = lin.conv_kernel, lin.conv_channels
        count = self.slots + 1
        layers = [i for i, linear in enumerate(lin.layers) if linear]
        state_shape = (lin.value_heads, lin.key_dim, lin.value_dim)
        self.conv = {i: torch.zeros((count, K - 1, C), dtype=self.model.dtype, device=device) for i in layers}
        self.state = {i: torch.zeros((count, *state_shape), dtype=torch.float32, device=device) for i in layers}
        # each table's starting states (the last table row's in the pool; none for an empty table: zeros)
        self.table_conv = {i: torch.zeros((len(tables) + 1, K - 1, C), dtype=self.model.dtype, device=device)
                           for i in layers}
        self.table_state = {i: torch.zeros((len(tables) + 1, *state_shape), dtype=torch.float32, device=device)
                            for i in layers}
        for t, table in enumerate(tables):
            if table.numel() == 0:
                continue
            kept = pool.states.get(int(table[-1]))
            if kept is None:
                raise ValueError(f"the pool holds no recurrent state at row {int(table[-1])}, where a decode of "
                                 "this recurrent model starts")
            for i in layers:
                conv, state = kept[i]
                self.table_conv[i][t].copy_(conv)
                self.table_state[i][t].copy_(state)

    def select(self, index: list[int], length: int) -> None:
        super().select(index, length)
        if not index:
            return
        source = torch.tensor(index, dtype=torch.int64, device=next(iter(self.state.values())).device)
        for buffers in (self.conv, self.state):
            for i, buffer in buffers.items():
                buffer[:len(index)] = buffer.index_select(0, source)

    def context(self, launch, inputs: torch.Tensor, flat: torch.Tensor):
        """Every stack's decode context, its recurrent layers' states carried by the slots (`SlotFlow`)."""
        context = super().context(launch, inputs, flat)
        context.flow = SlotFlow(self, inputs)
        return context


class SlotFlow:
    """One decode launch's rows as chains: consecutive rows of one slot whose `own` counts up are one segment."""

    def __init__(self, batch: RecurrentBatch, inputs: torch.Tensor):
        self.batch = batch
        _, _, slots, tables, own = inputs.tolist()
        self.segments = []  # (first row, length, slot, table or None when it continues its slot)
        for j, (slot, table, mine) in enumerate(zip(slots, tables, own)):
            if j and slot == slots[j - 1] and mine == own[j - 1] + 1:
                first, length, s, t = self.segments[-1]
                self.segments[-1] = (first, length + 1, s, t)
            else:
                self.segments.append((j, 1, slot, table if mine == 1 else None))
        self.n = len(slots)

    def conv(self, layer: int, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        batch, K = self.batch, weight.shape[1]
        history = torch.stack([batch.table_conv[layer][t] if t is not None else batch.conv[layer][s]
                               for _, _, s, t in self.segments])  # [S, K - 1, C]
        rows = torch.cat((x, history.reshape(-1, x.shape[1]).to(x.dtype)))  # the launch's rows, then the history
        parent = []
        for j in range(self.n):
            parent.append(j - 1)
        for index, (first, _, _, _) in enumerate(self.segments):
            base = self.n + index * (K - 1)
            parent[first] = base + K - 2  # a segment's first row follows its history's newest row
        parent += [-1 if m == 0 else self.n + index * (K - 1) + m - 1
                   for index in range(len(self.segments)) for m in range(K - 1)]
        taps = ancestor_taps(torch.tensor(parent, dtype=torch.int64, device=x.device), K)  # [K, rows]
        for first, length, slot, _ in self.segments:  # each slot's last K - 1 inputs, oldest first
            back = taps[:K - 1, first + length - 1].flip(0)
            batch.conv[layer][slot] = rows[back.clamp(min=0)] * (back >= 0)[:, None]
        return causal_conv(rows, weight, taps[:, :self.n])

    def delta(self, layer, q, k, v, g, beta) -> torch.Tensor:
        batch = self.batch
        initial = torch.stack([batch.table_state[layer][t] if t is not None else batch.state[layer][s]
                               for _, _, s, t in self.segments])
        cu = [0]
        for _, length, _, _ in self.segments:
            cu.append(cu[-1] + length)
        out, final = gated_delta(q, k, v, g, beta, cu, initial)
        for index, (_, _, slot, _) in enumerate(self.segments):
            batch.state[layer][slot] = final[index]
        return out
