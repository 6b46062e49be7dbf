"""The /v1/score request format as msgspec structs: what `spinfc compile` and the server check a request body
against (json_body.py: strictly, every mistake located and worded by mistakes.py) before `program_from_request`
reads it. The server's other routes build on these (spinfc/wire/schemas.py re-exports them; they are also the
OpenAPI schema). Field order is the order the `unknown_field` hint lists them in, the same as query.py's keys.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from spinfc.frontend.query import MAX_TOKENS_LIMIT, SEED_RANGE

Seed = Annotated[int, msgspec.Meta(ge=SEED_RANGE[0], le=SEED_RANGE[1])]  # a 64-bit integer, as OpenAI's `seed`


class ContentPart(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """OpenAI's content part: text, image_url, input_audio, video_url or video (frames); a file part has the shape
    OpenAI gives it, so that it is refused as `unsupported_content` (by the frontend) rather than as a misspelt
    field."""

    type: str  # "text", "image_url", "input_audio", "video_url", "video"; others are `unsupported_content`
    text: str | None = None  # the text of a "text" part (required there)
    image_url: Any = None  # {"url": "data:image/png;base64,..."} (content_parts.py reads the media parts)
    input_audio: Any = None  # {"data": "<base64>", "format": "wav"}
    video_url: Any = None  # {"url": "data:video/mp4;base64,..."}
    video: Any = None  # a video as its frames: ["data:image/jpeg;base64,...", ...]
    file: Any = None


class Message(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """A message; a content of several messages is their texts joined with a blank line."""

    # OpenAI's roles (an empty or unknown role is refused, as OpenAI does); every message's text is read
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[ContentPart]
    name: str | None = None


class ScoringQuery(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    id: str
    template: str  # one slot: <?> (or {?}) with `options`, or an extraction slot <*> <n> <$> <gen> (docs/api.md)
    options: list[str] | None = None
    codes: str | list[str] | None = None  # a decision model's codes to read at <?>: "all", or a list of its labels
    placeholders: dict[str, list[str]] | None = None  # name -> values; one question per combination
    # extraction slots: the longest answer in tokens, the terminator included
    max_tokens: Annotated[int, msgspec.Meta(ge=1, le=MAX_TOKENS_LIMIT)] | None = None
    beam_width: int | None = None  # <*> <n> <$>: answers searched at once (default 4; --max-beam-width)
    temperature: float | None = None  # <gen>: 0 (default) greedy, above 0 sampled
    seed: Seed | None = None  # <gen> sampled: the same seed gives the same text
    generate: bool | None = None  # true turns a <*> slot into generated free text
    free: bool | None = None  # <n> <$>: true answers any number (amount), not only those the content writes


class Scoring(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    queries: list[ScoringQuery] = []  # none only when the request names `packs`


class ScoreInput(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    messages: list[Message]


class PackRef(msgspec.Struct, forbid_unknown_fields=True):
    id: str  # an enabled pack (GET /v1/packs), e.g. "spinfc/moderation"


class ScoreRequest(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """One content (`messages`) or many (`inputs`), asked every query of `scoring` and of every named pack."""

    scoring: Scoring | None = None
    model: str | None = None  # the served model, one of its aliases, or omitted
    messages: list[Message] | None = None
    inputs: list[ScoreInput] | None = None
    packs: list[PackRef] | None = None  # enabled packs whose questions are asked too (runtime/admit/request_packs.py)
    # trusted callers only: this call's limits (name -> positive integer; spinfc.config.Limits) and features
    # (name -> boolean); values are checked by the server (400 invalid_limits / invalid_features, naming the key)
    limits: dict[str, Any] | None = None
    features: dict[str, Any] | None = None

    def to_body(self) -> dict:
        """The request as the frontend reads it: plain JSON types, without fields the client left out."""
        return msgspec.to_builtins(self)
