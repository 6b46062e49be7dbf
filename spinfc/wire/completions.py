"""Bodies of POST /v1/completions (OpenAI's legacy completions, as vLLM serves them) and the logprobs of a chat
completion: msgspec structs, which are also the OpenAPI schema.

The request struct checks types, bounds and unknown fields; the route checks the rest (the prompt's form, fields
this server honours only at one value).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from spinfc.frontend.request_schema import Seed

MAX_LOGPROBS = 20  # top tokens per position, as vLLM's default --max-logprobs (OpenAI's own limit is 5)

NonNegative = Annotated[int, msgspec.Meta(ge=0)]
TopCount = Annotated[int, msgspec.Meta(ge=0, le=MAX_LOGPROBS)]


class CompletionRequest(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """A completion of `prompt`: a string, a list of strings, a list of token ids, or a list of token-id lists
    (one choice each). With `echo` the prompt is part of the answer (and of its logprobs); `max_tokens` 0 and
    `echo` with `logprobs` is the scoring call: every prompt token's logprob, nothing generated."""

    prompt: str | list[Any]
    model: str | None = None
    max_tokens: NonNegative | None = None  # default 16, as OpenAI's; 0: nothing is generated
    echo: bool | None = None
    logprobs: TopCount | None = None  # the top tokens per position, besides the chosen one; omitted: no logprobs
    temperature: Annotated[float, msgspec.Meta(ge=0, le=2)] | None = None  # 0: greedy; default 1
    top_p: Annotated[float, msgspec.Meta(ge=0, le=1)] | None = None
    seed: Seed | None = None  # a 64-bit integer
    stop: str | list[str] | None = None
    n: Annotated[int, msgspec.Meta(ge=1)] | None = None  # only 1
    best_of: Annotated[int, msgspec.Meta(ge=1)] | None = None  # only 1
    stream: bool | None = None  # only false
    suffix: str | None = None  # only none
    frequency_penalty: float | None = None  # only 0
    presence_penalty: float | None = None  # only 0
    logit_bias: dict[str, float] | None = None  # only empty
    user: str | None = None  # accepted, not read


class CompletionLogprobs(msgspec.Struct):
    """OpenAI's legacy logprobs: per token of the answer (the prompt's too with `echo`), its text, its logprob
    (null for the first prompt token: nothing predicts it), the most likely tokens there with the chosen one
    (null for the first prompt token) and where its text starts in the choice's `text`."""

    tokens: list[str]
    token_logprobs: list[float | None]
    top_logprobs: list[dict[str, float] | None]
    text_offset: list[int]


class CompletionChoice(msgspec.Struct):
    index: int
    text: str
    logprobs: CompletionLogprobs | None
    finish_reason: Literal["stop", "length"]


class CompletionUsage(msgspec.Struct):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class Completion(msgspec.Struct):
    id: str
    object: Literal["text_completion"]
    created: int
    model: str
    system_fingerprint: str
    choices: list[CompletionChoice]
    usage: CompletionUsage


# ---- the logprobs of a chat completion (OpenAI's `choices[i].logprobs.content`) -----------------------------------


class TopLogprob(msgspec.Struct):
    token: str
    logprob: float
    bytes: list[int] | None  # the token's UTF-8 bytes


class TokenLogprob(msgspec.Struct):
    token: str
    logprob: float
    bytes: list[int] | None
    top_logprobs: list[TopLogprob]  # `top_logprobs` entries, most likely first


class ChatLogprobs(msgspec.Struct):
    content: list[TokenLogprob]  # one per generated token (the end-of-turn token left out)
    refusal: None = None
