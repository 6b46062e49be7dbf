"""Extraction on a random-weight Gemma 4 snapshot (PLE and KV-shared layers, where a decode must read its source
layers' rows; with a real tokenizer) through the engine, against transformers on the same weights: <gen> is
transformers' greedy decode, and every answer found (text, number, generated) has transformers' logprob of the
same continuation, on the content and on the floor. (Random weights rarely close a quoted text answer within its
token bound, so unlike the packaged models' test this one does not require text answers to exist.)
tests/extract/test_decode_random.py checks the decode of all three feature sets against their tree forward."""

from __future__ import annotations

import pytest
import torch

from spinfc.runtime.extract.answers import Generated, Searched
from spinfc.runtime.load.loader import load_model
from tests.extract.test_parity_packaged import (  # noqa: F401 (the fixture and the test run here on Gemma 4)
    TOLERANCE,
    _entries,
    hf_logprob,
    scored,
    test_gen_is_transformers_greedy,
)
from tests.runtime.gemma4_shapes import GEMMA4_FAMILIES, write_snapshot

pytestmark = pytest.mark.slow  # a 262k-token vocabulary and an engine


@pytest.fixture(scope="module", params=GEMMA4_FAMILIES[:1])
def pair(request, tmp_path_factory):
    directory = tmp_path_factory.mktemp(request.param)
    theirs = write_snapshot(request.param, directory)
    return load_model(str(directory), dtype=torch.float32, device="cpu"), theirs


def test_every_answer_found_has_transformers_logprob(pair, scored):
    _, theirs = pair
    checked = 0
    for content, floor, question, entry in _entries(scored):
        prefix = content.tokens + question.tokens
        if isinstance(entry, Searched):
            for answer in entry.answers:
                assert abs(answer.logprob - hf_logprob(theirs, prefix, answer.tokens)) < TOLERANCE
                floor_prefix = floor.tokens + question.tokens
                assert abs(answer.floor_logprob - hf_logprob(theirs, floor_prefix, answer.tokens)) < TOLERANCE
                checked += 1
        if isinstance(entry, Generated):
            assert abs(entry.logprob - hf_logprob(theirs, prefix, entry.tokens)) < TOLERANCE
            checked += 1
    assert checked >= 2  # at least each content's generated answer
