"""One decode launch: N new rows, each attending to the pool rows of its table and to its own slot's earlier rows,
through the model's own layers (`Model.hidden`, with a forward context whose attention is `decode_attention` in
place of tree attention: `StepReads`), down to [N, V] float32 log-probabilities.

A `DecodeBatch` holds S slots of own rows (per layer [2, S + 1, G, Hk, D]: keys and values, and positions [S + 1, G]:
a beam's tokens so far, or an answer's), the tables (per table, the pool rows it sees) and, per launch, per row:
its token, position, slot, table and how many of its slot's rows it sees (`own`; the row itself is the last, written
at own - 1 before the attention reads it). Slot S is scratch and table S is empty: padding rows use them.

On CUDA every launch has the same shape: N rows (padding rows harmless, their outputs ignored), S = N slots and
G rows per slot, the tables of a fixed width, the pool in fixed buffers (`kv.PoolStorage`; fixed.py keeps them). The launch is captured
once per shape as a CUDA graph over static input buffers and replayed; `select` (which beams go on) gathers the
slots inside the same buffers. Every product then runs at one row count, and every row's arithmetic is its own
(decode_attention's programs, row-wise norms and GEMMs at a fixed M), so a row's result does not depend on what
else is in the launch. On the CPU the same code runs eagerly, on exactly the rows given.
"""

from __future__ import annotations

import torch

from spinfc.backend import reference
from spinfc.backend.forward_context import ForwardContext
from spinfc.backend.launch import Launch
from spinfc.runtime.extract.fixed import (CUDA_LANES, SLOT_TOKENS, has_fixed_pools, launch_rows, own_buffers,
                                          padding_inputs, pool_storage, workspace)
from spinfc.runtime.extract.kv import KeyPool, stack_of

# Capture fixed-shape launches on CUDA (off: the same launches run eagerly over the same static buffers; the GPU
# check compares the two).
CAPTURE = True


class DecodeBatch:
    def __init__(self, model, pool: KeyPool, tables: list[torch.Tensor], slots: int, slot_rows: int,
                 rows: int | None):
        """`tables`: per table, the pool rows it sees ([L] int64); `slots`: how many slots the walk uses;
        `slot_rows`: G; `rows`: the fixed row count of every launch (CUDA), or None (each launch its own rows)."""
        self.model, self.lock = stack_of(model)
        c = self.model.config
        self.pool = pool
        device = pool.positions.device
        if rows is not None:
            if slots > rows or len(tables) > rows:
                raise ValueError(f"a fixed decode launch has {rows} slots and tables; asked for {slots} and "
                                 f"{len(tables)} (the walk splits larger groups)")
            self.space = workspace(self.model, rows, slot_rows, pool)
            self.slots, self.slot_rows = rows, slot_rows
            self.own, self.own_positions = self.space.own, self.space.own_positions
            self.table, self.table_count = self.space.table, self.space.table_count
        else:
            self.space = None
            self.slots, self.slot_rows = slots, slot_rows
            widest = max([1] + [int(t.shape[0]) for t in tables])
            dtype = pool.keys[0].dtype
            self.own = own_buffers(c, slots + 1, slot_rows, dtype, device)
            self.own_positions = torch.zeros((slots + 1, slot_rows), dtype=torch.int64, device=device)
            self.table = torch.zeros((slots + 1, widest), dtype=torch.int32, device=device)
            self.table_count = torch.zeros(slots + 1, dtype=torch.int32, device=device)
        if len(tables) > self.slots:
            raise ValueError(f"{len(tables)} tables for {self.slots} slots")
        widest = max([1] + [int(t.shape[0]) for t in tables])
        if widest > self.table.shape[1]:
            raise ValueError(f"a table of {widest} rows is wider than the pool's {self.table.shape[1]}")
        host = torch.zeros((len(tables), widest), dtype=torch.int32)
        for i, t in enumerate(tables):
            host[i, :t.shape[0]] = t.to(torch.int32)
        self.table[:len(tables), :widest].copy_(host)
        counts = torch.zeros(self.slots + 1, dtype=torch.int32)
        counts[:len(tables)] = torch.tensor([int(t.shape[0]) for t in tables], dtype=torch.int32)
        self.table_count.copy_(counts)  # the scratch table S (and any unused one) is empty

    def run(self, inputs: torch.Tensor) -> torch.Tensor:
        """inputs: [5, n] int64 on the host (tokens, positions, slots, tables, own per row) -> [n or N, V] float32
        log-probabilities on the device; the first n rows are the inputs' (on CUDA the tensor is the graph's output:
        valid until the next launch of this shape)."""
        n = int(inputs.shape[1])
        if self.space is None:
            with self.lock:
                return self._forward(inputs.to(self.pool.positions.device))
        space = self.space
        if n > space.rows:
            raise ValueError(f"{n} rows for a launch of {space.rows}")
        host = padding_inputs(space.rows, space.slots, "cpu")
        host[:, :n] = inputs
        with self.lock:
            if space.inputs.device.type != "cuda" or not CAPTURE:  # the fixed shape eagerly (CPU tests, checks)
                space.inputs.copy_(host)
                return self._forward(space.inputs)
            if space.graph is None:
                self._capture()  # over padding inputs: writes only the scratch slot
            space.inputs.copy_(host)  # 5 KB, blocking: the buffer is free again once it returns
            space.graph.replay()
        return space.output

    def select(self, index: list[int], length: int) -> None:
        """Slots 0..len(index)-1 take the first `length` own rows of slots `index` (repeats allowed: a beam that
        forks is copied)."""
        if not index or length == 0:
            return
        device = self.own_positions.device
        source = torch.tensor(index, dtype=torch.int64).to(device, non_blocking=True)
        n = len(index)
        for own in self.own:  # [2, S + 1, G, Hk, D] per layer
            own[:, :n, :length] = own[:, :, :length].index_select(1, source)
        self.own_positions[:n, :length] = self.own_positions[:, :length].index_select(0, source)

    # ---- the launch itself ----------------------------------------------------------------------------------

    def _forward(self, inputs: torch.Tensor) -> torch.Tensor:
        model = self.model
        tokens, positions, slots, tables, own = inputs
        flat = slots * self.slot_rows + own - 1  # [n]: where each row's own key and value go
        self.own_positions.view(-1).index_copy_(0, flat, positions)
        n = int(tokens.shape[0])
        empty = torch.zeros(0, dtype=torch.int64, device=tokens.device)
        launch = Launch(tokens=tokens, positions=positions, ends=empty.int(), spans=(),
                        rows=torch.arange(n, device=tokens.device), read_row=empty, read_token=empty)
        # [n, D]: every layer, the last one's norm in the head's dtype
        final = model.hidden(launch, self.context(launch, inputs, flat))
        logits = model.head_logits(final)  # [n, V] float32
        return torch.log_softmax(logits, dim=-1)

    def context(self, launch: Launch, inputs: torch.Tensor, flat: torch.Tensor) -> ForwardContext:
        """The forward context one launch runs the stack with: attention over the pool and the slots
        (`StepReads`)."""
        return ForwardContext(launch, reads=StepReads(self, inputs, flat))

    def _capture(self) -> None:
        """Run the launch twice on padding (compiles its kernels, lets cuBLAS choose), then capture it."""
        space = self.space
        with torch.inference_mode():
            for _ in range(2):
                space.output = self._forward(space.inputs)
            torch.cuda.synchronize()
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                self._forward(space.inputs)
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, capture_error_mode="thread_local"):  # other threads may use the GPU
                space.output = self._forward(space.inputs)
            torch.cuda.synchronize()
        space.graph = graph


