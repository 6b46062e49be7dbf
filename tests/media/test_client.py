"""The Python client's media parts (spinfc/client/media.py) against the app serving the random-weight Gemma 4
snapshot: an image, a clip and frames built from paths and bytes are scored, and answer as the parts written by
hand do; decisions take them too."""

from __future__ import annotations

import base64

import pytest

from spinfc.client import Client, audio_part, frames_part, image_part, user_message

from .snapshots import png, wav

pytestmark = pytest.mark.slow  # the app of conftest.py

SCORING = {"queries": [{"id": "shown", "template": "\nAnswer:<?>", "options": [" yes", " no"]}]}


@pytest.fixture
def client(served):
    return Client("http://testserver", http=served)  # the in-process app, through the client's own sending


def by_hand(data: bytes, mime: str) -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


def ps(answer) -> list[float]:
    return [option.p for option in answer.results[0].combinations[0].options]


def test_parts_from_paths_and_bytes_score_as_the_parts_written_by_hand(client, tmp_path):
    (tmp_path / "photo.png").write_bytes(png(40, 28))
    for k in range(4):
        (tmp_path / f"frame{k}.png").write_bytes(png(24, 24, k))
    built = user_message("Here:", image_part(tmp_path / "photo.png"), audio_part(wav(0.5)),
                         frames_part([tmp_path / f"frame{k}.png" for k in range(4)]))
    hand = {"role": "user", "content": [
        {"type": "text", "text": "Here:"},
        {"type": "image_url", "image_url": {"url": by_hand(png(40, 28), "image/png")}},
        {"type": "input_audio", "input_audio": {"data": base64.b64encode(wav(0.5)).decode(), "format": "wav"}},
        {"type": "video", "video": [by_hand(png(24, 24, k), "image/png") for k in range(4)]}]}
    assert built == hand
    answer = client.score(messages=[built], scoring=SCORING)
    text_only = client.score(messages=[user_message("Here:")], scoring=SCORING)
    assert ps(answer) != ps(text_only) and answer.usage.input_tokens > text_only.usage.input_tokens
    # the same request again (the floor cached now, so other passes: CPU rounding only)
    assert ps(client.score(messages=[hand], scoring=SCORING)) == pytest.approx(ps(answer), abs=1e-6)


def test_decisions_take_the_parts(client):
    decided = client.decisions(messages=[user_message("Look:", image_part(png(40, 28)))],
                               questions={"cat": {"type": "noul", "instructions": "Is there a cat?"}})
    assert 0.0 < decided.answers["cat"].answer < 1.0 and decided.usage.output_tokens == 0
