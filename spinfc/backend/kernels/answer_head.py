"""The answer head: logits only at the answer rows (a torch/cuBLAS matmul of the gathered rows), then a Triton
kernel that reduces each row to its log-sum-exp over the vocabulary, and the gather of the scored tokens.

Nothing of size [rows, V] is written besides the logits of the R answer rows themselves; the statistics are one
float per row. A row's statistics depend on that row alone (one program walks its vocabulary in a fixed order)."""

from __future__ import annotations

import triton
import triton.language as tl
import torch

from spinfc.backend import reference as _reference, split_product

BLOCK_V = 2048


@triton.jit
def _row_logsumexp_kernel(LOGITS, LSE, stride_r, V, BLOCK: tl.constexpr):
    """logits: [R, V] (any float dtype) -> lse: [R] float32. Per-lane running max and sum, merged at the end."""
    row = tl.program_id(0).to(tl.int64)
    m = tl.full([BLOCK], float("-inf"), tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, V, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(LOGITS + row * stride_r + cols, mask=cols < V, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        s = s * tl.exp(m - m_safe) + tl.exp(x - m_safe)
        m = m_new
    top = tl.max(m, axis=0)
    total = tl.sum(s * tl.exp(m - top), axis=0)
    tl.store(LSE + row, top + tl.log(total))


def row_logsumexp(logits: torch.Tensor) -> torch.Tensor:
    """logits: [R, V] with a unit last stride -> [R] float32 log-sum-exp of each row."""
    if logits.dim() != 2 or logits.stride(1) != 1:
        raise ValueError(f"row_logsumexp: logits must be [R, V] with a unit last stride; got {tuple(logits.shape)}")
    R, V = logits.shape
    lse = torch.empty(R, dtype=torch.float32, device=logits.device)
    _row_logsumexp_kernel[(R,)](logits, lse, logits.stride(0), V, BLOCK=BLOCK_V, num_warps=8)
    return lse


def _logits(hidden: torch.Tensor, lm_head: torch.Tensor) -> torch.Tensor:
    """hidden: [R, D], lm_head: [V, D] -> [R, V] logits: a split product (float32) where hidden is float32 and the
    head half (the mixed policy, `split_product`); else in the head's dtype (hidden cast to it), written in float32
    where that is half on CUDA."""
    if split_product.is_split(hidden, lm_head):
        return split_product.split_mm(hidden, lm_head)
    hidden = hidden.to(lm_head.dtype)
    if lm_head.is_cuda and lm_head.dtype in split_product.HALVES:
        return split_product.mm_float32(hidden, lm_head)
    return torch.matmul(hidden, lm_head.t())


def answer_logprobs(
    hidden: torch.Tensor, lm_head: torch.Tensor, read_row: torch.Tensor, read_token: torch.Tensor,
    softcap: float | None = None,
) -> torch.Tensor:
    """hidden: [R, D] final-normed answer rows, lm_head: [V, D], read_row, read_token: [N] int64 -> [N] float32:
    log p(read_token[k] | row read_row[k]). The matmul's operands are in the weights' dtype (as the reference's
    are), or a float32 hidden is split in two half parts (`_logits`); on CUDA its bf16/fp16 products are
    accumulated and written in float32, so the logits are not rounded to bf16 (a logit near 20 would otherwise lose
    up to 0.06). With `softcap`, the logits are softcap * tanh(logits / softcap) first (in torch: one more pass
    over the answer rows' logits, in float32)."""
    if hidden.dim() != 2 or lm_head.dim() != 2 or hidden.shape[1] != lm_head.shape[1]:
        raise ValueError(f"answer_logprobs: hidden {tuple(hidden.shape)} and lm_head {tuple(lm_head.shape)} "
                         "must be [R, D] and [V, D]")
    if read_row.shape != read_token.shape or read_row.dim() != 1:
        raise ValueError("answer_logprobs: read_row and read_token must both be [N]")
    logits = _logits(hidden, lm_head)  # [R, V]: the answer rows only
    if softcap is not None:
        logits = _reference.soft_cap(logits.float(), softcap)
    lse = row_logsumexp(logits)  # [R]
    return logits[read_row, read_token].float() - lse[read_row]


reference = _reference.answer_logprobs