class StepReads:
    """A decode launch's attention: each row's key and value written into its slot, then `decode_attention` over
    the pool rows of its table and its slot's own rows."""

    def __init__(self, batch: DecodeBatch, inputs: torch.Tensor, flat: torch.Tensor):
        self._batch, self._inputs, self._flat = batch, inputs, flat
        self._attend = getattr(batch.model.ops, "decode_attention", reference.decode_attention)

    def attend(self, context, model, layer: int, q, k, v, *, scale: float, window: int | None, firsts=None,
               quant=None) -> torch.Tensor:
        """q: [n, H, D], k, v: [n, Hk, D] (each row's new key and value) -> [n, H, D] in q.dtype; with `quant`,
        quantized for the output projection (as `ops.tree_attention`)."""
        batch, slot = self._batch, model.attention_slots[layer]
        own_k, own_v = batch.own[slot][0], batch.own[slot][1]  # [S + 1, G, Hk, D]
        Hk, D = own_k.shape[2], own_k.shape[3]
        own_k.view(-1, Hk, D).index_copy_(0, self._flat, k.to(own_k.dtype))
        own_v.view(-1, Hk, D).index_copy_(0, self._flat, v.to(own_v.dtype))
        pool = batch.pool
        _, _, slots, tables, own = self._inputs
        out = self._attend(q, pool.keys[slot], pool.values[slot], pool.positions, batch.table, batch.table_count,
                           own_k, own_v, batch.own_positions, slots, tables, own, context.launch.positions,
                           scale=scale, window=window)
        return quant.reference(out) if quant is not None else out


def warm_up(model, pass_rows: int, slot_rows: tuple[int, ...] = SLOT_TOKENS[:3]) -> None:
    """On CUDA, before serving: make the fixed pool for passes of `pass_rows` rows and capture the decode launch of
    each `slot_rows` shape, so that no request pays for a capture (a shape first met later is captured then)."""
    stack, _ = stack_of(model)
    if not has_fixed_pools(stack, stack.device):  # a recurrent stack decodes eagerly (decode.py): nothing to capture
        return
    c = stack.config
    like = torch.empty(0, c.kv_heads, c.head_dim, dtype=stack.dtype, device=stack.device)
    for lane in range(CUDA_LANES):
        pool = KeyPool([], [], torch.zeros(0, dtype=torch.int64), pool_storage(model, pass_rows, like, lane))
        for rows in slot_rows:
            DecodeBatch(model, pool, [], 0, rows, launch_rows(model)).run(torch.zeros((5, 0), dtype=torch.int64))
