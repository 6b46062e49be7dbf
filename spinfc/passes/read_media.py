"""read-media: each media piece of a content read by the model's tower (decoded, checked, processed)."""

from __future__ import annotations

import attrs

from spinfc.ir.nodes import Program
from spinfc.media.errors import MediaError
from spinfc.passes.context import PassContext


def read_media(program: Program, ctx: PassContext) -> Program:
    """Give every `MediaPiece` its `read` (`towers.MediaRead`), by the context's media reader: the bytes fetched
    where allowed, decoded and checked against the server's limits, then the tower's processor (resize, patches,
    mel features, frame sampling). Runs where the compile runs (the engine's compile thread), never on the event
    loop or the worker. A program without media is returned as it is. Raises `MediaError` for media that
    cannot be read, for a kind the server or the model does not read, and for any media where the context has
    no reader. Stats: media (pieces read)."""
    pieces = sum(len(content.media) for content in program.contents)
    if not pieces:
        return program
    reader = ctx.media
    if reader is None:
        first = next(piece for content in program.contents for piece in content.media)
        raise MediaError(f"this model reads text only, and the content has {first.source.kind}",
                         code="media_unsupported", param=first.source.param,
                         hint="send text only, or serve a model with towers (Gemma 3 multimodal or Gemma 4 read "
                         "images; Gemma 4 E2B/E4B also audio)")
    contents = tuple(
        attrs.evolve(content, media=tuple(attrs.evolve(piece, read=reader.read(piece.source))
                                          for piece in content.media)) if content.media else content
        for content in program.contents
    )
    return attrs.evolve(program, contents=contents).with_stat("media", pieces)
