"""Tree attention over `end[j]`: query i attends key j iff j <= i < ends[j] (and, with a window,
positions[i] - positions[j] < window). Online softmax, GQA, head dims up to 512.

One program computes BLOCK_M query rows of one query head. It walks, in ascending order, only the key blocks some
of its rows may see: `visible_key_blocks` lists them per query block on the device, from the per-block maximum of
`ends` (a block whose keys' subtrees all end before the query block starts is left out, as are all blocks of other
contents) and, with a window, from per-block position bounds. The loop body has no branch, so its loads pipeline.

Batch invariance (what is promised). Every content starts at a multiple of `ALIGNMENT`, a multiple of both blocks
`blocks_for` picks, so a query block never holds rows of two contents and the key tiles over a content, and the
order they are reduced in, are set by the content's own layout. Key blocks of other contents are skipped, and a
block that is visited but masked for a row leaves its state exactly as it was (scale factor exactly 1, weights
exactly 0). So on CUDA a row's result is bit-identical wherever its content sits in the pass and whatever else is
packed with it (checked on the GPU by the acceptance run's `packed`).

Not promised: a query block that holds the end of one content and the start of the next (only possible with a
`blocks` override whose BLOCK_M does not divide the alignment). Its rows then sit at other places inside the tile
and the visible-block list differs, so the matrix products may round differently (one float32 step under the
interpreter on some CPUs). Under `TRITON_INTERPRET=1` the products are NumPy on the host CPU, whose rounding
follows the host's BLAS: interpreter tests compare within a stated tolerance, never bit for bit.

Layout invariants the kernel relies on (the `layout` pass guarantees them): ends[j] never reaches past the end
of j's own span, and a padding row j has ends[j] = j + 1 (it sees only itself). Under those, the `spans` argument
of the reference adds nothing, and the kernel does not read it.
"""

from __future__ import annotations

import triton
import triton.language as tl
import torch

from spinfc.backend import reference as _reference
from spinfc.backend.kernels.quant_store import quantized

# Contents must start at multiples of this (it is a multiple of every block size the launcher picks).
ALIGNMENT = 64


