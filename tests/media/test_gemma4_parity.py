"""Gemma 4 with its vision and audio towers (random weights of a tiny config with the E2B feature set) through
spinfc's whole path against transformers' Gemma4ForConditionalGeneration on the same processed inputs: questions
about an image, an audio clip and a 4-frame video, with a text-only content in the same pass."""

from __future__ import annotations

import base64

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

from .snapshots import data_url, gemma4_snapshot, png, wav

TOLERANCE = 1e-4
SHAPES = Shapes(budget=2048, block=64)


@pytest.fixture(scope="module")
def gemma4(tmp_path_factory):
    directory = tmp_path_factory.mktemp("gemma4-towers")
    theirs, tokenizer = gemma4_snapshot(directory)
    return load_model(str(directory)), theirs, tokenizer


def request(seed: int) -> dict:
    image = {"type": "image_url", "image_url": {"url": data_url(png(40, 28, seed))}}
    audio = {"type": "input_audio", "input_audio": {"data": base64.b64encode(wav(0.6, seed=seed)).decode(),
                                                    "format": "wav"}}
    video = {"type": "video", "video": [data_url(png(24, 24, seed + k)) for k in range(4)]}
    text = lambda words: {"type": "text", "text": words}  # noqa: E731
    return {"inputs": [
        {"messages": [{"role": "user", "content": [text("Look:"), image, text("What is it?")]}]},
        {"messages": [{"role": "user", "content": [text("Listen:"), audio]}]},
        {"messages": [{"role": "user", "content": [video, text("What happens?")]}]},
        {"messages": [{"role": "user", "content": "Text alone."}]},
    ], "scoring": {"queries": [{"id": "yes", "template": "\nAnswer:<?>", "options": [" yes", " no", " maybe"]}]}}


def compiled(model, tokenizer, body: dict):
    """The request through `segment`, its media read (each piece's tower inputs and rows)."""
    ctx = PassContext(tokenizer=tokenizer, shapes=SHAPES, media=MediaReader(model.towers, MediaPolicy(), tokenizer))
    return compiler.compile(program_from_request(body, model="gemma4"), ctx, until="segment", verify=True)


def spinfc_scores(model, tokenizer, body: dict):
    program = compiled(model, tokenizer, body)
    runner = Runner(model, SHAPES)
    got = runner.collect(runner.launch([SegmentArrays.of(segment) for segment in program.segments]))
    reads = [read for segment in program.segments for read in segment.reads]
    return program, dict(zip(((r.content, r.question, r.option, r.step) for r in reads), got))


def hf_inputs(theirs, content) -> dict:
    inputs = {}
    for piece in content.media:
        read = piece.read
        if read.kind == "image":
            inputs["pixel_values"] = read.inputs["pixel_values"][None]
            inputs["image_position_ids"] = read.inputs["position_ids"][None]
        elif read.kind == "video":
            inputs["pixel_values_videos"] = read.inputs["pixel_values"]
            inputs["video_position_ids"] = read.inputs["position_ids"]
            inputs["num_frames_per_video"] = torch.tensor([read.inputs["pixel_values"].shape[0]])
        else:
            inputs["input_features"] = read.inputs["input_features"][None]
            inputs["input_features_mask"] = read.inputs["input_features_mask"][None]
    return inputs


@torch.inference_mode()
def transformers_scores(theirs, program) -> dict:
    c, want = theirs.config, {}
    for index, content in enumerate(program.contents):
        media = hf_inputs(theirs, content)
        for qi, question in enumerate(program.questions):
            for oi, option in enumerate(question.slot.options):
                ids = torch.tensor([content.tokens + question.tokens + option.tokens])
                kinds = (ids == c.image_token_id).long() + 2 * (ids == c.video_token_id).long() \
                    + 3 * (ids == c.audio_token_id).long()
                logits = theirs(input_ids=ids, mm_token_type_ids=kinds, **media).logits[0].float()
                logprobs = torch.log_softmax(logits, dim=-1)
                start = len(content.tokens) + len(question.tokens) - 1
                for step, token in enumerate(option.tokens):
                    want[(index, qi, oi, step)] = logprobs[start + step, token].item()
    return want


def test_image_audio_and_video_questions_match_transformers(gemma4, seed):
    ours, theirs, tokenizer = gemma4
    assert ours.towers.kinds == {"image", "audio", "video"}
    program, got = spinfc_scores(ours, tokenizer, request(seed % 1000))
    want = transformers_scores(theirs, program)
    for index, kind in enumerate(("image", "audio", "video", "text")):
        keys = [key for key in want if key[0] == index]
        difference = max(abs(got[key] - want[key]) for key in keys)
        print(f"gemma4 {kind}: max |logprob - transformers| = {difference:.2e} over {len(keys)} reads")
        assert difference < TOLERANCE, kind


def test_the_media_reach_the_questions(gemma4):
    ours, _, tokenizer = gemma4
    _, first = spinfc_scores(ours, tokenizer, request(1))
    _, second = spinfc_scores(ours, tokenizer, request(2))
    for index in range(3):
        assert max(abs(first[k] - second[k]) for k in first if k[0] == index) > 1e-4, index
    assert all(first[k] == second[k] for k in first if k[0] == 3)  # the text-only content is not disturbed


def test_a_pieces_embeddings_do_not_depend_on_its_neighbours(gemma4, seed):
    """The towers run fixed batches of pieces (`fixed_batches`), so an image's and a video's embeddings are the same
    bits alone and beside other media of a pass (what batch invariance on CUDA rests on; same shapes, same kernels)."""
    ours, _, tokenizer = gemma4
    program, extra = compiled(ours, tokenizer, request(seed % 1000)), compiled(ours, tokenizer, request(seed % 1000 + 1))
    reads = [piece.read for content in program.contents + extra.contents for piece in content.media]
    visual = [read for read in reads if read.kind in ("image", "video")]
    together = ours.towers.embed(visual, "cpu")
    start = 0
    for read in visual:
        alone = ours.towers.embed([read], "cpu")
        assert torch.equal(alone, together[start:start + len(read.embedded)]), read.kind
        start += len(read.embedded)
    assert start == len(together)
