"""The branch delta-rule kernel (Triton, interpreted) against its PyTorch reference: short segments, each from a
state taken by index (some from none), value heads grouped over key heads, some final states kept."""

from __future__ import annotations

import torch

from spinfc.backend.kernels.branch_delta import branch_delta, branch_delta_reference


def test_branch_delta_matches_the_reference(seed):
    g = torch.Generator().manual_seed(seed)
    lengths = [3, 1, 5, 2]
    n, Hk, Hv, Dk, Dv = sum(lengths), 1, 2, 16, 32
    q, k = (torch.randn(n, Hk, Dk, generator=g) for _ in range(2))
    v = torch.randn(n, Hv, Dv, generator=g)
    decay = -torch.rand(n, Hv, generator=g)
    beta = torch.rand(n, Hv, generator=g)
    states = torch.randn(2, Hv, Dk, Dv, generator=g)
    index = torch.tensor([1, 0, -1, 1])
    keep = torch.tensor([-1, 0, 1, -1])
    cu = [0, 3, 4, 9, 11]
    out, finals = branch_delta(q, k, v, decay, beta, cu, states, index, keep)
    want, want_finals = branch_delta_reference(q, k, v, decay, beta, cu, states, index, keep)
    torch.testing.assert_close(out, want, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(finals, want_finals, atol=1e-4, rtol=1e-4)


def test_a_pass_on_the_branch_kernel_equals_the_gathered_states(monkeypatch, seed):
    """A pass's recurrence (two contents, questions with options of 1 to 3 tokens) with every level below the
    stems on the branch kernel: the same outputs, and the same states kept for extraction, as fla's way (each
    segment's initial state gathered), here the reference."""
    import types

    from spinfc.runtime.models import state_flow
    from tests.runtime.tree_launch import Case, Question, build_launch

    g = torch.Generator().manual_seed(seed)
    draw = lambda n: tuple(torch.randint(1, 50, (n,), generator=g).tolist())  # noqa: E731
    cases = [Case(draw(L), tuple(Question(draw(3), (draw(1), draw(3), draw(2))) for _ in range(2))) for L in (7, 4)]
    launch, _ = build_launch([(0, cases[0]), (32, cases[1])], 64)
    config = types.SimpleNamespace(linear=types.SimpleNamespace(conv_kernel=4))
    T, Hk, Hv, Dk, Dv = 64, 1, 2, 16, 32
    q, k = (torch.randn(T, Hk, Dk, generator=g) for _ in range(2))
    v = torch.randn(T, Hv, Dv, generator=g)
    decay, beta = -torch.rand(T, Hv, generator=g), torch.rand(T, Hv, generator=g)
    split = [7 + 3 - 1, 32 + 4 + 3 - 1]  # each content's first prompt row

    def run():
        record: dict = {}
        flow = state_flow.TreeFlow(config, launch, split, record)
        flow.conv(0, torch.randn(T, 8, generator=torch.Generator().manual_seed(0)), torch.ones(8, 4))
        return flow.delta(0, q, k, v, decay, beta), record

    want, want_kept = run()
    monkeypatch.setattr(state_flow, "_branches", lambda device, level: True)
    got, kept = run()
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
    assert sorted(kept[0]) == sorted(want_kept[0]) and len(kept[0]) == 2
    for row in kept[0]:
        torch.testing.assert_close(kept[0][row][1], want_kept[0][row][1], atol=1e-4, rtol=1e-4)
