"""Qwen3.5 with its vision tower (random weights of a tiny real-shaped config: Gated DeltaNet and gated attention
layers, M-RoPE) through spinfc's whole path (the request's image parts, read-media, tokenize, segment, the
runner's packed pass) against transformers' Qwen3_5ForConditionalGeneration on the same processed inputs (the same
token ids, pixel values and image grids; transformers' own `get_rope_index`), one sequence per question and option.
A text-only content shares the pass. Videos (a `video_url` file and a `video` list of frames) likewise, their
pixels and grids given as `pixel_values_videos` and `video_grid_thw`."""

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

from .snapshots import data_url, mp4, png, qwen3_5_snapshot

TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def qwen(tmp_path_factory):
    directory = tmp_path_factory.mktemp("qwen3_5-vision")
    theirs, tokenizer = qwen3_5_snapshot(directory)
    return load_model(str(directory)), theirs, tokenizer


def body(seed: int) -> dict:
    image = lambda w, h, k=0: {"type": "image_url", "image_url": {"url": data_url(png(w, h, seed + k))}}  # noqa: E731
    text = lambda words: {"type": "text", "text": words}  # noqa: E731
    queries = [{"id": "red", "template": "Is it red? Answer:<?>", "options": [" yes", " no"]},
               {"id": "kind", "template": "\nKind:<?>", "options": [" cat", " dog", " a car"]}]
    return {"inputs": [
        {"messages": [{"role": "user", "content": [text("Look at this:"), image(40, 28), text("What is shown?")]}]},
        {"messages": [{"role": "user", "content": "No picture here, only text."}]},
        {"messages": [{"role": "user", "content": [image(24, 40, 1), text("Again."), image(33, 33, 2)]}]},
    ], "scoring": {"queries": queries}}


def video_body(seed: int) -> dict:
    """A video file (10 frames at 4 a second: 5 sampled at 2 a second, 3 temporal patches), a list of 3 frames
    (2 temporal patches, the last frame repeated) beside an image, and text alone."""
    text = lambda words: {"type": "text", "text": words}  # noqa: E731
    video = {"type": "video_url", "video_url": {"url": data_url(mp4(10, 24, 16, seed), "video/mp4")}}
    frames = {"type": "video", "video": [data_url(png(20, 28, seed + 100 + k)) for k in range(3)]}
    image = {"type": "image_url", "image_url": {"url": data_url(png(24, 16, seed + 200))}}
    queries = [{"id": "moving", "template": "Is it moving? Answer:<?>", "options": [" yes", " no"]},
               {"id": "kind", "template": "\nKind:<?>", "options": [" cat", " dog", " a car"]}]
    return {"inputs": [
        {"messages": [{"role": "user", "content": [text("Watch this:"), video, text("What happens?")]}]},
        {"messages": [{"role": "user", "content": [frames, text("and"), image]}]},
        {"messages": [{"role": "user", "content": "No video here, only text."}]},
    ], "scoring": {"queries": queries}}


def compiled(model, tokenizer, request: dict):
    shapes = Shapes(budget=1024, block=64)
    ctx = PassContext(tokenizer=tokenizer, shapes=shapes, media=MediaReader(model.towers, MediaPolicy(), tokenizer))
    return compiler.compile(program_from_request(request, model="qwen3_5"), ctx, until="segment", verify=True)


def spinfc_logprobs(model, tokenizer, request: dict):
    program = compiled(model, tokenizer, request)
    runner = Runner(model, Shapes(budget=1024, block=64))
    got = runner.collect(runner.launch([SegmentArrays.of(segment) for segment in program.segments]))
    reads = [read for segment in program.segments for read in segment.reads]
    return program, dict(zip(((r.content, r.question, r.option, r.step) for r in reads), got))


def hf_media(theirs, content) -> dict:
    """A content's processed media as transformers takes them: images' and videos' pixels and grids apart."""
    out = {}
    for kind, pixels, grids in (("image", "pixel_values", "image_grid_thw"),
                                ("video", "pixel_values_videos", "video_grid_thw")):
        reads = [piece.read for piece in content.media if piece.read.kind == kind]
        if reads:
            out[pixels] = torch.cat([read.inputs["pixel_values"] for read in reads])
            out[grids] = torch.stack([read.inputs["grid_thw"] for read in reads])
    return out