@triton.jit
def _tree_attention_kernel(
    Q, K, V, O, ENDS, POS, FIRSTS,  # q: [T, H, D], k, v: [T, Hk, D], o: [T, H, D], ends, pos, firsts: [T]
    INV_SCALE, q_min, q_max,  # QUANT: o = clamp(out * inv_scale) in O's 8-bit dtype (INV_SCALE: [] float32)
    BLOCK_LIST, BLOCK_COUNT,  # block_list: [T/BM, T/BN] visible key blocks first, ascending; block_count: [T/BM]
    stride_qt, stride_qh, stride_kt, stride_kh, stride_vt, stride_vh, stride_ot, stride_oh, stride_list,
    qk_scale, window,  # qk_scale = scale * log2(e): the softmax runs in base 2
    GROUP: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HAS_WINDOW: tl.constexpr, QUANT: tl.constexpr,
    IS_INT: tl.constexpr, HEADS: tl.constexpr, HAS_FIRSTS: tl.constexpr,
):
    # A program computes BLOCK_M query rows of HEADS query heads that share one key/value head (HEADS is 1, or
    # divides the group): its tile has HEADS * BLOCK_M rows, the block's rows once per head, so each key and value
    # tile it loads serves all of them. Every row of the tile still walks the same key tiles in the same order.
    query_block = tl.program_id(0)
    first_head = tl.program_id(1) * HEADS
    kv_head = first_head // GROUP
    tile = tl.arange(0, HEADS * BLOCK_M)  # [HM]
    rows = query_block * BLOCK_M + tile % BLOCK_M  # [HM]
    heads = first_head + tile // BLOCK_M  # [HM]
    dims = tl.arange(0, BLOCK_D)  # [BD]
    dim_ok = dims < HEAD_DIM

    q = tl.load(Q + rows[:, None] * stride_qt + heads[:, None] * stride_qh + dims[None, :], mask=dim_ok[None, :],
                other=0.0)
    if HAS_WINDOW:
        q_pos = tl.load(POS + rows)  # [HM]

    m_i = tl.full([HEADS * BLOCK_M], float("-inf"), tl.float32)  # running max (base-2 units)
    l_i = tl.zeros([HEADS * BLOCK_M], tl.float32)  # running sum of weights
    acc = tl.zeros([HEADS * BLOCK_M, BLOCK_D], tl.float32)

    # No condition in the loop body, so the loads of the next key blocks overlap this one's arithmetic.
    for i in range(0, tl.load(BLOCK_COUNT + query_block)):
        key_block = tl.load(BLOCK_LIST + query_block * stride_list + i)
        keys = key_block * BLOCK_N + tl.arange(0, BLOCK_N)  # [BN]
        key_end = tl.load(ENDS + keys)  # [BN]
        k = tl.load(K + keys[:, None] * stride_kt + kv_head * stride_kh + dims[None, :],
                    mask=dim_ok[None, :], other=0.0)  # [BN, BD]
        v = tl.load(V + keys[:, None] * stride_vt + kv_head * stride_vh + dims[None, :],
                    mask=dim_ok[None, :], other=0.0)  # [BN, BD]
        s = tl.dot(q, tl.trans(k)) * qk_scale  # [BM, BN]
        if HAS_FIRSTS:  # image blocks: key j is seen from row firsts[j] (its block's start) on
            key_first = tl.load(FIRSTS + keys)
        else:
            key_first = keys
        seen = (key_first[None, :] <= rows[:, None]) & (rows[:, None] < key_end[None, :])
        if HAS_WINDOW:
            key_pos = tl.load(POS + keys)
            seen = seen & ((q_pos[:, None] - key_pos[None, :]) < window)
        s = tl.where(seen, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # a row that has seen nothing yet stays at 0
        alpha = tl.exp2(m_i - m_safe)
        p = tl.exp2(s - m_safe[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new

    out = acc / l_i[:, None]  # every row sees at least itself, so l_i > 0
    if QUANT:  # the output projection's 8-bit input, from float32 (no separate quantize pass reads it again)
        out = quantized(out, INV_SCALE, q_min, q_max, IS_INT)
    tl.store(O + rows[:, None] * stride_ot + heads[:, None] * stride_oh + dims[None, :], out.to(O.dtype.element_ty),
             mask=dim_ok[None, :])


# (BLOCK_M, BLOCK_N, num_warps, num_stages) per head-dim class, as `blocks_for` picks them. Module-level so a
# tuning script can try others; BLOCK_N must divide ALIGNMENT (it sets the reduction order), the rest do not
# change any row's result.
# Measured on an H200 (benchmarks/NOTES.md, attempt 2; head dim 128, 19,200 rows of the seed job): 64 x 32 tiles with 4
# warps ran the kernel in ~0.29 ms against ~0.45 ms for 128 x 64 with 8 warps (attempt 1's choice).
BLOCKS = {"d128": (64, 32, 4, 3), "d256": (64, 32, 8, 3), "d512": (32, 32, 8, 2)}
# Float32 inputs take twice the shared memory a tile of half inputs does: at head dim 256, 64 x 32 tiles over 3
# stages need ~256 KB (an H200 has 227 KB a block). Smaller tiles and 2 stages keep them under ~160 KB: q [BM, D]
# + 2 stages x (k, v) [BN, D] (d256: 32 + 128 KB; d512 in float32: 32 + 128 KB; d512 in half: 32 + 128 KB).
FLOAT32_BLOCKS = {"d256": (32, 32, 8, 2), "d512": (16, 16, 8, 2)}
# Where a key/value head has a multiple of four query heads, one program takes four of them (`pack_heads`): each
# key and value tile is loaded once for the four instead of once per query head. Measured on an H200 (32 query
# heads, head dim 128, 19,200 rows of the seed job; benchmarks/NOTES.md): Llama-3-8B's 8 key/value
# heads, 16 rows x 4 heads, 32-key tiles, 4 warps, 2 stages: 0.458 ms against 0.503 ms one head a program; with 4,
# 2 and 1 key/value heads (groups of 8, 16, 32) 0.466-0.475 ms against 0.509-0.519, bit-identical to one head a
# program. Packing a whole larger group was slower (16 a program: 1.50 ms against 0.70; 32: 4.95), as was
# packing a group of 2 (1.54 ms): the tile is then too tall or too short for these blocks.
PACKED_BLOCKS = {"d128": (16, 32, 4, 2)}
PACKED_HEADS = 4


def blocks_for(head_dim: int, rows: int, group: int = 1, itemsize: int = 2) -> tuple[int, int, int, int, bool]:
    """(BLOCK_M, BLOCK_N, num_warps, num_stages, pack_heads) for a head dim, `group` query heads per key/value head,
    the inputs' bytes per element (and a row count, which must be a multiple of BLOCK_M): fixed (no autotuning), so
    a launch shape always runs the same code. BLOCK_N (the key tile, which sets the reduction order) divides
    `ALIGNMENT`; BLOCK_M (which rows run together, which does not change any row's result) divides it too, so a
    query block never holds rows of two contents."""
    kind = "d128" if head_dim <= 128 else "d256" if head_dim <= 256 else "d512"
    if itemsize >= 4 and kind in FLOAT32_BLOCKS:
        return (*FLOAT32_BLOCKS[kind], False)
    if kind in PACKED_BLOCKS and group % PACKED_HEADS == 0:
        return (*PACKED_BLOCKS[kind], True)
    return (*BLOCKS[kind], False)


@triton.jit
def _block_list_kernel(
    MAX_END, K_MAX_POS, Q_MIN_POS, MIN_FIRST,  # max_end, k_max_pos, min_first: [NB] per key block; q_min_pos: [NQ]
    LIST, COUNT,  # list: [NQ, NB] int32 (the first count[q] entries written), count: [NQ] int32
    stride_list, window, NB,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, NB_P2: tl.constexpr, HAS_WINDOW: tl.constexpr,
    HAS_FIRSTS: tl.constexpr,
):
    query_block = tl.program_id(0)
    key_block = tl.arange(0, NB_P2)
    ok = key_block < NB
    q_first = query_block * BLOCK_M
    max_end = tl.load(MAX_END + key_block, mask=ok, other=0)
    if HAS_FIRSTS:  # a key block after the query block is visible when one of its keys is first seen in it
        first = tl.load(MIN_FIRST + key_block, mask=ok, other=0)
    else:
        first = key_block * BLOCK_N
    visible = ok & (max_end > q_first) & (first <= q_first + BLOCK_M - 1)
    if HAS_WINDOW:
        k_max_pos = tl.load(K_MAX_POS + key_block, mask=ok, other=0)
        visible = visible & ((tl.load(Q_MIN_POS + query_block) - k_max_pos) < window)
    flags = visible.to(tl.int32)
    place = tl.cumsum(flags, axis=0) - 1  # ascending: the i-th visible block goes to place i
    tl.store(LIST + query_block * stride_list + place, key_block.to(tl.int32), mask=visible)
    tl.store(COUNT + query_block, tl.sum(flags, axis=0))


def visible_key_blocks(
    ends: torch.Tensor, positions: torch.Tensor, window: int | None, block_m: int, block_n: int,
    firsts: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """ends: [T] int32, positions: [T] -> (list [NQ, NB] int32, count [NQ] int32): per query block of `block_m`
    rows, the key blocks of `block_n` rows that some row of it may see, ascending, in the first count[q] places
    (the places after them are not written).

    A key block is left out when it lies past the query block's last row (with `firsts`: when every key of it is
    first seen past that row), when its largest `end` is at most the
    query block's first row (every key's subtree ended before it), or, with a window, when the query block's
    smallest position is at least `window` past the key block's largest. Device ops only (graph-capturable): a
    per-block reduction and one small kernel (the list is built once per layer, so it must cost little next to
    the attention itself; a sort-based version took a third of the attention's time)."""
    T = ends.shape[0]
    nq, nb = T // block_m, T // block_n
    max_end = ends.view(nb, block_n).amax(dim=1)  # [NB]
    if window is not None:
        k_max_pos = positions.view(nb, block_n).amax(dim=1)  # [NB]
        q_min_pos = positions.view(nq, block_m).amin(dim=1)  # [NQ]
    else:
        k_max_pos = q_min_pos = max_end  # not read
    min_first = firsts.view(nb, block_n).amin(dim=1) if firsts is not None else max_end  # [NB]
    block_list = torch.empty((nq, nb), dtype=torch.int32, device=ends.device)
    count = torch.empty(nq, dtype=torch.int32, device=ends.device)
    _block_list_kernel[(nq,)](
        max_end, k_max_pos, q_min_pos, min_first, block_list, count, block_list.stride(0),
        window if window is not None else 0, nb,
        BLOCK_M=block_m, BLOCK_N=block_n, NB_P2=triton.next_power_of_2(nb), HAS_WINDOW=window is not None,
        HAS_FIRSTS=firsts is not None, num_warps=4,
    )
    return block_list, count


def visible_key_blocks_reference(
    ends: torch.Tensor, positions: torch.Tensor, window: int | None, block_m: int, block_n: int,
    firsts: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """`visible_key_blocks` in plain torch (a stable sort puts the visible blocks first): what the kernel must
    match on every place it writes."""
    T = ends.shape[0]
    nq, nb = T // block_m, T // block_n
    q_first = torch.arange(0, T, block_m, device=ends.device)  # [NQ]
    key_block = torch.arange(nb, device=ends.device)  # [NB]
    max_end = ends.view(nb, block_n).amax(dim=1)  # [NB]
    first = firsts.view(nb, block_n).amin(dim=1) if firsts is not None else key_block * block_n  # [NB]
    visible = (max_end[None, :] > q_first[:, None]) & (first[None, :] <= q_first[:, None] + block_m - 1)
    if window is not None:
        q_min_pos = positions.view(nq, block_m).amin(dim=1)  # [NQ]
        k_max_pos = positions.view(nb, block_n).amax(dim=1)  # [NB]
        visible &= (q_min_pos[:, None] - k_max_pos[None, :]) < window
    count = visible.sum(dim=1, dtype=torch.int32)  # [NQ]
    order = torch.argsort((~visible).to(torch.int8), dim=1, stable=True).to(torch.int32)  # visible first
    return order, count


def tree_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    ends: torch.Tensor,
    positions: torch.Tensor,
    spans: tuple[tuple[int, int], ...] = (),
    *,
    scale: float,
    window: int | None,
    blocks: tuple[int, ...] | None = None,
    quant=None,
    firsts: torch.Tensor | None = None,
) -> torch.Tensor:
    """q: [T, H, D], k, v: [T, Hk, D] (rows of each with a unit last stride), ends: [T] int32, positions: [T] int64
    -> [T, H, D] in q.dtype, equal to `reference.tree_attention` under the layout invariants above; with `quant`
    (an `ActivationQuant`: the output projection's static input scale) in its 8-bit storage dtype, quantized from
    the float32 result. `spans` is accepted for the ops signature and not read. `blocks` overrides (BLOCK_M,
    BLOCK_N, num_warps[, num_stages[, pack_heads]]) (tests, tuning). `firsts` ([T] int32, a pass with image
    blocks): key j is seen from row firsts[j] on, as in the reference."""
    T, H, D = q.shape
    Hk = k.shape[1]
    if k.shape != (T, Hk, D) or v.shape != (T, Hk, D) or H % Hk:
        raise ValueError(
            f"tree_attention: q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}: k and v must be "
            f"[T, Hk, D] with the query heads a multiple of Hk"
        )
    if ends.shape != (T,) or positions.shape != (T,) or ends.dtype != torch.int32:
        raise ValueError(f"tree_attention: ends must be [T={T}] int32 and positions [T] (got {ends.dtype})")
    if not 16 <= D <= 512:
        raise ValueError(f"tree_attention: head dim {D} is outside the supported 16..512")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.stride(2) != 1:
            raise ValueError(f"tree_attention: {name} must have a unit stride in its last dimension")
    group = H // Hk
    block_m, block_n, num_warps, *rest = blocks or blocks_for(D, T, group, q.element_size())
    pack = len(rest) > 1 and rest[1]
    # packed: PACKED_HEADS query heads a program where the group is a multiple of it, else the whole group (a
    # power of two: the tile's rows are a tl.arange)
    heads = (PACKED_HEADS if group % PACKED_HEADS == 0 else group) if pack else 1
    if heads & (heads - 1):
        raise ValueError(f"tree_attention: pack_heads needs a power-of-two count of query heads per key/value head "
                         f"or a multiple of {PACKED_HEADS}, not {group}")
    if ALIGNMENT % block_n:
        raise ValueError(f"tree_attention: the key block {block_n} must divide the content alignment {ALIGNMENT}")
    if T % block_m or T % block_n:
        raise ValueError(f"tree_attention: T={T} rows is not a multiple of the blocks ({block_m}, {block_n})")
    out = torch.empty((T, H, D), dtype=quant.storage if quant is not None else q.dtype, device=q.device)
    inv_scale, q_min, q_max = (quant.inv_scale, quant.q_min, quant.q_max) if quant is not None else (q, 0.0, 0.0)
    block_list, block_count = visible_key_blocks(ends, positions, window, block_m, block_n, firsts)
    _tree_attention_kernel[(T // block_m, H // heads)](
        q, k, v, out, ends, positions, firsts if firsts is not None else ends, inv_scale, q_min, q_max, block_list, block_count,
        q.stride(0), q.stride(1), k.stride(0), k.stride(1), v.stride(0), v.stride(1), out.stride(0), out.stride(1),
        block_list.stride(0), scale * 1.4426950408889634, window if window is not None else 0,
        GROUP=H // Hk, HEAD_DIM=D, BLOCK_D=triton.next_power_of_2(D),
        BLOCK_M=block_m, BLOCK_N=block_n, HAS_WINDOW=window is not None, QUANT=quant is not None,
        IS_INT=quant is not None and not quant.storage.is_floating_point, HEADS=heads, HAS_FIRSTS=firsts is not None,
        num_warps=num_warps,
        num_stages=rest[0] if rest else 3,
    )
    return out


reference = _reference.tree_attention
