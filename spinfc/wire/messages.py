"""POST /v1/messages: Anthropic's Messages API (its request, response, stream events and error envelope), with the
`scoring` block and `packs` of chat completions beside them."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from spinfc.frontend.request_schema import PackRef, Scoring
from spinfc.wire.results import QueryResult
from spinfc.wire.schemas import PackResult, PositiveInt


class ImageSource(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    type: Literal["base64", "url"]
    media_type: str | None = None  # base64: image/png, image/jpeg, image/gif or image/webp
    data: str | None = None  # base64: the image's bytes
    url: str | None = None  # url: where the image is (fetched from --media-fetch-hosts only)


class ContentBlock(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """A text or image block; other types (tool_use, tool_result, document, thinking) are refused by name."""

    type: str
    text: str | None = None  # a "text" block's text
    source: ImageSource | None = None  # an "image" block's image
    cache_control: Any = None  # accepted, not read: this server keeps contents by their text (content cache)


class AnthropicMessage(msgspec.Struct, forbid_unknown_fields=True):
    role: Literal["user", "assistant"]
    content: str | list[ContentBlock]


class MessagesRequest(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    model: str
    max_tokens: PositiveInt  # tokens to generate at most (at most 2,048); read but unused when scoring
    messages: Annotated[list[AnthropicMessage], msgspec.Meta(min_length=1)]
    system: str | list[ContentBlock] | None = None  # text blocks
    stop_sequences: list[str] | None = None  # up to 16; the answer ends before the first
    temperature: Annotated[float, msgspec.Meta(ge=0, le=1)] | None = None  # 0: greedy; default 1
    top_p: Annotated[float, msgspec.Meta(ge=0, le=1)] | None = None
    top_k: int | None = None  # refused: this server samples with temperature and top_p
    stream: bool | None = None  # true: the answer as Anthropic's stream events (generation only)
    metadata: dict[str, Any] | None = None  # accepted, not read
    cache_control: Any = None  # accepted, not read: this server keeps contents by their text (content cache)
    tools: list[Any] | None = None  # refused: this server does not call tools
    tool_choice: Any = None  # refused, with tools
    thinking: Any = None  # refused: the served models do not think aloud
    scoring: Scoring | None = None  # as chat's: the messages scored as one content, nothing generated
    packs: list[PackRef] | None = None
    limits: dict[str, Any] | None = None  # trusted callers only, as in /v1/score
    features: dict[str, Any] | None = None


class TextOut(msgspec.Struct):
    type: Literal["text"]
    text: str


class MessagesUsage(msgspec.Struct, omit_defaults=True):
    input_tokens: int  # generation: the prompt's tokens; scoring: the tokens read (/v1/score's input_tokens)
    output_tokens: int  # tokens generated (the end-of-turn token included); scoring: its <gen> slots' tokens
    questions: int | msgspec.UnsetType = msgspec.UNSET  # scoring: (content, question) pairs scored


StopReason = Literal["end_turn", "max_tokens", "stop_sequence", "cancelled"]


class MessagesResponse(msgspec.Struct, omit_defaults=True):
    id: str
    type: Literal["message"]
    role: Literal["assistant"]
    content: list[TextOut]  # one text block; none when scored
    model: str
    stop_reason: StopReason | None  # None only in a stream's message_start
    stop_sequence: str | None  # the stop sequence that ended the answer, with stop_reason stop_sequence
    usage: MessagesUsage
    scoring: list[QueryResult] | msgspec.UnsetType = msgspec.UNSET  # when scored: /v1/score's `results`
    packs: list[PackResult] | msgspec.UnsetType = msgspec.UNSET  # when the request named packs
    debug: dict | msgspec.UnsetType = msgspec.UNSET  # trusted callers and --debug: the plan of a scored request


class MessagesErrorBody(msgspec.Struct):
    type: str  # Anthropic's: invalid_request_error, authentication_error, permission_error, not_found_error, ...
    message: str
    code: str  # spinfc's code for the mistake (docs/api.md's table), beside Anthropic's fields
    param: str | None = None


class MessagesErrorResponse(msgspec.Struct):
    """Anthropic's error envelope."""

    type: Literal["error"]
    error: MessagesErrorBody