def token_kinds(theirs, ids: torch.Tensor) -> torch.Tensor:
    """transformers' mm_token_type_ids: 1 for an image's pads, 2 for a video's, 0 for text."""
    return (ids == theirs.config.image_token_id).int() + 2 * (ids == theirs.config.video_token_id).int()


@torch.inference_mode()
def transformers_logprobs(theirs, program) -> dict:
    want = {}
    for index, content in enumerate(program.contents):
        media = hf_media(theirs, content)
        for qi, question in enumerate(program.questions):
            for oi, option in enumerate(question.slot.options):
                ids = torch.tensor([content.tokens + question.tokens + option.tokens])
                logits = theirs(input_ids=ids, mm_token_type_ids=token_kinds(theirs, ids), **media).logits[0].float()
                logprobs = torch.log_softmax(logits, dim=-1)
                start = len(content.tokens) + len(question.tokens) - 1
                for step, token in enumerate(option.tokens):
                    want[(index, qi, oi, step)] = logprobs[start + step, token].item()
    return want


@pytest.fixture(scope="module")
def qwen_moe(tmp_path_factory):
    directory = tmp_path_factory.mktemp("qwen3_5_moe-vision")
    theirs, tokenizer = qwen3_5_snapshot(directory, moe=True)
    return load_model(str(directory)), theirs, tokenizer


@pytest.mark.parametrize("variant", ["dense", "moe"])
def test_image_questions_match_transformers(qwen, qwen_moe, variant, seed):
    ours, theirs, tokenizer = qwen if variant == "dense" else qwen_moe
    assert ours.towers.kinds == {"image", "video"} and (ours.config.experts is not None) == (variant == "moe")
    program, got = spinfc_logprobs(ours, tokenizer, body(seed % 1000))
    assert program.stat("media") == 3
    want = transformers_logprobs(theirs, program)
    assert set(want) <= set(got)
    for index, kind in enumerate(("image", "text", "two images")):
        keys = [key for key in want if key[0] == index]
        difference = max(abs(got[key] - want[key]) for key in keys)
        print(f"qwen3_5 {variant} {kind}: max |logprob - transformers| = {difference:.2e} over {len(keys)} reads")
        assert difference < TOLERANCE, kind


def test_the_rows_positions_are_transformers_m_rope_positions(qwen):
    """A content's rows sit at the (t, h, w) transformers' `get_rope_index` gives it (text after an image continues
    from the image's max + 1), and every question row at its depth after the position transformers gives the first
    token after the content, in all three."""
    ours, theirs, tokenizer = qwen
    program = compiled(ours, tokenizer, body(0))
    check_rope_positions(program, theirs)


def check_rope_positions(program, theirs):
    question = program.questions[0].tokens
    for segment, content in zip(program.segments, program.contents):
        arrays, media, L = SegmentArrays.of(segment), hf_media(theirs, content), len(content.tokens)
        rope = arrays.rope_positions if media else arrays.positions[None].repeat(3, 0)
        ids = torch.tensor([content.tokens + question])
        if media:
            want = theirs.model.get_rope_index(ids, token_kinds(theirs, ids), media.get("image_grid_thw"),
                                               media.get("video_grid_thw"))[0][:, 0]
        else:
            want = torch.arange(ids.shape[1]).expand(3, -1)
        assert torch.equal(torch.from_numpy(rope[:, :L]), want[:, :L]), content.id
        after = torch.from_numpy(segment_depths(segment).copy()) + want[:, L:L + 1]  # [3, tree rows]
        assert torch.equal(torch.from_numpy(rope[:, L:]), after), content.id
        assert torch.equal(torch.from_numpy(arrays.positions), torch.from_numpy(rope[0]))


def segment_depths(segment):
    from spinfc.runtime.admit.segment_arrays import TreeArrays

    return TreeArrays.of(segment.tree).depths


def test_the_image_changes_the_scores(qwen):
    """The tower's embeddings reach the questions (a different image, different scores); the text-only content in
    the same pass is not disturbed."""
    ours, _, tokenizer = qwen
    _, first = spinfc_logprobs(ours, tokenizer, body(1))
    _, second = spinfc_logprobs(ours, tokenizer, body(2))
    for index in (0, 2):
        assert max(abs(first[k] - second[k]) for k in first if k[0] == index) > 1e-4, index
    assert all(first[k] == second[k] for k in first if k[0] == 1)


