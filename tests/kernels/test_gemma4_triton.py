"""The Gemma 4 stacks (tests/runtime/gemma4_shapes.py: PLE and shared K/V, k = v with 512-wide full heads, MoE) on
the Triton ops through the interpreter, fused as on CUDA, against the same weights on the reference ops: the same
logprobs of a pass laid out by spinfc's passes."""

from __future__ import annotations

import pytest
import torch

from spinfc.backend import reference, triton_ops
from spinfc.runtime.models import build_model
from spinfc.runtime.models.families import from_hf

from tests.runtime.gemma4_shapes import GEMMA4_FAMILIES, gemma4_config, randomize

from .test_fused_model import _launch

pytestmark = pytest.mark.slow  # kernels through the interpreter on whole models


@pytest.mark.parametrize("family", GEMMA4_FAMILIES)
def test_triton_ops_match_the_reference(family, seed):
    from transformers import Gemma4ForCausalLM

    torch.manual_seed(seed)
    hf_config = gemma4_config(family, vocab=101)
    theirs = Gemma4ForCausalLM(hf_config).eval()
    randomize(theirs)
    state = {name: tensor.detach().clone() for name, tensor in theirs.state_dict().items()}
    config = from_hf(hf_config.to_dict())
    launch = _launch(config.vocab, seed)
    want = build_model(config, dict(state), ops=reference, weights_hash="random").forward(launch)
    fused = build_model(config, dict(state), ops=triton_ops, weights_hash="random", fuse=True)
    got = fused.forward(launch)
    assert (got - want).abs().max().item() < 1e-4, f"seed {seed}"
