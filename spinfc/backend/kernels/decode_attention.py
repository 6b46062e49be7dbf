"""Decode attention: each new query row attends to the pool rows its table lists (a scoring pass's keys and values,
read in place) and to its own slot's earlier rows, with GQA, an optional window in positions, and an online softmax
in float32.

    q            [N, H, D]        the new rows (one per beam in a decode step; many per answer in a forced read)
    pool_k, _v   [P, Hk, D]       keys and values any row may read, with their positions [P]
    table        [W, L] int32     per table, the pool rows it sees (the first table_count[w] entries)
    own_k, _v    [S, G, Hk, D]    per slot, its own rows (a beam's tokens so far), with their positions [S, G]
    row_slot     [N]              the slot of each row; row_table [N]: its table; row_own [N]: how many of its slot's
                                  rows it sees (its own row, written before the call, is the last of them)

Row n sees table[row_table[n], :count] and own rows [0, row_own[n]) of slot row_slot[n]; with a window, only rows
fewer than `window` positions back (the rule of `reference.tree_attention`).

One program computes one row for the query heads of one key/value head (the GQA group, padded to a 16-row tile).
It walks its pool rows, then its own rows, in blocks of BLOCK_N in ascending order: the blocks, the order they are
reduced in and every masked position (exactly zero weight, scale factor exactly one) are set by the row's own
table and count. Nothing another row holds enters its arithmetic, so on CUDA a row's result is bit-identical
whatever else is in the batch and wherever the row sits in it (checked by the acceptance run's `turns`).
Under `TRITON_INTERPRET=1` the products are NumPy on the host: tests compare within a tolerance.

Nothing here reads the host, so a decode step can be captured in a CUDA graph with its inputs in static buffers.
"""

from __future__ import annotations

import triton
import triton.language as tl
import torch

from spinfc.backend import reference as _reference


@triton.jit
def _online_block(q, k, v, seen, m_i, l_i, acc, qk_scale):
    """One block of keys into the running (max, sum, accumulator); masked keys weigh exactly 0."""
    s = tl.dot(q, tl.trans(k)) * qk_scale  # [BH, BN]
    s = tl.where(seen, s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, axis=1))
    m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # a row that has seen nothing yet stays at 0
    alpha = tl.exp2(m_i - m_safe)
    p = tl.exp2(s - m_safe[:, None])
    l_i = l_i * alpha + tl.sum(p, axis=1)
    acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
    return m_new, l_i, acc


@triton.jit
def _decode_attention_kernel(
    Q, O, POOL_K, POOL_V, POOL_POS, TABLE, TABLE_COUNT, OWN_K, OWN_V, OWN_POS,
    ROW_SLOT, ROW_TABLE, ROW_OWN, POS,
    stride_qn, stride_qh, stride_on, stride_oh, stride_pkp, stride_pkh, stride_pvp, stride_pvh, stride_table,
    stride_oks, stride_okg, stride_okh, stride_ovs, stride_ovg, stride_ovh, stride_ops,
    qk_scale, window,  # qk_scale = scale * log2(e): the softmax runs in base 2
    GROUP: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr,
    BLOCK_N: tl.constexpr, HAS_WINDOW: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    kv_head = tl.program_id(1)
    slot = tl.load(ROW_SLOT + row).to(tl.int64)
    table = tl.load(ROW_TABLE + row).to(tl.int64)
    own = tl.load(ROW_OWN + row).to(tl.int32)
    count = tl.load(TABLE_COUNT + table).to(tl.int32)
    lanes = tl.arange(0, BLOCK_H)
    head_ok = lanes < GROUP
    heads = kv_head * GROUP + lanes
    dims = tl.arange(0, BLOCK_D)
    dim_ok = dims < HEAD_DIM
    q = tl.load(Q + row * stride_qn + heads[:, None] * stride_qh + dims[None, :],
                mask=head_ok[:, None] & dim_ok[None, :], other=0.0)  # [BH, BD]
    if HAS_WINDOW:
        q_pos = tl.load(POS + row)

    m_i = tl.full([BLOCK_H], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_H], tl.float32)
    acc = tl.zeros([BLOCK_H, BLOCK_D], tl.float32)

    for start in range(0, count, BLOCK_N):  # the pool rows of the row's table
        offsets = start + tl.arange(0, BLOCK_N)
        ok = offsets < count
        keys = tl.load(TABLE + table * stride_table + offsets, mask=ok, other=0).to(tl.int64)  # [BN] pool rows
        k = tl.load(POOL_K + keys[:, None] * stride_pkp + kv_head * stride_pkh + dims[None, :],
                    mask=ok[:, None] & dim_ok[None, :], other=0.0)
        v = tl.load(POOL_V + keys[:, None] * stride_pvp + kv_head * stride_pvh + dims[None, :],
                    mask=ok[:, None] & dim_ok[None, :], other=0.0)
        seen = ok[None, :]
        if HAS_WINDOW:
            key_pos = tl.load(POOL_POS + keys, mask=ok, other=0)
            seen = seen & ((q_pos - key_pos) < window)[None, :]
        m_i, l_i, acc = _online_block(q, k, v, seen, m_i, l_i, acc, qk_scale)

    for start in range(0, own, BLOCK_N):  # the slot's own rows, this row's included
        offsets = start + tl.arange(0, BLOCK_N)
        ok = offsets < own
        k = tl.load(OWN_K + slot * stride_oks + offsets[:, None] * stride_okg + kv_head * stride_okh + dims[None, :],
                    mask=ok[:, None] & dim_ok[None, :], other=0.0)
        v = tl.load(OWN_V + slot * stride_ovs + offsets[:, None] * stride_ovg + kv_head * stride_ovh + dims[None, :],
                    mask=ok[:, None] & dim_ok[None, :], other=0.0)
        seen = ok[None, :]
        if HAS_WINDOW:
            key_pos = tl.load(OWN_POS + slot * stride_ops + offsets, mask=ok, other=0)
            seen = seen & ((q_pos - key_pos) < window)[None, :]
        m_i, l_i, acc = _online_block(q, k, v, seen, m_i, l_i, acc, qk_scale)

    out = acc / l_i[:, None]  # every row sees at least itself, so l_i > 0
    tl.store(O + row * stride_on + heads[:, None] * stride_oh + dims[None, :], out.to(O.dtype.element_ty),
             mask=head_ok[:, None] & dim_ok[None, :])


