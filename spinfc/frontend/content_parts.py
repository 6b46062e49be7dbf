"""OpenAI-style content parts -> text and media sources, the one reader of part lists (/v1/score `messages`,
/v1/chat/completions, /v1/decisions):

    {"type": "text", "text": "..."}
    {"type": "image_url", "image_url": {"url": "data:image/png;base64,..."}}     (or "image_url": "data:...")
    {"type": "input_audio", "input_audio": {"data": "<base64>", "format": "wav"}}
    {"type": "video_url", "video_url": {"url": "data:video/mp4;base64,..."}}
    {"type": "video", "video": ["data:image/jpeg;base64,...", ...]}            (a video as its frames)

A content is a sequence of pieces, text or `MediaSource`; `join` writes the texts joined with a blank line and
says where in that text each media piece goes (its character offset)."""

from __future__ import annotations

from collections.abc import Sequence

from spinfc.frontend.fields import Fields
from spinfc.frontend.fields import dotted
from spinfc.media.parts import MediaSource, b64decode, from_url

PART_TYPES = ("text", "image_url", "input_audio", "video_url", "video")
PART_EXAMPLE = '{"type": "text", "text": "..."}'


def read_parts(m: Fields) -> list[str | MediaSource]:
    """The pieces of the content parts under `m`'s `content` key, in order."""
    pieces: list[str | MediaSource] = []
    for part in m.tables("content", "a content part", PART_EXAMPLE):
        kind = part.string("type", "part type", '"text"')
        param = dotted(part.path)
        if kind == "text":
            part.check_keys(("type", "text"))
            pieces.append(part.string("text", "text", '"the text to score"'))
        elif kind in ("image_url", "video_url"):
            part.check_keys(("type", kind))
            url = part.require(kind, f"the {kind}", '{"url": "data:image/png;base64,..."}')
            if isinstance(url, dict):
                url = Fields(url, part.key_path(kind), part.where, part.error).string(
                    "url", "url", '"data:image/png;base64,..."')
            pieces.append(from_url("image" if kind == "image_url" else "video", url, f"{param}.{kind}"))
        elif kind == "input_audio":
            part.check_keys(("type", "input_audio"))
            audio = part.table("input_audio", "the audio", '{"data": "<base64>", "format": "wav"}')
            audio.check_keys(("data", "format"))
            fmt = audio.string("format", "audio format", '"wav"').lower()
            data = b64decode(audio.require("data", "the audio's base64", '"UklGR..."'), f"{param}.input_audio.data")
            pieces.append(MediaSource("audio", f"{param}.input_audio", data=data, mime=f"audio/{fmt}"))
        elif kind == "video":
            part.check_keys(("type", "video"))
            frames = part.value("video", list, "the video's frames", '["data:image/jpeg;base64,...", ...]')
            if not frames:
                part.fail("video", "the video has no frames", code="empty_media", hint="send at least one frame")
            sources = tuple(from_url("image", frame, f"{param}.video[{i}]") for i, frame in enumerate(frames))
            pieces.append(MediaSource("video", f"{param}.video", frames=sources))
        else:
            part.fail("type", f"content parts of type {kind!r} are not read", code="unsupported_content",
                      hint="the part types are " + ", ".join(PART_TYPES))
    return pieces


def join(pieces: Sequence[str | MediaSource]) -> tuple[str, tuple[tuple[int, MediaSource], ...]]:
    """(the texts joined with a blank line, ((offset in that text, media), ...)): a media piece goes where it
    stood, after the text before it and before the blank line that separates that text from the next."""
    text, placed, texts = "", [], 0
    for piece in pieces:
        if isinstance(piece, MediaSource):
            placed.append((len(text), piece))
            continue
        text = text + "\n\n" + piece if texts else piece
        texts += 1
    return text, tuple(placed)
