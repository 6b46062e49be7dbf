"""The gated delta rule over many short branches, each starting from a state taken *by index*: the questions of a
content all read the content's one state (no copy of it per branch, as a packed `initial_state` needs).

    branch_delta(q, k, v, g, beta, cu_seqlens, states, index, keep) -> (out, finals)
        q, k: [n, Hk, Dk]  v: [n, Hv, Dv]  g, beta: [n, Hv] float32 (g: log decay)
        states: [P, Hv, Dk, Dv] float32, index: [S] int64 (each segment's starting state in `states`; -1: zeros)
        keep: [S] int64, each segment's row in `finals` (-1: its final state is not kept)
        out: [n, Hv, Dv] in v.dtype, finals: [max(keep) + 1, Hv, Dk, Dv] float32

One program per (segment, value head, block of Dv): it loads its slice of the starting state ([Dk, BLOCK_V],
float32, kept on chip), steps through the segment's rows (q and k L2-normed, q scaled by Dk ** -0.5; the value
head's key head is h // (Hv / Hk)), writes each row's output and, where kept, the final slice. Reads per program:
the state slice once and the segment's rows; programs of one segment's neighbours read the same state, from L2.
Short segments only (a question of tens of tokens): a long one steps sequentially, where fla's chunked kernel
does its work in matrix products.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from spinfc.backend.gated_delta import reference

BLOCK_V = 32


@triton.jit
def _branch_delta(Q, K, V, G, BETA, STATES, INDEX, STARTS, KEEP, OUT, FINALS,
                  stride_qt, stride_qh, stride_kt, stride_kh, stride_vt, stride_vh, stride_gt, stride_bt,
                  stride_sp, stride_sh, stride_sk, stride_ot, stride_oh, stride_fp, stride_fh, stride_fk,
                  scale, GROUP: tl.constexpr, DK: tl.constexpr, BV: tl.constexpr):
    seg = tl.program_id(0)
    h = tl.program_id(1)
    dk = tl.arange(0, DK)
    dv = tl.program_id(2) * BV + tl.arange(0, BV)
    kh = h // GROUP
    first = tl.load(STARTS + seg)
    last = tl.load(STARTS + seg + 1)
    source = tl.load(INDEX + seg)
    state = tl.zeros([DK, BV], dtype=tl.float32)
    if source >= 0:
        state = tl.load(STATES + source * stride_sp + h * stride_sh + dk[:, None] * stride_sk + dv[None, :])
    for t in range(first, last):
        q = tl.load(Q + t * stride_qt + kh * stride_qh + dk).to(tl.float32)
        k = tl.load(K + t * stride_kt + kh * stride_kh + dk).to(tl.float32)
        q = q * tl.rsqrt(tl.sum(q * q, axis=0) + 1e-6) * scale
        k = k * tl.rsqrt(tl.sum(k * k, axis=0) + 1e-6)
        v = tl.load(V + t * stride_vt + h * stride_vh + dv).to(tl.float32)
        decay = tl.exp(tl.load(G + t * stride_gt + h))
        beta = tl.load(BETA + t * stride_bt + h)
        state = state * decay
        delta = (v - tl.sum(state * k[:, None], axis=0)) * beta  # [BV]
        state = state + k[:, None] * delta[None, :]
        out = tl.sum(state * q[:, None], axis=0)  # [BV]
        tl.store(OUT + t * stride_ot + h * stride_oh + dv, out.to(OUT.dtype.element_ty))
    kept = tl.load(KEEP + seg)
    if kept >= 0:
        tl.store(FINALS + kept * stride_fp + h * stride_fh + dk[:, None] * stride_fk + dv[None, :], state)


def branch_delta(q, k, v, g, beta, cu_seqlens: list[int], states: torch.Tensor, index: torch.Tensor,
                 keep: torch.Tensor):
    """The module docstring's op (the launcher: checks shapes, makes the outputs)."""
    n, Hk, Dk = q.shape
    Hv, Dv = v.shape[1], v.shape[2]
    S = len(cu_seqlens) - 1
    if Hv % Hk or Dv % BLOCK_V or Dk & (Dk - 1) or tuple(states.shape[1:]) != (Hv, Dk, Dv):
        raise ValueError(f"branch_delta: q {tuple(q.shape)}, v {tuple(v.shape)}, states {tuple(states.shape)}: "
                         f"Hv must be a multiple of Hk, Dv of {BLOCK_V}, Dk a power of two")
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    g, beta, states = g.float().contiguous(), beta.float().contiguous(), states.float().contiguous()
    out = torch.empty_like(v)
    kept = int(keep.max()) + 1 if S else 0
    finals = torch.empty((max(kept, 1), Hv, Dk, Dv), dtype=torch.float32, device=v.device)
    starts = torch.tensor(cu_seqlens, dtype=torch.int64, device=v.device)
    if S:
        _branch_delta[(S, Hv, Dv // BLOCK_V)](
            q, k, v, g, beta, states, index, starts, keep, out, finals,
            q.stride(0), q.stride(1), k.stride(0), k.stride(1), v.stride(0), v.stride(1), g.stride(0),
            beta.stride(0), states.stride(0), states.stride(1), states.stride(2), out.stride(0), out.stride(1),
            finals.stride(0), finals.stride(1), finals.stride(2),
            Dk**-0.5, GROUP=Hv // Hk, DK=Dk, BV=BLOCK_V)
    return out, finals[:kept]


def branch_delta_reference(q, k, v, g, beta, cu_seqlens, states, index, keep):
    """The same op in PyTorch: each segment's initial state gathered (`gated_delta.reference`)."""
    Hv, Dk, Dv = states.shape[1:]
    initial = torch.zeros((len(cu_seqlens) - 1, Hv, Dk, Dv), dtype=torch.float32, device=v.device)
    has = index >= 0
    initial[has] = states.float()[index[has]]
    out, final = reference(q, k, v, g, beta, cu_seqlens, initial)
    kept = int(keep.max()) + 1 if len(keep) else 0
    finals = torch.zeros((kept, Hv, Dk, Dv), dtype=torch.float32, device=v.device)
    finals[keep[keep >= 0]] = final[keep >= 0]
    return out, finals
