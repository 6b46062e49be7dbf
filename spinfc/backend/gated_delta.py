"""The gated delta rule (Gated DeltaNet's recurrence) over packed segments, each from its own initial state, and
the depthwise causal convolution before it.

    gated_delta(q, k, v, g, beta, cu_seqlens, initial) -> (out, final)
        q, k: [n, Hk, Dk]   v: [n, Hv, Dv]   g, beta: [n, Hv] (g: log decay, <= 0)   initial: [S, Hv, Dk, Dv] float32
        out: [n, Hv, Dv] in v.dtype   final: [S, Hv, Dk, Dv] float32, the state after each segment's last row

Per head and segment (rows t of one segment, S_0 = its initial state; q and k l2-normed, q scaled by Dk ** -0.5):
    S_t = exp(g_t) S_{t-1} + beta_t k_t (v_t - exp(g_t) S_{t-1}^T k_t)^T        out_t = S_t^T q_t
Value heads share key heads in groups (Hv // Hk consecutive value heads per key head).

On CUDA: flash-linear-attention's Triton kernels (`chunk_gated_delta_rule` with packed `cu_seqlens`; the fused
recurrent kernel where every segment is one row, a decode step). On the CPU: `reference`, the chunked form
transformers' `torch_chunk_gated_delta_rule` computes, one segment at a time (imported lazily: fla only runs on
CUDA, and transformers calls fla instead of its own torch code wherever fla can be imported).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

CHUNK = 64


def gated_delta(q, k, v, g, beta, cu_seqlens: list[int], initial: torch.Tensor,
                cu_device: torch.Tensor | None = None, cu_host: torch.Tensor | None = None):
    """The module docstring's recurrence: fla on CUDA, `reference` on the CPU. `cu_device` and `cu_host`:
    `cu_seqlens` as int64 tensors on the device and the host, where the caller made them once for many calls (a
    forward's layers): no copy to the device and no read back per call."""
    if q.device.type == "cuda":
        return _fla(q, k, v, g, beta, cu_seqlens, initial, cu_device, cu_host)
    return reference(q, k, v, g, beta, cu_seqlens, initial)


def _fla(q, k, v, g, beta, cu_seqlens, initial, cu_device=None, cu_host=None):
    from fla.ops.gated_delta_rule import chunk_gated_delta_rule, fused_recurrent_gated_delta_rule

    S = len(cu_seqlens) - 1
    q, k, v, g, beta = (t.unsqueeze(0) for t in (q, k, v, g, beta))  # [1, n, ...]: packed
    if int(q.shape[1]) == S:  # every segment one row: a decode step (batch of rows)
        # every tensor by name: fla 0.6 put `gk` and `gv` between `g` and `beta`, so a `beta` given by position
        # is read as per-key decays of [n, 1, Hv, Dk] (out of bounds: the illegal memory access of 2026-12-04)
        out, final = fused_recurrent_gated_delta_rule(
            q=q.transpose(0, 1), k=k.transpose(0, 1), v=v.transpose(0, 1), g=g.transpose(0, 1).float(),
            beta=beta.transpose(0, 1).float(), initial_state=initial.float(), output_final_state=True,
            use_qk_l2norm_in_kernel=True)
        return out.transpose(0, 1)[0], final
    if cu_device is None:
        cu_host = torch.tensor(cu_seqlens, dtype=torch.int64)
        cu_device = cu_host.to(q.device)
    out, final = chunk_gated_delta_rule(q=q, k=k, v=v, g=g.float(), beta=beta.float(), initial_state=initial.float(),
                                        output_final_state=True, use_qk_l2norm_in_kernel=True, cu_seqlens=cu_device,
                                        cu_seqlens_cpu=cu_host)
    return out[0], final


def _l2norm(x: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt((x * x).sum(dim=-1, keepdim=True) + 1e-6)


def reference(q, k, v, g, beta, cu_seqlens: list[int], initial: torch.Tensor):
    """The recurrence of every segment in the chunked form (in float32; the output in v's dtype, the final states
    float32), from its initial state: the segments side
    by side, each padded to the longest with rows that neither decay nor write the state (g = 0, beta = 0), so a
    padded segment's final state is its last real row's; chunks of 64 rows (of the longest, if shorter)."""
    Hk, Hv, dtype = q.shape[1], v.shape[1], v.dtype
    S = len(cu_seqlens) - 1
    lengths = [cu_seqlens[s + 1] - cu_seqlens[s] for s in range(S)]
    if S == 0 or max(lengths) == 0:
        return v.new_zeros((0, *v.shape[1:])), initial.float().clone()
    L = max(lengths)
    index = torch.zeros((S, L), dtype=torch.int64, device=q.device)
    real = torch.zeros((S, L), dtype=torch.bool, device=q.device)
    for s, (a, n) in enumerate(zip(cu_seqlens, lengths)):
        index[s, :n] = torch.arange(a, a + n, device=q.device)
        real[s, :n] = True
    q, k, v, g, beta = (t.float()[index] for t in (q, k, v, g, beta))  # [S, L, ...]
    g, beta = g * real[..., None], beta * real[..., None]
    if Hv != Hk:
        q, k = (t.repeat_interleave(Hv // Hk, dim=2) for t in (q, k))
    out, final = _chunked(q, k, v, g, beta, initial.float(), min(CHUNK, L))
    return out[real].to(dtype), final  # the output in the inputs' dtype, as fla's kernel writes it


def _chunked(q, k, v, g, beta, state, chunk: int):
    """Segments side by side: q, k: [B, L, H, Dk], v: [B, L, H, Dv], g, beta: [B, L, H], state: [B, H, Dk, Dv]
    -> ([B, L, H, Dv], state): transformers' `torch_chunk_gated_delta_rule`, from each segment's state."""
    L = q.shape[1]
    q, k = _l2norm(q) * q.shape[-1] ** -0.5, _l2norm(k)
    q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # [B, H, L, D]
    g, beta = g.transpose(1, 2), beta.transpose(1, 2)  # [B, H, L]
    pad = (chunk - L % chunk) % chunk
    q, k, v = (F.pad(t, (0, 0, 0, pad)) for t in (q, k, v))
    g, beta = (F.pad(t, (0, pad)) for t in (g, beta))
    B, H, n = q.shape[0], q.shape[1], (L + pad) // chunk
    v_beta, k_beta = v * beta[..., None], k * beta[..., None]
    q, k, k_beta, v_beta = (t.reshape(B, H, n, chunk, t.shape[-1]) for t in (q, k, k_beta, v_beta))
    g = g.reshape(B, H, n, chunk).cumsum(-1)  # decay from the chunk's start
    upper = torch.ones(chunk, chunk, dtype=torch.bool, device=q.device).triu(1)
    decay = (g[..., :, None] - g[..., None, :]).masked_fill(upper, float("-inf")).exp()  # [B, H, n, C, C]
    system = (k_beta @ k.transpose(-1, -2)) * decay
    intra = (q @ k.transpose(-1, -2)) * decay
    values = torch.linalg.solve_triangular(system, v_beta, upper=False, unitriangular=True)
    k_decayed = torch.linalg.solve_triangular(system, k_beta * g.exp()[..., None], upper=False, unitriangular=True)
    q = q * g.exp()[..., None]
    k = k * (g[..., -1:] - g).exp()[..., None]
    chunk_decay = g[..., -1].exp()[..., None, None]  # [B, H, n, 1, 1]
    out = torch.zeros_like(values)
    for i in range(n):
        v_new = values[:, :, i] - k_decayed[:, :, i] @ state
        out[:, :, i] = q[:, :, i] @ state + intra[:, :, i] @ v_new
        state = state * chunk_decay[:, :, i] + k[:, :, i].transpose(-1, -2) @ v_new
    return out.reshape(B, H, -1, out.shape[-1])[:, :, :L].transpose(1, 2), state


def recurrent_reference(q, k, v, g, beta, state):
    """One segment token by token (the plain recurrence; the check on `reference`): q, k: [L, H, Dk], v: [L, H, Dv],
    g, beta: [L, H] (heads already repeated), state: [H, Dk, Dv] -> ([L, H, Dv], state)."""
    q, k = _l2norm(q.float()) * q.shape[-1] ** -0.5, _l2norm(k.float())
    outs = []
    for t in range(q.shape[0]):
        state = state * g[t].float().exp()[:, None, None]
        delta = (v[t].float() - (state * k[t][:, :, None]).sum(1)) * beta[t].float()[:, None]  # [H, Dv]
        state = state + k[t][:, :, None] * delta[:, None, :]
        outs.append((state * q[t][:, :, None]).sum(1))
    return torch.stack(outs), state


def causal_conv(x: torch.Tensor, weight: torch.Tensor, taps: torch.Tensor) -> torch.Tensor:
    """x: [T, C] (rows, then any history rows a chain reaches back into), weight: [C, K], taps: [K, n] int64 (row
    i's ancestors, itself first; -1 past a chain's start) -> silu(depthwise causal conv): [n, C] in x.dtype. Tap m
    (m steps back) multiplies weight[:, K - 1 - m], as torch's conv1d with K - 1 rows of left padding does."""
    K = weight.shape[1]
    x32, w32 = x.float(), weight.float()
    out = torch.zeros((taps.shape[1], x.shape[1]), dtype=torch.float32, device=x.device)
    for m in range(K):
        rows = taps[m]
        picked = x32[rows.clamp(min=0)] * (rows >= 0)[:, None]
        out += picked * w32[:, K - 1 - m]
    return F.silu(out).to(x.dtype)
