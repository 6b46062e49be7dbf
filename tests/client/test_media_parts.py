"""The client's media parts (spinfc/client/media.py) without a server: the type read from the file's bytes (else
its name), URLs passed on, and a file of the wrong kind or an audio clip of unknown format refused before sending."""

from __future__ import annotations

import base64
import io
import wave

import pytest

from spinfc.client import audio_part, frames_part, image_part, text_part, user_message, video_part
from spinfc.client.media import sniff

PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC")


def wav_bytes() -> bytes:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(16000)
        out.writeframes(b"\0\0" * 160)
    return buffer.getvalue()


def test_an_image_from_bytes_or_a_path_is_a_data_url_of_its_type(tmp_path):
    assert image_part(PNG) == {"type": "image_url", "image_url": {
        "url": "data:image/png;base64," + base64.b64encode(PNG).decode()}}
    (tmp_path / "no-suffix").write_bytes(PNG)
    assert image_part(tmp_path / "no-suffix") == image_part(PNG)  # read from the bytes, not the name
    assert image_part(str(tmp_path / "no-suffix")) == image_part(PNG)


def test_the_type_comes_from_the_bytes_else_the_name(tmp_path):
    assert sniff(b"\xff\xd8\xff\xe0....") == "image/jpeg" and sniff(b"RIFF\0\0\0\0WEBPVP8 ") == "image/webp"
    assert sniff(wav_bytes()) == "audio/wav" and sniff(b"\0\0\0\x18ftypmp42") == "video/mp4"
    (tmp_path / "clip.webm").write_bytes(b"\0unknown bytes")
    assert video_part(tmp_path / "clip.webm")["video_url"]["url"].startswith("data:video/webm;base64,")
    (tmp_path / "blob").write_bytes(b"\0unknown bytes")
    assert image_part(tmp_path / "blob")["image_url"]["url"].startswith("data:;base64,")  # the server says what it is


def test_audio_names_its_format():
    assert audio_part(wav_bytes())["input_audio"] == {"data": base64.b64encode(wav_bytes()).decode(), "format": "wav"}
    assert audio_part(b"\0\0 raw", format="flac")["input_audio"]["format"] == "flac"
    with pytest.raises(ValueError, match="pass format="):
        audio_part(b"\0\0 raw pcm")
    with pytest.raises(ValueError, match="no URL"):
        audio_part("https://example.com/a.wav")


def test_urls_pass_on_and_mistakes_are_refused_before_sending(tmp_path):
    assert image_part("https://example.com/cat.png")["image_url"]["url"] == "https://example.com/cat.png"
    assert frames_part([PNG, "https://example.com/f.png"])["video"][1] == "https://example.com/f.png"
    with pytest.raises(ValueError, match="not image: use audio_part"):
        image_part(wav_bytes())
    with pytest.raises(FileNotFoundError, match="no media file"):
        image_part(tmp_path / "missing.png")
    with pytest.raises(ValueError, match="at least one frame"):
        frames_part([])
    with pytest.raises(ValueError, match="empty"):
        image_part(b"")


def test_a_message_of_text_and_parts():
    assert user_message("Look:", image_part(PNG)) == {"role": "user", "content": [text_part("Look:"), image_part(PNG)]}
