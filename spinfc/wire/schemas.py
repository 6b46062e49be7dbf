"""The wire format: msgspec structs for request and response bodies (these are also the OpenAPI schema), read by
the server (spinfc/server/), the client (spinfc/client/) and `spinfc score` (spinfc/bulk/) alike.

/v1/score's request format is the frontend's (spinfc/frontend/request_schema.py, re-exported here), so
`spinfc compile` checks a request file with the same structs. Every request struct forbids unknown fields, so a
misspelt field is a 400 naming it rather than a silent default; bodies are checked strictly (no string is read as
a number) by spinfc/server/body.py.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from spinfc.frontend.request_schema import (  # noqa: F401  (the request format is the frontend's; re-exported)
    ContentPart,
    Message,
    PackRef,
    ScoreInput,
    ScoreRequest,
    Scoring,
    ScoringQuery,
    Seed,
)
from spinfc.wire.completions import ChatLogprobs, TopCount
from spinfc.wire.results import QueryResult


class PackResult(msgspec.Struct):
    """A named pack's answers on one content: its questions, its categories and its decision."""

    id: str
    version: str
    presentation: Literal["applied", "ignored"]  # whether the pack's presentation wrapped the content
    results: list[QueryResult]  # per pack query, under the pack's own ids
    categories: dict[str, float]  # category id -> score, in the pack's order
    decision: str | None  # the decision's label; None when the pack has no decision
    rule: int | None  # index of the rule that fired; None for the default
    reason: str  # which conditions held


class InputResult(msgspec.Struct, omit_defaults=True):
    index: int  # the input's position in `inputs`
    results: list[QueryResult] | msgspec.UnsetType = msgspec.UNSET  # an input answered
    packs: list[PackResult] | msgspec.UnsetType = msgspec.UNSET  # when the request named packs
    error: "ErrorBody | msgspec.UnsetType" = msgspec.UNSET  # an input that alone was wrong: its error, no results


class Usage(msgspec.Struct):
    input_tokens: int  # tokens the request reads: its contents, the floor, their question trees (cached or not)
    output_tokens: int  # tokens its <gen> slots drew
    questions: int  # (content, question) pairs scored, the floor not counted


class ScoreResponse(msgspec.Struct, omit_defaults=True):
    id: str
    object: Literal["score"]
    created: int
    model: str
    system_fingerprint: str
    usage: Usage
    results: list[QueryResult] | msgspec.UnsetType = msgspec.UNSET  # when the request sent `messages`
    inputs: list[InputResult] | msgspec.UnsetType = msgspec.UNSET  # when the request sent `inputs`
    packs: list[PackResult] | msgspec.UnsetType = msgspec.UNSET  # with `messages` and `packs`
    debug: dict | msgspec.UnsetType = msgspec.UNSET  # trusted callers and --debug: the plan of the request


class ErrorBody(msgspec.Struct):
    message: str
    type: str
    code: str
    param: str | None = None


class ErrorResponse(msgspec.Struct):
    """OpenAI's error envelope."""

    error: ErrorBody


class ModelCard(msgspec.Struct):
    id: str
    object: Literal["model"]
    created: int
    owned_by: str
    aliases: list[str]
    ready: bool
    features: dict[str, bool]
    limits: dict[str, int]
    media: dict[str, Any] = {}  # kinds requests may send, what the model's towers read, the fetch allow-list
    # "language": the head reads the vocabulary; "decision": it reads a fixed set of codes (docs/models.md)
    kind: Literal["language", "decision"] = "language"
    codes: list[str] | msgspec.UnsetType = msgspec.UNSET  # a decision model's codes, in head order


class ModelList(msgspec.Struct):
    object: Literal["list"]
    data: list[ModelCard]


class Health(msgspec.Struct):
    status: str  # ok | ready
    model: str


class DrainState(msgspec.Struct):
    status: Literal["draining", "ready", "not_ready"]  # what /readyz says now
    draining: bool
    in_flight: int  # requests admitted to the engine and not yet answered


class EnabledPackInfo(msgspec.Struct):
    id: str
    object: Literal["pack"]
    version: str
    description: str
    models: list[str]
    questions: int  # queries of the pack (placeholder grids count once)
    categories: list[str]
    decision: list[str] | None  # the decision's labels
    source: str  # "bundled" or the --packs source as given
    file: str
    revision: str | None  # the git commit, for a git source


class SkippedPackInfo(msgspec.Struct):
    id: str
    version: str
    models: list[str]
    source: str
    file: str
    reason: str


