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

from dataclasses import dataclass

import torch

from spinfc.backend.chains import Level, ancestor_taps, chains_of
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


@dataclass(frozen=True)
class _LevelPlan:
    """What every layer's delta rule reads of one level, made once per forward (the same for every layer)."""

    level: Level  # the host's: its lengths and last rows
    rows: torch.Tensor  # [n] int64 on the device: the level's rows, each segment's in order
    cu_seqlens: torch.Tensor  # [S + 1] int64 on the device (fla's), beside `level.cu_seqlens` on the host
    cu_host: torch.Tensor  # [S + 1] int64 on the host: fla plans its chunks from it without a device read
    needed: torch.Tensor  # [m] int64 on the device: this level's segments whose final state is read again
    compact: dict[int, int]  # segment -> its place in `needed`
    keep: torch.Tensor  # [S] int64 on the device: `compact` as the branch kernel reads it (-1: not kept)
    index: torch.Tensor | None  # [S] int64 on the device: each segment's parent's place in the previous level's
    wanted: tuple[int, ...]  # segments whose final state `record` keeps


def _on_device(tensors: list[torch.Tensor], device: torch.device) -> list[torch.Tensor]:
    """Host int64 tensors on `device` in one copy from pinned memory (no wait on the device's queue: the work
    queued before it runs on while the copy is in flight)."""
    if device.type != "cuda" or not tensors:
        return [t.to(device) for t in tensors]
    flat = torch.cat([t.reshape(-1) for t in tensors]).pin_memory().to(device, non_blocking=True)
    out, at = [], 0
    for t in tensors:
        out.append(flat[at:at + t.numel()].view(t.shape))
        at += t.numel()
    return out


class TreeFlow:
    def __init__(self, config, launch, split_before=(), record: dict | None = None):
        """The chains of `launch` (read on the host: `launch.host` where it was moved to the device, so planning
        never waits for the device) and every level's index tensors, made once: the layers then read nothing
        back from the device."""
        self.config, self.launch, self.record = config, launch, record
        host = launch.host if launch.host is not None else launch
        device = launch.ends.device
        # only rows a read depends on: the answer rows (and the rows kept for extraction) with their ancestors
        self.chains = chains_of(host.ends.cpu(), launch.spans, split_before, live=host.rows.tolist())
        parent = self.chains.parent  # [T] on the host
        self.wanted = {int(parent[r]) for r in split_before if int(parent[r]) >= 0}
        self.levels = self._plan(device)
        self._conv_inputs: torch.Tensor | None = None

    def _plan(self, device: torch.device) -> tuple[_LevelPlan, ...]:
        """Every level's index tensors, made on the host and moved in one copy."""
        levels, host, layout, previous = self.chains.levels, [], [], {}
        for depth, level in enumerate(levels):
            below = levels[depth + 1].parents.tolist() if depth + 1 < len(levels) else []
            wanted = tuple(i for i, last in enumerate(level.last_rows) if last in self.wanted) \
                if self.record is not None else ()
            needed = sorted(set(below) | set(wanted))  # this level's final states that are read again
            compact = {segment: i for i, segment in enumerate(needed)}
            cu = torch.tensor(level.cu_seqlens, dtype=torch.int64)
            # each segment's parent's place in the previous level's `needed` (none at the stems)
            index = torch.tensor([previous[p] for p in level.parents.tolist()] if depth else [], dtype=torch.int64)
            host += [level.rows, cu, torch.tensor(needed, dtype=torch.int64),
                     torch.tensor([compact.get(i, -1) for i in range(len(level.lengths))], dtype=torch.int64), index]
            layout.append((level, cu, compact, wanted))
            previous = compact
        moved = _on_device([*host, self.chains.taps(self.config.linear.conv_kernel)], device)
        self.taps = moved[-1]  # [K, T]
        plans = []
        for depth, (level, cu, compact, wanted) in enumerate(layout):
            rows, cu_device, needed, keep, index = moved[5 * depth:5 * depth + 5]
            plans.append(_LevelPlan(level, rows, cu_device, cu, needed, compact, keep, index if depth else None,
                                    wanted))
        return tuple(plans)

    def conv(self, layer: int, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        if self.record is not None:
            self._conv_inputs = x
        return causal_conv(x, weight, self.taps)

    def delta(self, layer, q, k, v, g, beta) -> torch.Tensor:
        T, Hv, Dv = v.shape
        Dk = q.shape[-1]
        out = v.new_zeros((T, Hv, Dv))
        states, kept = None, {}  # the final states the next level starts from (the kept ones), per wanted row
        for plan in self.levels:
            level, rows = plan.level, plan.rows
            parts = (q[rows], k[rows], v[rows], g[rows], beta[rows])
            if states is not None and _branches(v.device, level):
                got, finals = branch_delta(*parts, level.cu_seqlens, states, plan.index, plan.keep)
            else:
                initial = (states.index_select(0, plan.index) if states is not None else
                           torch.zeros((len(level.lengths), Hv, Dk, Dv), dtype=torch.float32, device=v.device))
                got, finals = gated_delta(*parts, level.cu_seqlens, initial, plan.cu_seqlens, plan.cu_host)
                finals = finals.index_select(0, plan.needed)
            out[rows] = got
            for i in plan.wanted:
                kept[level.last_rows[i]] = finals[plan.compact[i]].clone()
            states = finals
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
