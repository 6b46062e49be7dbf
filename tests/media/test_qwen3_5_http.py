"""Images over HTTP on Qwen3.5: a random-weight Qwen3_5ForConditionalGeneration snapshot with its vision tower
(snapshots.py), served on the CPU (the app in-process), answers /v1/score, chat and /v1/decisions requests holding
images and videos (a file, or its frames), and text generated after an image is transformers' greedy text;
/v1/models says it reads images and video; audio is refused naming the models that read it; a hostile file (an image
or a video: corrupt, cut short, too many frames) is a 4xx that leaves the next request's answer as it was."""

from __future__ import annotations

import base64
import json

import pytest
import torch

from spinfc import compiler
from spinfc.frontend import program_from_request
from spinfc.media import MediaPolicy
from spinfc.passes import PassContext
from spinfc.config import Limits
from spinfc.runtime.towers import MediaReader, towers_of
from spinfc.shapes import Shapes

from .served import serving
from .snapshots import data_url, frames_of, mp4, png, qwen3_5_snapshot, wav
from tests.rounding import assert_same_across_launches

pytestmark = pytest.mark.slow  # a live server (the app in-process), as tests/media/test_http.py; ~10 s here

QUERY = {"queries": [{"id": "shown", "template": "\nAnswer:<?>", "options": [" yes", " no"]}]}


def image(seed: int = 0, width: int = 40, height: int = 28) -> dict:
    return {"type": "image_url", "image_url": {"url": data_url(png(width, height, seed))}}


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory):
    directory = tmp_path_factory.mktemp("qwen3_5-served")
    theirs, tokenizer = qwen3_5_snapshot(directory)
    return directory, theirs, tokenizer


@pytest.fixture(scope="module")
def client(snapshot):
    with serving(snapshot[0], Limits(max_frames=8)) as client:
        yield client


def chat(client, *parts: dict, status: int = 200) -> dict:
    body = {"messages": [{"role": "user", "content": [{"type": "text", "text": "Here:"}, *parts]}], "scoring": QUERY}
    response = client.post("/v1/chat/completions", json=body)
    assert response.status_code == status, response.text
    return response.json()


def options(answer: dict) -> list[dict]:
    return answer["scoring"][0]["combinations"][0]["options"]


def test_a_chat_request_with_an_image_is_scored(client):
    first = options(chat(client, image(0)))  # its pass holds the question's floor too (then cached)
    answer = options(chat(client, image(0)))
    assert [o["text"] for o in answer] == [" yes", " no"]
    assert abs(sum(o["p"] for o in answer) - 1.0) < 1e-5
    # on the CPU a pass of other rows may round a last bit differently (as for text); the same pass, the same bits
    assert max(abs(a["logprob"] - b["logprob"]) for a, b in zip(first, answer)) < 1e-5
    assert options(chat(client, image(0))) == answer
    assert options(chat(client, image(1))) != answer  # the image is read
    assert options(chat(client, image(0), {"type": "text", "text": "and"}, image(2, 33, 33)))  # two images


def test_score_reads_image_parts_in_messages(client):
    body = {"inputs": [{"messages": [{"role": "user", "content": [{"type": "text", "text": "Here:"}, image(0)]}]},
                       {"messages": [{"role": "user", "content": "No picture."}]}], "scoring": QUERY}
    response = client.post("/v1/score", json=body)
    assert response.status_code == 200, response.text
    inputs = response.json()["inputs"]
    assert len(inputs) == 2 and inputs[0]["results"] != inputs[1]["results"]
    assert response.json()["usage"]["input_tokens"] > 2 * 20  # the image's 20 rows are read


def test_models_reports_images_and_video(client):
    card = client.get("/v1/models").json()["data"][0]
    assert card["media"]["kinds"] == ["image", "video"] and card["media"]["towers_loaded"]


def test_audio_is_refused_naming_the_models_that_read_it(client):
    audio = {"type": "input_audio", "input_audio": {"data": base64.b64encode(wav(0.5)).decode(), "format": "wav"}}
    error = chat(client, audio, status=400)["error"]
    assert error["code"] == "audio_unsupported" and "serve a model that reads audio: Gemma 4" in error["message"]
    assert error["param"].startswith("messages[0].content[1]")


def video_file(data: bytes) -> dict:
    return {"type": "video_url", "video_url": {"url": data_url(data, "video/mp4")}}


def test_a_video_is_read_as_a_file_or_as_frames(client):
    """A `video_url` MP4 (4 frames at 4 a second: all 4 kept, the processor's minimum) and a `video` list of frames
    each score; the video is read (another video, other scores); the same video, the same bits."""
    video = mp4(4)
    as_file = options(chat(client, video_file(video)))
    assert [o["text"] for o in as_file] == [" yes", " no"] and abs(sum(o["p"] for o in as_file) - 1.0) < 1e-5
    assert options(chat(client, video_file(video))) == as_file
    assert options(chat(client, video_file(mp4(4, seed=50)))) != as_file
    frames = {"type": "video", "video": [data_url(frame) for frame in frames_of(video)]}
    as_frames = options(chat(client, frames))
    assert options(chat(client, frames)) == as_frames
    other = {"type": "video", "video": [data_url(png(24, 24, 60 + k)) for k in range(3)]}
    assert options(chat(client, other)) != as_frames