class PackList(msgspec.Struct):
    object: Literal["list"]
    model: str
    data: list[EnabledPackInfo]
    skipped: list[SkippedPackInfo]


# ---- /v1/chat/completions (OpenAI's chat completion, with an optional `scoring` block) ---------------------------

PositiveInt = Annotated[int, msgspec.Meta(ge=1)]


class StreamOptions(msgspec.Struct, forbid_unknown_fields=True):
    include_usage: bool = False  # a last chunk with `usage` and no choices


class ChatRequest(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """OpenAI's chat completion request. With `scoring` or `packs` (as in /v1/score; the `openai` SDK sends them
    through `extra_body`) the messages are scored and nothing is generated; without either, an answer is generated."""

    messages: Annotated[list[Message], msgspec.Meta(min_length=1)]
    model: str | None = None
    scoring: Scoring | None = None
    packs: list[PackRef] | None = None  # enabled packs whose questions are asked too, as in /v1/score
    limits: dict[str, Any] | None = None  # trusted callers only: this call's limits, as in /v1/score
    features: dict[str, Any] | None = None  # trusted callers only: this call's features (e.g. generation)
    max_tokens: PositiveInt | None = None  # tokens to generate at most (default 256, at most 2,048)
    max_completion_tokens: PositiveInt | None = None  # OpenAI's newer name for max_tokens
    temperature: Annotated[float, msgspec.Meta(ge=0, le=2)] | None = None  # 0: greedy; default 1
    top_p: Annotated[float, msgspec.Meta(ge=0, le=1)] | None = None  # nucleus sampling; default 1
    seed: Seed | None = None  # fixes the draws of a sampled answer
    stop: str | list[str] | None = None  # up to 16 stop strings; the answer ends before the first
    stream: bool | None = None  # true: the answer as server-sent events (generation only)
    stream_options: StreamOptions | None = None  # only with stream
    n: PositiveInt | None = None  # only 1
    logprobs: bool | None = None  # true: each generated token's logprob (generation, not streamed)
    top_logprobs: TopCount | None = None  # with logprobs: the most likely tokens at each step (0 to 20)
    frequency_penalty: float | None = None  # only 0
    presence_penalty: float | None = None  # only 0
    user: str | None = None  # accepted, not read


class ChatMessage(msgspec.Struct):
    role: Literal["assistant"]
    content: str  # the generated answer; "" for a scoring request


class ChatChoice(msgspec.Struct):
    index: int
    message: ChatMessage
    finish_reason: Literal["stop", "length"]
    logprobs: ChatLogprobs | None = None  # with `logprobs: true`


class ChatUsage(msgspec.Struct, omit_defaults=True):
    prompt_tokens: int  # generation: the prompt's tokens; scoring: tokens read (as usage.input_tokens)
    completion_tokens: int  # tokens generated (the end-of-turn token included); 0 for scoring
    total_tokens: int
    questions: int | msgspec.UnsetType = msgspec.UNSET  # scoring: (content, question) pairs scored


class ChatCompletion(msgspec.Struct, omit_defaults=True):
    id: str
    object: Literal["chat.completion"]
    created: int
    model: str
    system_fingerprint: str
    choices: list[ChatChoice]
    usage: ChatUsage
    scoring: list[QueryResult] | msgspec.UnsetType = msgspec.UNSET  # when scored: /v1/score's `results`
    packs: list[PackResult] | msgspec.UnsetType = msgspec.UNSET  # when the request named packs
    debug: dict | msgspec.UnsetType = msgspec.UNSET  # trusted callers and --debug: the plan of a scored request


class ChatDelta(msgspec.Struct, omit_defaults=True):
    role: Literal["assistant"] | msgspec.UnsetType = msgspec.UNSET  # in the first chunk
    content: str | msgspec.UnsetType = msgspec.UNSET  # the next piece of the answer


class ChatChunkChoice(msgspec.Struct):
    index: int
    delta: ChatDelta
    # in the last chunk of the choice; "cancelled": stopped by POST /v1/chat/completions/control
    finish_reason: Literal["stop", "length", "cancelled"] | None = None
    logprobs: None = None


class ChatCompletionChunk(msgspec.Struct, omit_defaults=True):
    """One server-sent event of a streamed answer (`stream: true`)."""

    id: str  # the same in every chunk of an answer
    object: Literal["chat.completion.chunk"]
    created: int
    model: str
    system_fingerprint: str
    choices: list[ChatChunkChoice]  # empty in the usage chunk
    usage: ChatUsage | msgspec.UnsetType = msgspec.UNSET  # stream_options.include_usage: the last chunk
