"""/v1/decisions with media in `messages` (NInfer's image parts, and audio and frames as /v1/score reads them), over
HTTP on the random-weight Gemma 4 snapshot with its towers: the media are read (another image, other answers; the
same image, the same answers), and a bad part is the 4xx /v1/score gives, naming the part."""

from __future__ import annotations

import base64

import pytest

from .snapshots import data_url, png, wav

pytestmark = pytest.mark.slow  # the app of conftest.py

QUESTIONS = {
    "shown": {"type": "noul", "instructions": "Is there a cat in the picture?"},
    "colour": {"type": "choice", "instructions": "Which colour dominates?",
               "criteria": {"red": "mostly red", "green": "mostly green", "blue": "mostly blue"}},
    "busy": {"type": "score", "instructions": "How busy is it?", "criteria": ["calm", "busy", "chaotic"]},
}


def decide(client, *parts, status: int = 200) -> dict:
    body = {"messages": [{"role": "user", "content": [{"type": "text", "text": "Look:"}, *parts]}],
            "questions": QUESTIONS}
    response = client.post("/v1/decisions", json=body)
    assert response.status_code == status, response.text
    return response.json()


def image(seed: int) -> dict:
    return {"type": "image_url", "image_url": {"url": data_url(png(40, 28, seed))}}


def test_an_image_part_is_read_into_the_answers(served):
    first, again, other = decide(served, image(0)), decide(served, image(0)), decide(served, image(1))
    assert first["object"] == "decision" and set(first["answers"]) == set(QUESTIONS)
    assert first["usage"]["output_tokens"] == 0
    assert abs(sum(first["answers"]["colour"]["probabilities"].values()) - 1.0) < 1e-5
    assert first["answers"] == again["answers"]
    assert first["answers"]["shown"]["answer"] != other["answers"]["shown"]["answer"]
    text_only = decide(served)
    assert first["usage"]["input_tokens"] > text_only["usage"]["input_tokens"]  # the image's rows are read


def test_audio_and_frames_are_read_too(served):
    audio = {"type": "input_audio", "input_audio": {"data": base64.b64encode(wav(0.5)).decode(), "format": "wav"}}
    frames = {"type": "video", "video": [data_url(png(24, 24, k)) for k in range(4)]}
    heard, seen = decide(served, audio), decide(served, frames)
    assert heard["answers"]["shown"]["answer"] != seen["answers"]["shown"]["answer"]


def test_a_bad_part_is_the_4xx_of_score_naming_the_part(served):
    cut = {"type": "image_url", "image_url": {"url": data_url(png(8, 8)[:40])}}
    error = decide(served, image(0), cut, status=400)["error"]
    assert error["code"] == "corrupt_media" and error["param"] == "messages[0].content[2].image_url"
    many = {"type": "video", "video": [data_url(png(8, 8))] * 9}
    assert decide(served, many, status=413)["error"]["code"] == "max_frames_exceeded"
    remote = {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}
    assert decide(served, remote, status=400)["error"]["code"] == "media_url_refused"
