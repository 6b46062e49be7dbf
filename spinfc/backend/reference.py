"""The plain PyTorch reference of every op a model stack calls: the CPU backend, and what each Triton kernel
in `spinfc.backend.kernels` must match.

A stack calls these through an `ops` namespace (this module, or a Triton backend with the same function names).
Every op computes in float32 and returns the input's dtype, except `answer_logprobs`, which returns float32.
Matmuls are not ops: the stacks call torch for them.
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F

from spinfc.backend import split_product
from spinfc.backend.kernels.quantize_reference import ActivationQuant

# Queries of one span are processed this many at a time, each block against only the keys some row of it can see
# (j < block stop and ends[j] > block start): a block of question rows reads the content and its own branches,
# not the whole tree, and the scores stay small ([H, 128, keys] floats rather than [H, span, span]).
QUERY_BLOCK = 128
# Answer rows the LM head scores at once: every pass of the CPU's default budget (2,048 rows) in one product, as
# before; more rows than that come only from a content alone in a longer pass (Shapes.largest).
HEAD_ROWS = 2048


def rms_norm(
    x: torch.Tensor, weight: torch.Tensor, eps: float, unit_offset: bool, out_dtype: torch.dtype | None = None,
    quant: ActivationQuant | None = None,
) -> torch.Tensor:
    """x: [T, D], weight: [D] -> [T, D] in `out_dtype` (default x.dtype): x / sqrt(mean(x^2) + eps) * w, or
    * (1 + w) when `unit_offset` (Gemma stores its norm weights around 0). Computed in float32. With `quant`, the
    float32 result is quantized for the next linear layer instead (`out_dtype` is then not read)."""
    x32 = x.float()
    normed = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)
    scale = weight.float() + 1.0 if unit_offset else weight.float()
    if quant is not None:
        return quant.reference(normed * scale)
    return (normed * scale).to(out_dtype or x.dtype)


def add_rms_norm(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float, unit_offset: bool,
    out_dtype: torch.dtype | None = None, quant: ActivationQuant | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """x, residual: [T, D] -> (rms_norm(x + residual), x + residual): the normed rows in `out_dtype` (default:
    the sum's dtype; with `quant`, quantized for the next linear layer), the sum in the wider of x's and the
    residual's dtypes (a float32 residual stream stays float32 when bf16 block outputs are added to it).

    The sum is rounded to its dtype before it is normed, as a stack that adds and then norms would."""
    residual_out = x + residual
    return rms_norm(residual_out, weight, eps, unit_offset, out_dtype, quant), residual_out


# The last tables built per (theta, head_dim, rotated, sections): every layer of a forward asks for the same ones.
_ROPE_TABLES: dict[tuple, tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}


def rope_cos_sin(positions: torch.Tensor, head_dim: int, theta: float, rotated: int | None = None,
                 sections: tuple[int, ...] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """positions: [T] int64 (or [3, T] with `sections`: M-RoPE, see `mrope_axes`) -> cos, sin: [T, head_dim]
    float32, in Hugging Face's layout (the half-size table repeated twice), inv_freq[i] = theta ** (-2i / head_dim)
    (`inv_freq`). The last tables per (theta, head_dim, rotated, sections) are kept and reused when the positions
    are equal."""
    key = (theta, head_dim, rotated, sections)
    kept = _ROPE_TABLES.get(key)
    if kept is not None and kept[0].device == positions.device and kept[0].shape == positions.shape \
            and torch.equal(kept[0], positions):
        return kept[1], kept[2]
    cos, sin = _rope_tables(positions, head_dim, theta, rotated, sections)
    _ROPE_TABLES[key] = (positions.clone(), cos, sin)
    return cos, sin


def inv_freq(head_dim: int, theta: float, rotated: int | None, device) -> torch.Tensor:
    """[D/2] float32: theta ** (-2i / head_dim) for the first `rotated` pairs (None: all), 0 for the rest, whose
    dimensions then pass through unchanged (cos 0 = 1, sin 0 = 0: transformers' `proportional` rope)."""
    exponent = torch.arange(0, head_dim, 2, dtype=torch.int64, device=device).float() / head_dim
    freq = 1.0 / (theta**exponent)  # [D/2]
    if rotated is not None and rotated < head_dim // 2:
        freq[rotated:] = 0.0
    return freq


def mrope_axes(half: int, sections: tuple[int, ...], device=None) -> torch.Tensor:
    """[half] int64: which of a row's three positions (t, h, w) each rotary frequency turns by, under Qwen3.5's
    interleaved M-RoPE (`mrope_section` (t, h, w)): frequency i reads h where i % 3 == 1 and i < 3 * h, w where
    i % 3 == 2 and i < 3 * w, t otherwise (transformers' `Qwen3_5TextRotaryEmbedding.recomposition_frequencies`).
    A row whose three positions are equal (text) turns exactly as plain rope at that position."""
    i = torch.arange(half, dtype=torch.int64, device=device)
    axes = torch.zeros(half, dtype=torch.int64, device=device)
    axes[(i % 3 == 1) & (i < 3 * sections[1])] = 1
    axes[(i % 3 == 2) & (i < 3 * sections[2])] = 2
    return axes


def _rope_tables(positions: torch.Tensor, head_dim: int, theta: float, rotated: int | None = None,
                 sections: tuple[int, ...] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    freq = inv_freq(head_dim, theta, rotated, positions.device)  # [D/2]
    if sections is None:
        freqs = positions.float()[:, None] * freq[None, :]  # [T, D/2]
    else:  # [3, T] positions: each frequency turns by one of them (the same product, so text rows match plain rope)
        axes = mrope_axes(head_dim // 2, sections, positions.device)
        by_axis = positions.float()[:, :, None] * freq[None, None, :]  # [3, T, D/2]
        freqs = by_axis.gather(0, axes.expand(1, positions.shape[1], -1))[0]  # [T, D/2]
    angles = torch.cat((freqs, freqs), dim=-1)  # [T, D]
    return angles.cos(), angles.sin()


def apply_rope(x: torch.Tensor, positions: torch.Tensor, theta: float, rotated: int | None = None,
               sections: tuple[int, ...] | None = None) -> torch.Tensor:
    """x: [T, H, D], positions: [T] int64 -> [T, H, D] in x.dtype: rotary embedding in Hugging Face's
    rotate_half convention (dimension i pairs with i + D/2); with `rotated`, only the first `rotated` pairs turn
    (`inv_freq`); with `sections` (M-RoPE: Qwen3.5 reading images), positions are [3, T] (t, h, w) and each
    frequency turns by one of them (`mrope_axes`). Returns a new tensor; the Triton kernel may work in place, so
    callers must not rely on `x` keeping its value."""
    cos, sin = rope_cos_sin(positions, x.shape[-1], theta, rotated, sections)
    cos, sin = cos[:, None, :], sin[:, None, :]  # [T, 1, D]
    x32 = x.float()
    half = x.shape[-1] // 2
    rotated = torch.cat((-x32[..., half:], x32[..., :half]), dim=-1)
    return (x32 * cos + rotated * sin).to(x.dtype)


def tree_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    ends: torch.Tensor,
    positions: torch.Tensor,
    spans: tuple[tuple[int, int], ...],
    *,
    scale: float,
    window: int | None,
    quant: ActivationQuant | None = None,
    firsts: torch.Tensor | None = None,
) -> torch.Tensor:
    """q: [T, H, D], k, v: [T, Hk, D] (H a multiple of Hk), ends: [T] int32, positions: [T] int64 -> [T, H, D];
    with `quant`, the float32 result quantized for the output projection (`ActivationQuant.reference`).

    `firsts` ([T] int32, a pass with image blocks): key j is seen from row firsts[j] on rather than from j, so
    the rows of an image block (firsts = the block's first row) see each other both ways; None means firsts[j] = j.

    Query i attends key j iff j <= i < ends[j], both lie in the same span, and (with a window)
    positions[i] - positions[j] < window: the rule of transformers' sliding-window mask
    (kv_idx > q_idx - sliding_window), measured in positions so it follows each branch of the tree.
    Rows outside every span (padding) attend only to themselves. Softmax in float32; output in q.dtype.

    Per span, each block of QUERY_BLOCK queries reads only the keys it can see, gathered once per layer per block
    for all heads ([Hk, K, D]); a query group's heads share a batched product against them (no copy per head); the
    blocks' key lists and masks (an additive 0 / -inf bias) depend on the launch alone, so they are made once for
    every layer of a forward (`_attention_plan`). Short spans side by side within QUERY_BLOCK rows (prompts packed
    row to row, /v1/completions' echo) are one block, each span masked from the others: a pass of a thousand
    prompts makes a few products per layer, not one per prompt."""
    T, H, D = q.shape
    Hk = k.shape[1]
    if H % Hk:
        raise ValueError(f"tree_attention: {H} query heads is not a multiple of {Hk} key/value heads")
    if k.shape != (T, Hk, D) or v.shape != (T, Hk, D):
        raise ValueError(f"tree_attention: q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)} disagree")
    group = H // Hk
    dtype = torch.float32 if quant is not None else q.dtype
    if firsts is None:  # text only: the launch's plan, made once for every layer
        out = torch.empty((T, H, D), dtype=dtype, device=q.device)
        plan = _attention_plan(ends, positions, spans, window, group)
        if plan.padding.numel():  # a softmax over the row's own key alone is 1, so the output is that row's value
            out[plan.padding] = v[plan.padding].repeat_interleave(group, dim=1).to(dtype)
        for (start, stop), blocks in zip(plan.ranges, plan.blocks):
            S = stop - start
            q_span = q[start:stop].float().reshape(S, Hk, group, D).transpose(0, 1).contiguous()  # [Hk, S, G, D]
            k_span = k[start:stop].float().transpose(0, 1).contiguous()  # [Hk, S, D]
            v_span = v[start:stop].float().transpose(0, 1).contiguous()  # [Hk, S, D]
            out_span = torch.empty((Hk, S, group, D), dtype=torch.float32, device=q.device)
            for lo, hi, keys, bias in blocks:  # offsets in the span; bias [B * G, K]
                q_block = q_span[:, lo:hi].reshape(Hk, (hi - lo) * group, D)  # rows: query-major, then group
                k_block, v_block = k_span.index_select(1, keys), v_span.index_select(1, keys)  # [Hk, K, D]
                # softmax(q k^T * scale + bias) v in one fused kernel (torch's CPU flash attention: the scores are
                # never written out; 1.5x the three products' speed on 2 cores, within 4e-7 of them)
                block_out = F.scaled_dot_product_attention(q_block[None], k_block[None], v_block[None],
                                                           attn_mask=bias, scale=scale)[0]  # [Hk, B * G, D]
                out_span[:, lo:hi] = block_out.view(Hk, hi - lo, group, D)
            out[start:stop] = out_span.transpose(0, 1).reshape(S, H, D).to(dtype)
    else:  # image blocks (firsts): each block's visible keys found per layer
        out = v.repeat_interleave(group, dim=1).to(dtype).clone()  # [T, H, D]
        for start, stop in spans:
            k_span = k[start:stop].float()  # [S, Hk, D]
            v_span = v[start:stop].float()  # [S, Hk, D]
            key_end = ends[start:stop].long()  # [S]
            key_first = None if firsts is None else firsts[start:stop].long()  # [S]
            for q_start in range(start, stop, QUERY_BLOCK):
                q_stop = min(q_start + QUERY_BLOCK, stop)
                query_index = torch.arange(q_start, q_stop, device=q.device)[:, None]  # [B, 1]
                if key_first is None:
                    # keys after the block's last query, or whose subtree ends before its first, are never visible
                    keys = torch.nonzero(key_end[: q_stop - start] > q_start).squeeze(1)  # [K] offsets in the span
                    first = (keys + start)[None, :]  # [1, K]
                else:  # keys first seen after the block's last query, or whose subtree ends before its first
                    keys = torch.nonzero((key_end > q_start) & (key_first < q_stop)).squeeze(1)  # [K]
                    first = key_first[keys][None, :]
                key_index = keys + start  # [K]
                visible = (first <= query_index) & (query_index < key_end[keys][None, :])  # [B, K]
                if window is not None:
                    distance = positions[q_start:q_stop, None] - positions[key_index][None, :]
                    visible &= distance < window
                q_block = q[q_start:q_stop].float().reshape(q_stop - q_start, Hk, group, D)
                q_block = q_block.permute(1, 2, 0, 3)  # [Hk, G, B, D]
                k_block = k_span[keys].permute(1, 0, 2)[:, None]  # [Hk, 1, K, D]
                v_block = v_span[keys].permute(1, 0, 2)[:, None]  # [Hk, 1, K, D]
                scores = torch.matmul(q_block, k_block.transpose(-1, -2)) * scale  # [Hk, G, B, K]
                scores = scores.masked_fill(~visible, float("-inf"))
                weights = torch.softmax(scores, dim=-1)
                block_out = torch.matmul(weights, v_block)  # [Hk, G, B, D]
                out[q_start:q_stop] = block_out.permute(2, 0, 1, 3).reshape(q_stop - q_start, H, D).to(dtype)
    return quant.reference(out) if quant is not None else out


class _Plan:
    """A launch's attention blocks: per row range (a span, or short spans side by side: `_ranges`), (lo, hi,
    keys [K] int64, bias [B * G, K] float32: each query's row repeated for the G heads of its group) offsets in the
    range, and the padding rows [P] int64."""

    def __init__(self, ends: torch.Tensor, positions: torch.Tensor, spans, window: int | None, group: int) -> None:
        device = ends.device
        covered = torch.zeros(ends.shape[0], dtype=torch.bool, device=device)
        self.ranges, self.blocks = [], []
        for members in _ranges(spans):
            start, stop = members[0][0], members[-1][1]
            covered[start:stop] = True
            key_end = ends[start:stop].long()
            # which span each row of the range is in (-1: padding between them, which sees only itself)
            span_of = torch.full((stop - start,), -1, dtype=torch.long, device=device)
            for k, (lo, hi) in enumerate(members):
                span_of[lo - start:hi - start] = k
            blocks = []
            for lo in range(0, stop - start, QUERY_BLOCK):
                hi = min(lo + QUERY_BLOCK, stop - start)
                # keys after the block's last query, or whose subtree ends before its first, are never visible
                keys = torch.nonzero(key_end[:hi] > lo + start).squeeze(1)  # [K]
                query = torch.arange(lo, hi, device=device)[:, None]  # [B, 1]
                visible = (keys[None, :] <= query) & (query + start < key_end[keys][None, :])  # [B, K]
                if len(members) > 1:
                    same = span_of[lo:hi, None] == span_of[keys][None, :]
                    visible = (visible & same & (span_of[keys][None, :] >= 0)) | (keys[None, :] == query)
                if window is not None:
                    visible &= (positions[start + lo:start + hi, None] - positions[start + keys][None, :]) < window
                bias = torch.zeros(visible.shape, dtype=torch.float32, device=device).masked_fill_(~visible,
                                                                                                   float("-inf"))
                blocks.append((lo, hi, keys, bias.repeat_interleave(group, 0) if group > 1 else bias))
            self.ranges.append((start, stop))
            self.blocks.append(blocks)
        self.padding = torch.nonzero(~covered).squeeze(1)


def _ranges(spans) -> list[list[tuple[int, int]]]:
    """The spans in row ranges of attention: consecutive spans whose rows from the first's start to the last's stop
    are at most QUERY_BLOCK, together; any other span alone (so a span at the block of 128 rows, every score pass's
    content, is always alone, and its blocks are what they were before ranges)."""
    ranges: list[list[tuple[int, int]]] = []
    for span in spans:
        if ranges and span[1] - ranges[-1][0][0] <= QUERY_BLOCK and span[0] >= ranges[-1][-1][1]:
            ranges[-1].append(span)
        else:
            ranges.append([span])
    return ranges


# The last plans made, per window: every layer of a forward asks for the same ones (a sliding-window model for two).
_PLANS: dict[tuple[int | None, int], tuple] = {}


def _attention_plan(ends: torch.Tensor, positions: torch.Tensor, spans, window: int | None, group: int) -> _Plan:
    """The `_Plan` of a launch, reused while the ends, positions, spans and QUERY_BLOCK are the ones it was made
    from (compared by value: staging buffers are reused with new contents)."""
    kept = _PLANS.get((window, group))
    if kept is not None:
        kept_ends, kept_positions, kept_spans, block, plan = kept
        if (block == QUERY_BLOCK and kept_spans == spans and kept_ends.shape == ends.shape
                and kept_ends.device == ends.device and torch.equal(kept_ends, ends)
                and (window is None or torch.equal(kept_positions, positions))):
            return plan
    plan = _Plan(ends, positions, spans, window, group)
    _PLANS[(window, group)] = (ends.clone(), positions.clone(), tuple(spans), QUERY_BLOCK, plan)
    return plan


def gated_act(gate: torch.Tensor, up: torch.Tensor, kind: Literal["silu", "gelu_tanh"],
              quant: ActivationQuant | None = None) -> torch.Tensor:
    """gate, up: [T, F] -> act(gate) * up, [T, F] in gate.dtype; act is SiLU or GELU with the tanh
    approximation. Computed in float32; with `quant`, the float32 result quantized for the down projection."""
    gate32 = gate.float()
    if kind == "silu":
        activated = F.silu(gate32)
    elif kind == "gelu_tanh":
        activated = F.gelu(gate32, approximate="tanh")
    else:
        raise ValueError(f"gated_act: unknown activation {kind!r}; use 'silu' or 'gelu_tanh'")
    product = activated.mul_(up.float())  # activated is a new tensor of its own: multiplied in place
    if quant is not None:
        return quant.reference(product)
    return product.to(gate.dtype)


def answer_logprobs(
    hidden: torch.Tensor, lm_head: torch.Tensor, read_row: torch.Tensor, read_token: torch.Tensor,
    softcap: float | None = None,
) -> torch.Tensor:
    """hidden: [R, D] (final-normed answer rows), lm_head: [V, D], read_row, read_token: [N] int64 -> [N] float32:
    log_softmax over the vocabulary of row read_row[k], taken at read_token[k]. The matmul runs in the
    weights' dtype, or as a split product where hidden is float32 and the head half (`split_product.head_logits`);
    the softmax in float32. With `softcap`, the logits are softcap * tanh(logits / softcap) first (Gemma 4).
    More than HEAD_ROWS rows (only a content alone in a pass longer than the CPU's budget has them) run HEAD_ROWS at a
    time, so the [R, V] logits stay bounded (2,048 x 262k floats at Gemma's vocabulary: 2 GiB)."""
    if hidden.shape[0] > HEAD_ROWS:
        out = torch.empty(read_row.shape, dtype=torch.float32, device=hidden.device)  # [N]
        for start in range(0, hidden.shape[0], HEAD_ROWS):
            these = (read_row >= start) & (read_row < start + HEAD_ROWS)
            out[these] = answer_logprobs(hidden[start:start + HEAD_ROWS], lm_head, read_row[these] - start,
                                         read_token[these], softcap)
        return out
    logits = soft_cap(split_product.head_logits(hidden, lm_head), softcap)  # [R, V] float32
    logprobs = torch.log_softmax(logits, dim=-1)
    return logprobs[read_row, read_token]


def soft_cap(logits: torch.Tensor, cap: float | None) -> torch.Tensor:
    """cap * tanh(logits / cap), computed in logits' dtype (None: logits unchanged)."""
    return logits if cap is None else torch.tanh(logits / cap) * cap


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
    """Attention of new decode rows (`kernels.decode_attention` has the full contract): q [N, H, D]; each row n
    sees the pool rows table[row_table[n], :table_count[row_table[n]]] of pool_k/pool_v [P, Hk, D] and the first
    row_own[n] rows of its slot's own_k/own_v [S, G, Hk, D] (positions: pool [P], own [S, G], rows [N]); with a
    window, only rows fewer than `window` positions back. -> [N, H, D] in q.dtype; softmax in float32.

    Dense over the pool (one [N, P] visibility mask), which is cheap for the CPU's small pools."""
    N, H, D = q.shape
    P, Hk = pool_k.shape[0], pool_k.shape[1]
    G = own_k.shape[1]
    group = H // Hk
    row_table, row_slot = row_table.long(), row_slot.long()
    counts = table_count.long()[row_table]  # [N]
    width = int(counts.max()) if N else 0
    listed = table[row_table, :width].long()  # [N, width]
    valid = torch.arange(width, device=q.device)[None, :] < counts[:, None]
    see_pool = torch.zeros((N, P + 1), dtype=torch.bool, device=q.device)  # column P takes the invalid entries
    see_pool.scatter_(1, torch.where(valid, listed, P), True)
    see_pool = see_pool[:, :P]
    see_own = torch.arange(G, device=q.device)[None, :] < row_own.long()[:, None]  # [N, G]
    own_pos = own_positions[row_slot]  # [N, G]
    if window is not None:
        see_pool &= (positions[:, None] - pool_positions[None, :]) < window
        see_own &= (positions[:, None] - own_pos) < window
    q32 = q.float().reshape(N, Hk, group, D)
    scores_pool = torch.einsum("nhgd,phd->nhgp", q32, pool_k.float()) * scale  # [N, Hk, g, P]
    k_own, v_own = own_k[row_slot].float(), own_v[row_slot].float()  # [N, G, Hk, D]
    scores_own = torch.einsum("nhgd,nthd->nhgt", q32, k_own) * scale  # [N, Hk, g, G]
    scores_pool = scores_pool.masked_fill(~see_pool[:, None, None, :], float("-inf"))
    scores_own = scores_own.masked_fill(~see_own[:, None, None, :], float("-inf"))
    weights = torch.softmax(torch.cat((scores_pool, scores_own), dim=-1), dim=-1)
    out = torch.einsum("nhgp,phd->nhgd", weights[..., :P], pool_v.float())
    out = out + torch.einsum("nhgt,nthd->nhgd", weights[..., P:], v_own)
    return out.reshape(N, H, D).to(q.dtype)
