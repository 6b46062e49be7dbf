"""Content parts for media, built from a file's path or its bytes: the OpenAI parts the server reads (docs/api.md,
"Media"), with the file inline as a base64 data URL. Standard library only: no torch, no PIL.

    user_message("What is in the picture?", image_part("cat.png"))     a message of a text and an image part
    image_part(path | bytes | "https://...")   {"type": "image_url", "image_url": {"url": "data:image/png;base64,..."}}
    audio_part(path | bytes, format=None)      {"type": "input_audio", "input_audio": {"data": ..., "format": "wav"}}
    video_part(path | bytes | "https://...")   {"type": "video_url", "video_url": {"url": "data:video/mp4;base64,..."}}
    frames_part([path | bytes, ...])           {"type": "video", "video": ["data:image/jpeg;base64,...", ...]}

The type is read from the file's first bytes (what the server checks the declared type against), else from the
file name's suffix; an http(s) URL is passed on as it is (the server fetches it only from hosts it allows).
"""

from __future__ import annotations

import base64
import mimetypes
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Union

Media = Union[str, os.PathLike, bytes, bytearray]  # a path, an http(s) URL (str), or the file's bytes

# (first bytes, the MIME type); WebP, WAV and AVI share RIFF and are told apart by bytes 8..12
_MAGIC = ((b"\x89PNG", "image/png"), (b"\xff\xd8\xff", "image/jpeg"), (b"GIF8", "image/gif"), (b"BM", "image/bmp"),
          (b"fLaC", "audio/flac"), (b"OggS", "audio/ogg"), (b"ID3", "audio/mp3"), (b"\xff\xfb", "audio/mp3"),
          (b"\xff\xf3", "audio/mp3"), (b"\xff\xf2", "audio/mp3"), (b"\x1aE\xdf\xa3", "video/webm"))
_RIFF = {b"WEBP": "image/webp", b"WAVE": "audio/wav", b"AVI ": "video/avi"}
AUDIO_FORMATS = ("wav", "flac", "ogg", "mp3")


def sniff(data: bytes) -> str | None:
    """The MIME type of a file's bytes, from its first bytes; None when they are none of the types above."""
    if data[:4] == b"RIFF":
        return _RIFF.get(data[8:12])
    if data[4:8] == b"ftyp":  # ISO media: MP4, MOV, M4A
        return "video/mp4"
    return next((mime for magic, mime in _MAGIC if data.startswith(magic)), None)


def is_url(media: Media) -> bool:
    return isinstance(media, str) and media.startswith(("http://", "https://"))


def file_bytes(media: Media) -> tuple[bytes, str | None]:
    """(the bytes, the MIME type: sniffed, else guessed from the path's suffix, else None)."""
    if isinstance(media, (bytes, bytearray)):
        data, name = bytes(media), None
    elif isinstance(media, (str, os.PathLike)):
        path = Path(media)
        if not path.is_file():
            raise FileNotFoundError(f"no media file {str(path)!r}: give the path of an image, audio or video file, "
                                    "its bytes, or an http(s) URL")
        data, name = path.read_bytes(), path.name
    else:
        raise TypeError(f"media is a path, an http(s) URL or bytes, not {type(media).__name__}")
    if not data:
        raise ValueError("the media file is empty: give a file with its bytes")
    return data, sniff(data) or (mimetypes.guess_type(name)[0] if name else None)


def data_url(data: bytes, mime: str | None) -> str:
    """`data:<mime>;base64,<data>` (without a type when none is known: the server then reads the bytes as they are)."""
    return f"data:{mime or ''};base64,{base64.b64encode(data).decode('ascii')}"


def _url(media: Media, kind: str) -> str:
    if is_url(media):
        return media
    data, mime = file_bytes(media)
    found = (mime or "").split("/")[0]
    if mime is not None and found != kind:
        use = f"use {found}_part" if found in ("image", "audio", "video") else "spinfc reads images, audio and video"
        raise ValueError(f"the file is {mime}, not {kind}: {use}")
    return data_url(data, mime)


def image_part(media: Media) -> dict:
    """An `image_url` part: PNG, JPEG, WebP, GIF or BMP, from a path or bytes (inline), or an http(s) URL."""
    return {"type": "image_url", "image_url": {"url": _url(media, "image")}}


def video_part(media: Media) -> dict:
    """A `video_url` part: a video file (MP4, WebM; the server decodes it with PyAV), or an http(s) URL."""
    return {"type": "video_url", "video_url": {"url": _url(media, "video")}}


def frames_part(frames: Iterable[Media]) -> dict:
    """A `video` part: a video as its frames, each an image (path, bytes or URL), in order."""
    urls = [_url(frame, "image") for frame in frames]
    if not urls:
        raise ValueError("a video needs at least one frame")
    return {"type": "video", "video": urls}


def audio_part(media: Media, format: str | None = None) -> dict:
    """An `input_audio` part: WAV, FLAC, OGG or MP3 bytes in base64; `format` is read from the file when not given
    (the server refuses a `format` that is not the file's)."""
    if is_url(media):
        raise ValueError("an audio part holds the clip's bytes (OpenAI's input_audio has no URL): read the file "
                         "and pass its path or bytes")
    data, mime = file_bytes(media)
    if format is None:
        format = mime.split("/")[1] if mime and mime.startswith("audio/") else None
        format = {"mpeg": "mp3", "x-wav": "wav", "x-flac": "flac"}.get(format, format)
    if format not in AUDIO_FORMATS:
        raise ValueError(f"cannot tell the audio's format ({mime or 'unknown bytes'}): pass format= one of "
                         + ", ".join(AUDIO_FORMATS))
    return {"type": "input_audio", "input_audio": {"data": base64.b64encode(data).decode("ascii"), "format": format}}


def text_part(text: str) -> dict:
    return {"type": "text", "text": text}


def user_message(*pieces: str | Mapping, role: str = "user") -> dict:
    """A message whose content is `pieces` in order: a string is a text part, a dict a part as it is (one made
    above, or any part the server reads)."""
    return {"role": role, "content": [text_part(p) if isinstance(p, str) else dict(p) for p in pieces]}

