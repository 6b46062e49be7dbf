"""Gemma 3 with its vision tower (random weights of a tiny real-shaped config) through spinfc's whole path (the
request's image part, read-media, tokenize, segment, the runner's packed pass) against transformers'
Gemma3ForConditionalGeneration on the same processed inputs (the same token ids and pixel values), one sequence
per question and option. A text-only content shares the pass."""

from __future__ import annotations

import pytest
import torch

from spinfc import compiler
from spinfc.frontend import program_from_request
from spinfc.media import MediaPolicy
from spinfc.passes import PassContext
from spinfc.runtime.launch.runner import Runner, SegmentArrays
from spinfc.runtime.load.loader import load_model
from spinfc.runtime.towers import MediaReader
from spinfc.shapes import Shapes

from .snapshots import data_url, gemma3_snapshot, png

TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def gemma3(tmp_path_factory):
    directory = tmp_path_factory.mktemp("gemma3-vision")
    theirs, tokenizer = gemma3_snapshot(directory)
    return load_model(str(directory)), theirs, tokenizer


def body(seed: int) -> dict:
    image = {"type": "image_url", "image_url": {"url": data_url(png(45, 30, seed))}}
    queries = [{"id": "red", "template": "Is it red? Answer:<?>", "options": [" yes", " no"]},
               {"id": "kind", "template": "\nKind:<?>", "options": [" cat", " dog", " a car"]}]
    return {"inputs": [
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "Look at this:"}, image,
                                                   {"type": "text", "text": "What is shown?"}]}]},
        {"messages": [{"role": "user", "content": "No picture here, only text."}]},
        {"messages": [{"role": "user", "content": [image, {"type": "text", "text": "Again."}, image]}]},
    ], "scoring": {"queries": queries}}


def spinfc_logprobs(model, tokenizer, request: dict):
    shapes = Shapes(budget=1024, block=64)
    ctx = PassContext(tokenizer=tokenizer, shapes=shapes, media=MediaReader(model.towers, MediaPolicy(), tokenizer))
    program = compiler.compile(program_from_request(request, model="gemma3"), ctx, until="segment", verify=True)
    runner = Runner(model, shapes)
    got = runner.collect(runner.launch([SegmentArrays.of(segment) for segment in program.segments]))
    reads = [read for segment in program.segments for read in segment.reads]
    return program, dict(zip(((r.content, r.question, r.option, r.step) for r in reads), got))


@torch.inference_mode()
def transformers_logprobs(theirs, program) -> dict:
    want = {}
    image_token = theirs.config.image_token_index
    for index, content in enumerate(program.contents):
        pixels = [piece.read.inputs["pixel_values"] for piece in content.media]
        for qi, question in enumerate(program.questions):
            for oi, option in enumerate(question.slot.options):
                ids = torch.tensor([content.tokens + question.tokens + option.tokens])
                extra = {}
                if pixels:
                    extra = {"pixel_values": torch.stack(pixels), "token_type_ids": (ids == image_token).long()}
                logits = theirs(input_ids=ids, **extra).logits[0].float()
                logprobs = torch.log_softmax(logits, dim=-1)
                start = len(content.tokens) + len(question.tokens) - 1
                for step, token in enumerate(option.tokens):
                    want[(index, qi, oi, step)] = logprobs[start + step, token].item()
    return want


def test_image_questions_match_transformers(gemma3, seed):
    ours, theirs, tokenizer = gemma3
    program, got = spinfc_logprobs(ours, tokenizer, body(seed))
    assert program.stat("media") == 3
    want = transformers_logprobs(theirs, program)
    assert set(want) <= set(got)
    difference = max(abs(got[key] - want[key]) for key in want)
    print(f"gemma3 vision: max |logprob - transformers| = {difference:.2e} over {len(want)} reads")
    assert difference < TOLERANCE


def test_the_image_changes_the_scores(gemma3):
    """The tower's embeddings reach the questions (a different image, different scores), and the image block's
    two-way attention matters (scores with a causal mask over the image differ)."""
    ours, theirs, tokenizer = gemma3
    _, first = spinfc_logprobs(ours, tokenizer, body(1))
    _, second = spinfc_logprobs(ours, tokenizer, body(2))
    image_reads = [key for key in first if key[0] == 0]
    assert max(abs(first[k] - second[k]) for k in image_reads) > 1e-3
    text_reads = [key for key in first if key[0] == 1]
    assert max(abs(first[k] - second[k]) for k in text_reads) == 0.0  # the text-only content is not disturbed


@pytest.fixture(scope="module")
def gemma3_outside(tmp_path_factory):
    """The same model with its image token id one past the text vocabulary (issue 38, item 3): the ids are read as
    0 before the embedding, as transformers reads them, and the rows are then the tower's."""
    from .snapshots import VOCAB

    directory = tmp_path_factory.mktemp("gemma3-vision-outside")
    theirs, tokenizer = gemma3_snapshot(directory, image_token_index=VOCAB)
    return load_model(str(directory)), theirs, tokenizer


def test_an_image_token_id_outside_the_embedding_is_read_as_transformers_reads_it(gemma3_outside):
    ours, theirs, tokenizer = gemma3_outside
    assert theirs.config.image_token_index >= theirs.config.text_config.vocab_size
    program, got = spinfc_logprobs(ours, tokenizer, body(3))
    assert program.stat("media") == 3
    want = transformers_logprobs(theirs, program)
    assert set(want) <= set(got)
    assert max(abs(got[key] - want[key]) for key in want) < TOLERANCE
