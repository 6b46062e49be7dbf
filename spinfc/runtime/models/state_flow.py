"""How a recurrent (linear-attention) layer's state flows through one forward: `TreeFlow` for a scoring pass (the
question tree's chains, backend/chains.py), `CacheFlow` for generation (one sequence, its states in a cache).

A flow has two methods a Gated DeltaNet layer calls, in this order per layer:

    conv(layer, x, weight)                 x: [T, C] the projected q/k/v -> silu(causal depthwise conv) [T, C]
    delta(layer, q, k, v, g, beta)         -> the gated delta rule's output [T, Hv, Dv]

In a pass, each row's convolution reads its own chain's earlier rows (its ancestors in the tree), and the delta
rule runs level by level: the stems from a zero state, then every branch from the state its parent segment ended
in (`Chains.levels`): gathered for fla's chunked kernel, or read by index by the branch kernel. `record` (a dict)
asks the flow to keep, per layer, the states just before the rows `split_before` (the extraction decode starts
there): {layer: {row: (conv [K - 1, C], state [Hv, Dk, Dv])}}.
"""

from __future__ import annotations

import torch

from spinfc.backend.chains import ancestor_taps, chains_of
from spinfc.backend.gated_delta import causal_conv, gated_delta

# On CUDA, levels below the stems run on the branch kernel (backend/kernels/branch_delta.py: every branch reads its
# parent's state by index, no copy per branch) where their segments are at most this many rows; else fla's chunked
# kernel with each segment's initial state gathered. 0 turns the branch kernel off (the benchmark compares both).
# Off by default: fla's chunked kernel ran the seed job as fast (1.23 s against 1.29 s at 16 layers of the 27B shape,
# H200, 2026-12-02). The branch kernel itself agrees with the reference (2.8e-3 relative at the 27B's heads, H200,
# 2026-12-04); the 1.02 once blamed on it was fla's fused step, fed `beta` by position (backend/gated_delta.py).
BRANCH_ROWS = 0


def _branches(device: torch.device, level) -> bool:
    return device.type == "cuda" and max(level.lengths) <= BRANCH_ROWS


def branch_delta(*args):
    from spinfc.backend.kernels.branch_delta import branch_delta as kernel

    return kernel(*args)


class TreeFlow:
    def __init__(self, config, launch, split_before=(), record: dict | None = None):
        self.config, self.launch, self.record = config, launch, record
        # only rows a read depends on: the answer rows (and the rows kept for extraction) with their ancestors
        self.chains = chains_of(launch.ends, launch.spans, split_before, live=launch.rows.tolist())
        self.wanted = {int(self.chains.parent[r]) for r in split_before if int(self.chains.parent[r]) >= 0}
        self.taps = self.chains.taps(config.linear.conv_kernel)  # [K, T]
        self._conv_inputs: torch.Tensor | None = None

    def conv(self, layer: int, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        if self.record is not None:
            self._conv_inputs = x
        return causal_conv(x, weight, self.taps)

    def delta(self, layer, q, k, v, g, beta) -> torch.Tensor:
        T, Hv, Dv = v.shape
        Dk = q.shape[-1]
        out = v.new_zeros((T, Hv, Dv))
        levels = self.chains.levels
        states, index, kept = None, None, {}  # the states the next level starts from, and which each segment reads
        for depth, level in enumerate(levels):
            rows = level.rows
            below = levels[depth + 1].parents.tolist() if depth + 1 < len(levels) else []
            wanted = ([i for i, last in enumerate(level.last_rows) if last in self.wanted]
                      if self.record is not None else [])
            needed = sorted(set(below) | set(wanted))  # this level's final states that are read again
            compact = {segment: i for i, segment in enumerate(needed)}
            parts = (q[rows], k[rows], v[rows], g[rows], beta[rows])
            if states is not None and _branches(v.device, level):
                keep = torch.tensor([compact.get(i, -1) for i in range(len(level.lengths))], device=v.device)
                got, finals = branch_delta(*parts, level.cu_seqlens, states, index, keep)
            else:
                initial = (states.index_select(0, index) if states is not None else
                           torch.zeros((len(level.lengths), Hv, Dk, Dv), dtype=torch.float32, device=v.device))
                got, finals = gated_delta(*parts, level.cu_seqlens, initial)
                finals = finals[torch.tensor(needed, dtype=torch.int64, device=v.device)]
            out[rows] = got
            for i in wanted:
                kept[level.last_rows[i]] = finals[compact[i]].clone()
            states = finals
            index = torch.tensor([compact[p] for p in below], dtype=torch.int64, device=v.device)
        if self.record is not None:
            self._keep(layer, kept)
        return out

    def _keep(self, layer: int, states: dict[int, torch.Tensor]) -> None:
        """The conv state (the last K - 1 inputs of each row's chain, oldest first) and the recurrent state of each
        wanted row."""
        K = self.config.linear.conv_kernel
        x = self._conv_inputs
        layer_states = self.record.setdefault(layer, {})
        for row, state in states.items():
            back = self.taps[:K - 1, row].flip(0)  # oldest first
            conv = x[back.clamp(min=0)] * (back >= 0)[:, None]
            layer_states[row] = (conv.clone(), state)


class StateCache:
    """Per linear-attention layer of one sequence: its conv state ([K - 1, C], the last inputs, oldest first) and
    its recurrent state ([Hv, Dk, Dv] float32), None before the first token."""

    def __init__(self, layers: int):
        self.conv: list[torch.Tensor | None] = [None] * layers
        self.state: list[torch.Tensor | None] = [None] * layers


class CacheFlow:
    """One sequence continued from `cache` (its rows are the sequence's next tokens, in order); the cache's states
    move on to after the last row."""

    def __init__(self, config, cache: StateCache):
        self.config, self.cache = config, cache

    def conv(self, layer: int, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        K, T = self.config.linear.conv_kernel, x.shape[0]
        history = self.cache.conv[layer]
        if history is None:
            history = x.new_zeros((K - 1, x.shape[1]))
        rows = torch.cat((history.to(x.dtype), x))  # [K - 1 + T, C]
        parent = torch.arange(-1, K - 2 + T, device=x.device)  # each row's predecessor in `rows`
        taps = ancestor_taps(parent, K)[:, K - 1:]  # [K, T]: the new rows'
        self.cache.conv[layer] = rows[-(K - 1):].clone()
        return causal_conv(rows, weight, taps)

    def delta(self, layer, q, k, v, g, beta) -> torch.Tensor:
        Hv, Dv, Dk = v.shape[1], v.shape[2], q.shape[-1]
        state = self.cache.state[layer]
        if state is None:
            state = torch.zeros((Hv, Dk, Dv), dtype=torch.float32, device=v.device)
        out, final = gated_delta(q, k, v, g, beta, [0, int(q.shape[0])], state[None])
        self.cache.state[layer] = final[0]
        return out
