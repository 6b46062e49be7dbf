"""Media over HTTP: a random-weight Gemma 4 snapshot with its towers, served on the CPU (the app in-process),
answers chat requests holding an image, an audio clip and four frames with scores; /v1/models says what it reads;
a hostile file is a 4xx that leaves the next request's answer as it was."""

from __future__ import annotations

import base64

import pytest

from .snapshots import data_url, frames_of, mp4, png, wav

pytestmark = pytest.mark.slow  # starts the app (~20 s on a shared CPU)

QUERY = {"queries": [{"id": "shown", "template": "\nAnswer:<?>", "options": [" yes", " no"]}]}


PARTS = {
    "image": {"type": "image_url", "image_url": {"url": data_url(png(40, 28))}},
    "audio": {"type": "input_audio", "input_audio": {"data": base64.b64encode(wav(0.5)).decode(), "format": "wav"}},
    "frames": {"type": "video", "video": [data_url(png(24, 24, k)) for k in range(4)]},
}


@pytest.fixture
def client(served):
    return served


def chat(client, part: dict, status: int = 200) -> dict:
    body = {"messages": [{"role": "user", "content": [{"type": "text", "text": "Here:"}, part]}], "scoring": QUERY}
    response = client.post("/v1/chat/completions", json=body)
    assert response.status_code == status, response.text
    return response.json()


@pytest.mark.parametrize("kind", sorted(PARTS))
def test_a_chat_request_with_media_is_scored(client, kind):
    answer = chat(client, PARTS[kind])
    options = answer["scoring"][0]["combinations"][0]["options"]
    assert [o["text"] for o in options] == [" yes", " no"]
    assert abs(sum(o["p"] for o in options) - 1.0) < 1e-5


def test_a_video_file_reads_as_its_frames(client):
    """A `video_url` MP4 (decoded with PyAV) scores as the list of its decoded frames sent as images; a video of
    more frames than --max-frames is 413 from the container's count; bytes that are no video are 415."""
    video = mp4(4)
    as_file = chat(client, {"type": "video_url", "video_url": {"url": data_url(video, "video/mp4")}})
    as_frames = chat(client, {"type": "video", "video": [data_url(frame) for frame in frames_of(video)]})
    assert as_file["scoring"] == as_frames["scoring"]
    error = chat(client, {"type": "video_url", "video_url": {"url": data_url(mp4(9), "video/mp4")}}, 413)["error"]
    assert error["code"] == "max_frames_exceeded" and error["param"] == "messages[0].content[1].video_url"
    error = chat(client, {"type": "video_url", "video_url": {"url": data_url(b"\x00" * 64, "video/mp4")}}, 415)["error"]
    assert error["code"] == "unsupported_media" and "not a video" in error["message"]


def test_models_reports_the_media(client):
    card = client.get("/v1/models").json()["data"][0]
    assert card["media"]["kinds"] == ["audio", "image", "video"] and card["media"]["towers_loaded"]
    assert card["limits"]["max_frames"] == 8 and card["limits"]["max_image_pixels"] == 50_000_000


def test_hostile_media_is_refused_and_disturbs_nothing(client):
    before = chat(client, PARTS["image"])["scoring"]
    bomb = {"type": "image_url", "image_url": {"url": data_url(png(8, 8)[:40])}}
    error = chat(client, bomb, 400)["error"]
    assert error["code"] == "corrupt_media" and error["param"] == "messages[0].content[1].image_url"
    many = {"type": "video", "video": [PARTS["image"]["image_url"]["url"]] * 9}
    assert chat(client, many, 413)["error"]["code"] == "max_frames_exceeded"
    wrong = {"type": "image_url", "image_url": {"url": data_url(png(8, 8), "image/jpeg")}}
    assert chat(client, wrong, 415)["error"]["code"] == "media_type_mismatch"
    assert chat(client, PARTS["image"])["scoring"] == before
