"""The Triton ops namespace is a drop-in for the reference: the same names with the same parameters."""

from __future__ import annotations

import inspect

from spinfc.backend import reference, triton_ops

OPS = ["rms_norm", "add_rms_norm", "apply_rope", "tree_attention", "gated_act", "answer_logprobs"]


def test_same_names_and_parameters_as_the_reference():
    for name in OPS:
        want = inspect.signature(getattr(reference, name)).parameters
        got = inspect.signature(getattr(triton_ops, name)).parameters
        assert list(got) == list(want), name
        assert [p.kind for p in got.values()] == [p.kind for p in want.values()], name