def block_n(head_dim: int) -> int:
    """The key block (fixed per head dim: it sets the reduction order, so it never depends on the batch)."""
    return 64 if head_dim <= 128 else 32 if head_dim <= 256 else 16


def decode_attention(
    q: torch.Tensor,
    pool_k: torch.Tensor,
    pool_v: torch.Tensor,
    pool_positions: torch.Tensor,
    table: torch.Tensor,
    table_count: torch.Tensor,
    own_k: torch.Tensor,
    own_v: torch.Tensor,
    own_positions: torch.Tensor,
    row_slot: torch.Tensor,
    row_table: torch.Tensor,
    row_own: torch.Tensor,
    positions: torch.Tensor,
    *,
    scale: float,
    window: int | None,
) -> torch.Tensor:
    """[N, H, D] in q.dtype, equal to `reference.decode_attention` (see the module docstring for the arguments).
    q, the pool and the own rows need a unit stride in their last dimension; table and table_count are int32."""
    N, H, D = q.shape
    Hk = pool_k.shape[1]
    if H % Hk or pool_k.shape[2] != D or own_k.shape[2:] != (Hk, D) or pool_v.shape != pool_k.shape:
        raise ValueError(f"decode_attention: q {tuple(q.shape)}, pool {tuple(pool_k.shape)}, own {tuple(own_k.shape)} "
                         "disagree: the pool must be [P, Hk, D] and the own rows [S, G, Hk, D], H a multiple of Hk")
    if table.dtype != torch.int32 or table_count.dtype != torch.int32:
        raise ValueError("decode_attention: table and table_count must be int32")
    if not 16 <= D <= 512:
        raise ValueError(f"decode_attention: head dim {D} is outside the supported 16..512")
    for name, t in (("q", q), ("pool_k", pool_k), ("pool_v", pool_v), ("own_k", own_k), ("own_v", own_v)):
        if t.stride(-1) != 1:
            raise ValueError(f"decode_attention: {name} must have a unit stride in its last dimension")
    group = H // Hk
    out = torch.empty((N, H, D), dtype=q.dtype, device=q.device)
    _decode_attention_kernel[(N, Hk)](
        q, out, pool_k, pool_v, pool_positions, table, table_count, own_k, own_v, own_positions,
        row_slot, row_table, row_own, positions,
        q.stride(0), q.stride(1), out.stride(0), out.stride(1), pool_k.stride(0), pool_k.stride(1),
        pool_v.stride(0), pool_v.stride(1), table.stride(0),
        own_k.stride(0), own_k.stride(1), own_k.stride(2), own_v.stride(0), own_v.stride(1), own_v.stride(2),
        own_positions.stride(0),
        scale * 1.4426950408889634, window if window is not None else 0,
        GROUP=group, HEAD_DIM=D, BLOCK_H=max(16, triton.next_power_of_2(group)),
        BLOCK_D=triton.next_power_of_2(D), BLOCK_N=block_n(D), HAS_WINDOW=window is not None,
        num_warps=4 if D <= 128 else 8, num_stages=2,
    )
    return out


reference = _reference.decode_attention