def test_a_pieces_embeddings_do_not_depend_on_its_neighbours(qwen):
    """The tower runs fixed batches of pieces of one grid (`fixed_batches`: images and a video's temporal patches),
    so an image's or a video's embeddings are the same bits alone and beside other pieces of a pass (same shapes,
    same kernels)."""
    ours, _, tokenizer = qwen
    reads = [piece.read for request in (body(0), video_body(0), body(5))
             for content in compiled(ours, tokenizer, request).contents for piece in content.media]
    together = ours.towers.embed(reads, "cpu")
    start = 0
    for read in reads:
        alone = ours.towers.embed([read], "cpu")
        assert torch.equal(alone, together[start:start + len(read.embedded)])
        start += len(read.embedded)
    assert start == len(together)


def test_text_rows_turn_by_m_rope_as_by_plain_rope(qwen):
    """A text pass given three equal positions per row (what every text row of a pass with images carries) scores
    the same bits as the plain rope path text passes take."""
    import dataclasses

    ours, _, tokenizer = qwen
    request = body(0)
    request["inputs"] = [request["inputs"][1]]
    program = compiled(ours, tokenizer, request)
    runner = Runner(ours, Shapes(budget=1024, block=64))
    launch, _ = runner.stage([SegmentArrays.of(segment) for segment in program.segments])
    assert launch.rope_positions is None
    plain = ours.forward(launch)
    three = dataclasses.replace(launch, rope_positions=launch.positions[None].repeat(3, 1))
    assert torch.equal(ours.forward(three), plain)


def test_without_media_the_text_stack_loads_alone(qwen, tmp_path_factory):
    """--no-media: the tower's weights are dropped, not loaded; a text content scores the same bits as beside a
    loaded tower, and an image part is refused naming the models that read images."""
    from spinfc.media import MediaError

    ours, _, tokenizer = qwen
    directory = tmp_path_factory.mktemp("qwen3_5-text-alone")
    qwen3_5_snapshot(directory)
    text_only = load_model(str(directory), media=False)
    assert text_only.towers is None
    request = body(0)
    request["inputs"] = [request["inputs"][1]]
    assert spinfc_logprobs(text_only, tokenizer, request)[1] == spinfc_logprobs(ours, tokenizer, request)[1]
    with pytest.raises(MediaError) as refused:
        compiled(text_only, tokenizer, body(0))
    assert refused.value.code == "image_unsupported" and "Qwen3.5" in refused.value.hint


@pytest.mark.parametrize("variant", ["dense", "moe"])
def test_video_questions_match_transformers(qwen, qwen_moe, variant, seed):
    """A video file and a list of frames (beside an image) score as transformers scores the same processed video
    (`pixel_values_videos`, `video_grid_thw`, its per-temporal-patch M-RoPE positions)."""
    ours, theirs, tokenizer = qwen if variant == "dense" else qwen_moe
    program, got = spinfc_logprobs(ours, tokenizer, video_body(seed % 1000))
    assert program.stat("media") == 3
    grids = [tuple(piece.read.inputs["grid_thw"].tolist()) for c in program.contents for piece in c.media]
    assert grids == [(3, 4, 6), (2, 8, 4), (1, 4, 6)], grids  # 5 of 10 frames sampled; 3 paired up
    want = transformers_logprobs(theirs, program)
    assert set(want) <= set(got)
    for index, kind in enumerate(("video file", "frames and an image", "text")):
        keys = [key for key in want if key[0] == index]
        difference = max(abs(got[key] - want[key]) for key in keys)
        print(f"qwen3_5 {variant} {kind}: max |logprob - transformers| = {difference:.2e} over {len(keys)} reads")
        assert difference < TOLERANCE, kind


def test_a_videos_rows_are_at_transformers_m_rope_positions(qwen):
    """Each temporal patch's time text counts on as text and its pads sit as an image's, as transformers'
    `get_rope_index` splits a video's grid into one grid a temporal patch."""
    ours, theirs, tokenizer = qwen
    check_rope_positions(compiled(ours, tokenizer, video_body(0)), theirs)


def test_the_video_changes_the_scores(qwen):
    """A different video (file or frames), different scores: the video's embeddings reach the questions."""
    ours, _, tokenizer = qwen
    _, first = spinfc_logprobs(ours, tokenizer, video_body(1))
    _, second = spinfc_logprobs(ours, tokenizer, video_body(2))
    for index in (0, 1):
        assert max(abs(first[k] - second[k]) for k in first if k[0] == index) > 1e-4, index
    assert all(first[k] == second[k] for k in first if k[0] == 2)
