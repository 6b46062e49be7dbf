"""The answer head (Triton log-sum-exp statistics, interpreted) against the reference log-softmax."""

from __future__ import annotations

import torch

from spinfc.backend.kernels import answer_head


def test_answer_logprobs_match_the_reference(seed):
    g = torch.Generator().manual_seed(seed)
    rows, dim, vocab, reads = 5, 32, 5000, 11  # vocab spans several blocks with a ragged last one
    hidden = torch.randn(rows, dim, generator=g)
    lm_head = torch.randn(vocab, dim, generator=g)
    read_row = torch.randint(0, rows, (reads,), generator=g)
    read_token = torch.randint(0, vocab, (reads,), generator=g)
    got = answer_head.answer_logprobs(hidden, lm_head, read_row, read_token)
    want = answer_head.reference(hidden, lm_head, read_row, read_token)
    assert got.dtype == torch.float32 and got.shape == (reads,)
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-5)


def test_row_logsumexp_handles_extreme_rows():
    logits = torch.full((3, 3000), -1e4)
    logits[0, 17] = 50.0
    logits[1] = torch.linspace(-80, 80, 3000)
    logits[2, :] = float("-inf")
    logits[2, 2999] = 0.0  # the one finite value is in the ragged last block
    torch.testing.assert_close(answer_head.row_logsumexp(logits), torch.logsumexp(logits, dim=-1))