def test_hostile_video_is_refused_and_disturbs_nothing(client):
    """A video cut short or with a damaged body is 400 corrupt_media; more frames than --max-frames (8 here), as a
    file or as a list, is 413 max_frames_exceeded; bytes that are no video are 415; the next answer is unchanged."""
    before = chat(client, video_file(mp4(4)))["scoring"]
    video = mp4(6)
    error = chat(client, video_file(video[:len(video) // 2]), status=400)["error"]
    assert error["code"] == "corrupt_media" and error["param"] == "messages[0].content[1].video_url"
    body = video.index(b"mdat") + 4, video.index(b"moov") - 4
    damaged = video[:body[0]] + bytes(b ^ 0x5A for b in video[body[0]:body[1]]) + video[body[1]:]
    assert chat(client, video_file(damaged), status=400)["error"]["code"] == "corrupt_media"
    error = chat(client, video_file(mp4(9)), status=413)["error"]
    assert error["code"] == "max_frames_exceeded" and "--max-frames" in error["message"]
    many = {"type": "video", "video": [data_url(png(24, 24))] * 9}
    assert chat(client, many, status=413)["error"]["code"] == "max_frames_exceeded"
    assert chat(client, video_file(b"\x00" * 64), status=415)["error"]["code"] == "unsupported_media"
    assert chat(client, video_file(mp4(4)))["scoring"] == before


def test_hostile_media_is_refused_and_disturbs_nothing(client):
    before = chat(client, image(0))["scoring"]
    cut = {"type": "image_url", "image_url": {"url": data_url(png(8, 8)[:40])}}
    error = chat(client, cut, status=400)["error"]
    assert error["code"] == "corrupt_media" and error["param"] == "messages[0].content[1].image_url"
    wrong = {"type": "image_url", "image_url": {"url": data_url(png(8, 8), "image/jpeg")}}
    assert chat(client, wrong, status=415)["error"]["code"] == "media_type_mismatch"
    strip = image(0, 4000, 1)
    assert chat(client, strip, status=400)["error"]["code"] == "image_aspect_exceeded"
    assert chat(client, image(0))["scoring"] == before


def test_text_generated_after_an_image_is_transformers_greedy_generate(client, snapshot):
    """A `<gen>` slot after an image decodes from the content's M-RoPE position (the text after an image continues
    from its max + 1): its greedy text is transformers' greedy `generate` on the same processed inputs."""
    directory, theirs, tokenizer = snapshot
    content = [{"type": "text", "text": "Here:"}, image(0), {"type": "text", "text": "ok"}]
    body = {"inputs": [{"messages": [{"role": "user", "content": content}]}],
            "scoring": {"queries": [{"id": "what", "template": "\nAnswer: <gen>", "max_tokens": 10}]}}
    response = client.post("/v1/score", json=body)
    assert response.status_code == 200, response.text
    text = response.json()["inputs"][0]["results"][0]["combinations"][0]["text"]
    towers = towers_of(json.loads((directory / "config.json").read_text()), dict(theirs.state_dict()), directory)
    ctx = PassContext(tokenizer=tokenizer, shapes=Shapes(budget=1024, block=64),
                      media=MediaReader(towers, MediaPolicy(), tokenizer))
    program = compiler.compile(program_from_request(body, model="qwen3_5"), ctx, until="tokenize")
    read = program.contents[0].media[0].read
    ids = torch.tensor([program.contents[0].tokens + program.questions[0].tokens])
    with torch.inference_mode():
        out = theirs.generate(input_ids=ids, mm_token_type_ids=(ids == theirs.config.image_token_id).int(),
                              pixel_values=read.inputs["pixel_values"], image_grid_thw=read.inputs["grid_thw"][None],
                              max_new_tokens=10, do_sample=False)
    assert text and text == tokenizer.decode(out[0, ids.shape[1]:]).split("\n")[0]


def test_decisions_read_image_parts(client):
    """/v1/decisions (NInfer's image parts) on Qwen3.5: the image is read, the same image gives the same answers, and
    a bad part is the 4xx /v1/score gives, naming the part."""
    questions = {"shown": {"type": "noul", "instructions": "Is there a cat in the picture?"},
                 "colour": {"type": "choice", "instructions": "Which colour dominates?",
                            "criteria": {"red": "mostly red", "green": "mostly green", "blue": "mostly blue"}}}

    def decide(*parts, status: int = 200) -> dict:
        body = {"messages": [{"role": "user", "content": [{"type": "text", "text": "Look:"}, *parts]}],
                "questions": questions}
        response = client.post("/v1/decisions", json=body)
        assert response.status_code == status, response.text
        return response.json()

    first, again, other = decide(image(0)), decide(image(0)), decide(image(1))
    assert set(first["answers"]) == set(questions)
    assert_same_across_launches(first["answers"], again["answers"], "cpu")  # the CPU's rounding; CUDA's bits
    assert first["answers"] != other["answers"]
    assert first["usage"]["input_tokens"] > decide()["usage"]["input_tokens"]  # the image's rows are read
    cut = {"type": "image_url", "image_url": {"url": data_url(png(8, 8)[:40])}}
    error = decide(image(0), cut, status=400)["error"]
    assert error["code"] == "corrupt_media" and error["param"] == "messages[0].content[2].image_url"
