"""The HTTP boundary: msgspec structs for request and response bodies (these are also the OpenAPI schema).

Request structs forbid unknown fields, so a misspelt field is a 400 naming it rather than a silent default.
`omit_defaults` keeps a request's dict form (what the frontend reads) free of fields the client did not send.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from spinfc.runtime.results import QueryResult


class ContentPart(msgspec.Struct, forbid_unknown_fields=True):
    type: str  # "text"; other kinds are refused by the frontend with `unsupported_content`
    text: str


class Message(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """A message; a content of several messages is their texts joined with a blank line."""

    role: str  # "user", "system", ...: every message's text is read, whatever its role
    content: str | list[ContentPart]
    name: str | None = None


class ScoringQuery(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    id: str
    template: str  # one slot: <?> (or {?}) with `options`; <*> <n> <$> <gen> are refused until extraction lands
    options: list[str] | None = None
    placeholders: dict[str, list[str]] | None = None  # name -> values; one question per combination
    max_tokens: int | None = None  # for extraction slots
    generate: bool | None = None  # true turns a <*> slot into generated free text


class Scoring(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    queries: list[ScoringQuery]


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
    packs: list[PackRef] | None = None  # enabled packs whose questions are asked too (server/request_packs.py)
    # trusted callers only: this call's limits (name -> positive integer; spinfc.config.Limits) and features
    # (name -> boolean); values are checked by the server (400 invalid_limits / invalid_features, naming the key)
    limits: dict[str, Any] | None = None
    features: dict[str, Any] | None = None

    def to_body(self) -> dict:
        """The request as the frontend reads it: plain JSON types, without fields the client left out."""
        return msgspec.to_builtins(self)


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
    results: list[QueryResult]
    packs: list[PackResult] | msgspec.UnsetType = msgspec.UNSET  # when the request named packs


class Usage(msgspec.Struct):
    input_tokens: int  # tokens this request put into forward passes (a cached floor costs none)
    output_tokens: int  # always 0: nothing is generated
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

