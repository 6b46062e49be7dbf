"""Extraction on random-weight Gemma 4 snapshots (the three feature sets of tests/runtime/gemma4_shapes.py, with a
real tokenizer) served by the engine, against transformers on the same weights: the checks of the packaged models'
extraction parity (test_parity_packaged.py), run on these models. Every answer's logprob is transformers' logprob
of the same continuation, the first text and number answers are what transformers' beam search ranks first, and
<gen> is transformers' greedy decode."""

from __future__ import annotations

import pytest
import torch

from spinfc.runtime.loader import load_model
from tests.extract.test_parity_packaged import (  # noqa: F401 (the fixture and the tests run here on Gemma 4)
    scored, test_every_answer_logprob_is_transformers, test_first_answer_is_transformers_beam_search,
    test_gen_is_transformers_greedy, test_number_answers_parse,
)
from tests.runtime.gemma4_shapes import GEMMA4_FAMILIES, write_snapshot

pytestmark = pytest.mark.slow  # a 262k-token vocabulary and transformers' beam search per question


# One feature set (PLE and KV-shared layers: where the decode must read its source layers' rows) keeps CI short;
# tests/extract/test_decode_random.py checks the decode of all three against their tree forward.
@pytest.fixture(scope="module", params=GEMMA4_FAMILIES[:1])
def pair(request, tmp_path_factory):
    directory = tmp_path_factory.mktemp(request.param)
    theirs = write_snapshot(request.param, directory)
    return load_model(str(directory), dtype=torch.float32, device="cpu"), theirs
