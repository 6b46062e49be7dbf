"""A step's candidates as a walker reads them (`beams.Part`): each row's best k copied from the device, then the full
rows only when the walker reads past what the copied ones prove, in one order whatever k is: best first, ties by
row, then token."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from spinfc.runtime.extract.beams import Part


def _part(totals: torch.Tensor, k: int) -> tuple[Part, list]:
    fetched = []

    def full():
        fetched.append(True)
        return totals

    values, tokens = torch.topk(totals, k, dim=-1)
    return Part(values.numpy(), tokens.numpy(), totals.shape[1], full), fetched


@pytest.mark.parametrize("k", [1, 3, 8, 40])
def test_candidates_come_in_the_full_order_whatever_k(k, seed):
    g = torch.Generator().manual_seed(seed)
    rows, vocab = 3, 40
    # few distinct values (many ties) and masked tokens, as a grammar mask leaves them
    totals = torch.randint(-6, 0, (rows, vocab), generator=g).float()
    totals[torch.rand(rows, vocab, generator=g) < 0.4] = -float("inf")
    part, fetched = _part(totals, k)
    want = sorted(((float(totals[r, t]), r, t) for r in range(rows) for t in range(vocab)),
                  key=lambda c: (-c[0], c[1], c[2]))
    got = list(part.ordered())
    finite = [c for c in want if c[0] != -float("inf")]
    assert got[:len(finite)] == finite, f"seed {seed}"
    assert len(got) == len(finite) + 1 and got[-1][0] == -float("inf")  # the first masked one ends the stream
    # reading only the candidates the copied ones prove best never fetches the full rows
    few, fetched_few = _part(totals, k)
    proven = sum(1 for value in few.values.ravel() if value > few.threshold)
    taken = list(itertools.islice(few.ordered(), proven))
    assert not fetched_few and taken == finite[:proven]


def test_a_walker_reading_one_candidate_fetches_nothing():
    totals = torch.tensor([[-1.0, -3.0, -2.0, -5.0], [-4.0, -0.5, -6.0, -7.0]])
    part, fetched = _part(totals, 2)
    assert next(part.ordered()) == (-0.5, 1, 1)
    assert not fetched and np.isclose(part.threshold, -2.0)
