"""How spinfc calls flash-linear-attention's gated delta rule (fla 0.6, pinned in the `gpu` extra), checked on the
CPU with stand-ins of fla's two entry points that keep fla 0.6's signatures and compute with spinfc's PyTorch
reference. fla itself runs only on CUDA (the H200 acceptance run checks its numbers).

The bug this guards: fla 0.6 put `gk` and `gv` between `g` and `beta` in `fused_recurrent_gated_delta_rule`, and a
`beta` given by position was read as per-key decays; at Qwen3.5-27B's widths that read past the tensor (an illegal
memory access in the extraction warm-up) and at small widths gave states off by 1.02 relative."""

from __future__ import annotations

import sys
import types

import pytest
import torch

from spinfc.backend import gated_delta as gd


def _as_rows(t):  # [B, T, ...] -> [B * T, ...]
    return t.reshape(-1, *t.shape[2:])


def chunk_gated_delta_rule(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
                           use_qk_l2norm_in_kernel=False, use_beta_sigmoid_in_kernel=False, allow_neg_eigval=False,
                           cu_seqlens=None, cu_seqlens_cpu=None, **kwargs):
    assert use_qk_l2norm_in_kernel and output_final_state and scale is None and not kwargs
    assert q.shape[0] == 1 and cu_seqlens is not None
    out, final = gd.reference(q[0], k[0], v[0], g[0], beta[0], cu_seqlens_cpu.tolist(), initial_state)
    return out[None], final


def fused_recurrent_gated_delta_rule(q, k, v, g=None, gk=None, gv=None, beta=None, scale=None, initial_state=None,
                                     output_final_state=False, use_qk_l2norm_in_kernel=False,
                                     use_gate_in_kernel=False, A_log=None, dt_bias=None,
                                     use_beta_sigmoid_in_kernel=False, allow_neg_eigval=False, state_v_first=False,
                                     cu_seqlens=None, **kwargs):
    assert gk is None and gv is None and beta is not None and g is not None, "beta must reach fla as `beta`"
    assert use_qk_l2norm_in_kernel and output_final_state and not state_v_first and cu_seqlens is None
    B, T = q.shape[:2]  # B sequences of T rows each
    cu = [b * T for b in range(B + 1)]
    out, final = gd.reference(_as_rows(q), _as_rows(k), _as_rows(v), _as_rows(g), _as_rows(beta), cu, initial_state)
    return out.reshape(B, T, *out.shape[1:]), final


@pytest.fixture
def fla_stand_in(monkeypatch):
    ops = types.ModuleType("fla.ops.gated_delta_rule")
    ops.chunk_gated_delta_rule = chunk_gated_delta_rule
    ops.fused_recurrent_gated_delta_rule = fused_recurrent_gated_delta_rule
    for name in ("fla", "fla.ops"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "fla.ops.gated_delta_rule", ops)


@pytest.mark.parametrize("lengths", [[1, 1, 1], [5, 1, 9]], ids=["decode-step", "packed"])
def test_the_fla_path_passes_every_tensor_where_fla_reads_it(fla_stand_in, lengths):
    generator = torch.Generator().manual_seed(0)
    Hk, Hv, D = 2, 6, 8
    n = sum(lengths)
    cu = [0]
    for length in lengths:
        cu.append(cu[-1] + length)
    q, k = (torch.randn(n, Hk, D, generator=generator) for _ in range(2))
    v = torch.randn(n, Hv, D, generator=generator)
    g, beta = -torch.rand(n, Hv, generator=generator) * 0.5, torch.rand(n, Hv, generator=generator)
    initial = torch.randn(len(lengths), Hv, D, D, generator=generator) * 0.1
    out, final = gd._fla(q, k, v, g, beta, cu, initial)
    want, want_final = gd.reference(q, k, v, g, beta, cu, initial)
    torch.testing.assert_close(out, want)
    torch.testing.assert_close(final, want_final)
