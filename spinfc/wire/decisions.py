"""Bodies of POST /v1/decisions (alias /v1/systemone): msgspec structs, which are also its OpenAPI schema.

The structs check types and unknown fields; `spinfc.runtime.decisions.validate_decision_request` checks the rest
(exactly one of state, messages and inputs, question types, 1 to 255 choice options, 2 to 50 score levels).
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from spinfc.wire.schemas import ErrorBody, Message


class DecisionQuestion(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    type: str  # noul | choice | score
    instructions: str  # the question
    criteria: str | dict[str, str] | list[str] | None = None  # noul: text; choice: key -> description; score: levels


class DecisionInput(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    state: str | None = None  # one content to judge, or
    messages: list[Message] | None = None  # a chat history


class DecisionRequest(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    questions: dict[str, DecisionQuestion]  # question id -> question
    model: str | None = None
    state: str | None = None  # the content to judge, or
    messages: list[Message] | None = None  # a chat history, or
    inputs: list[DecisionInput] | None = None  # several contents, each asked every question
    limits: dict[str, Any] | None = None  # trusted callers only, as in /v1/score
    features: dict[str, Any] | None = None  # trusted callers only


class DecisionAnswer(msgspec.Struct, omit_defaults=True):
    type: Literal["noul", "choice", "score"]
    answer: float | str  # noul: P(true); choice: the winning key; score: the expected level index (0-based)
    probabilities: dict[str, float] | list[float]  # noul: true/false; choice: per key; score: per level
    confidence: float  # normalised Gini: 1 all mass on one option, 0 spread evenly
    floor: float | dict[str, float] | None  # the same answer on empty content
    residual: float | None  # the mass the model put outside the labels
    level: int | msgspec.UnsetType = msgspec.UNSET  # score: the most probable level index
    legend: list[str] | msgspec.UnsetType = msgspec.UNSET  # score: the level descriptions


class DecisionUsage(msgspec.Struct):
    input_tokens: int
    output_tokens: int  # always 0: nothing is generated
    total_tokens: int


class DecisionInputResult(msgspec.Struct, omit_defaults=True):
    index: int  # the input's place in the request's `inputs`
    answers: dict[str, DecisionAnswer] | msgspec.UnsetType = msgspec.UNSET
    error: ErrorBody | msgspec.UnsetType = msgspec.UNSET  # an input that alone was wrong: its error, no answers


class DecisionResponse(msgspec.Struct, omit_defaults=True, kw_only=True):
    id: str
    object: Literal["decision"]
    created: int
    model: str
    system_fingerprint: str
    rounds: int  # reads of the state: 1, or more when the questions do not fit one pass together (all inputs')
    answers: dict[str, DecisionAnswer] | msgspec.UnsetType = msgspec.UNSET  # with `state` or `messages`
    inputs: list[DecisionInputResult] | msgspec.UnsetType = msgspec.UNSET  # with `inputs`, in request order
    usage: DecisionUsage
    debug: dict | msgspec.UnsetType = msgspec.UNSET  # trusted callers and --debug
