"""A large job (many contents, the same questions) as several /v1/score requests, each within the server's limits.

    plan_chunks    contents -> runs of consecutive contents, each under max_body_bytes (measured: the JSON is
                   built here) and an estimate of max_processed_tokens (a token is at least one byte of text, so
                   the bytes of a content and of the scoring block bound its tokens from above)
    merge          the answers of the chunks -> one `Batch`, results in input order, `index` counted over the job

A chunk the server still refuses as too large (`max_processed_tokens_exceeded`, a named pack's questions the
estimate cannot see, or `body_too_large`) is split in two and sent again (`split_on`), down to one content.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from spinfc.wire.schemas import InputResult, ModelList, ScoreResponse, Usage

BODY_MARGIN = 0.9  # of max_body_bytes: room for what the estimate does not count (separators, the model name)
DEFAULT_MAX_INPUTS = 256  # contents per request: keeps each request's latency (and a retry's cost) bounded
SPLIT_CODES = frozenset({"max_processed_tokens_exceeded", "body_too_large"})

Content = str | Sequence[Mapping[str, Any]] | Mapping[str, Any]


class Batch(msgspec.Struct):
    """The answer to a job: one `InputResult` per content in input order (`index` is the content's position in the
    job), the usage summed over every request, and how many requests it took."""

    inputs: list[InputResult]
    usage: Usage
    requests: int


def as_input(content: Content) -> dict:
    """A content as one element of /v1/score's `inputs`: a string is one user message; a list is the messages; a
    mapping with `messages` is taken as it is."""
    if isinstance(content, str):
        return {"messages": [{"role": "user", "content": content}]}
    if isinstance(content, Mapping):
        return dict(content)
    return {"messages": [msgspec.to_builtins(m) for m in content]}


def job_body(scoring: Any, packs: Sequence[str | Mapping] | None, model: str | None) -> dict:
    """What every request of the job carries besides its contents."""
    body: dict[str, Any] = {}
    if scoring is not None:
        body["scoring"] = msgspec.to_builtins(scoring)
    if packs:
        body["packs"] = [{"id": p} if isinstance(p, str) else dict(p) for p in packs]
    if model is not None:
        body["model"] = model
    return body


def server_limits(models: ModelList) -> dict[str, int]:
    """The limits the served model reports in GET /v1/models."""
    return dict(models.data[0].limits) if models.data else {}


def plan_chunks(inputs: Sequence[dict], body: dict, limits: Mapping[str, int],
                max_inputs: int = DEFAULT_MAX_INPUTS) -> list[range]:
    """Consecutive runs of `inputs` covering all of them in order. Each run holds at most `max_inputs` contents, its
    request body is at most BODY_MARGIN of `max_body_bytes`, and its bytes of text (each content, plus the
    scoring block once per content and once for the floor) at most `max_processed_tokens`. A content that alone
    goes over a limit is a run of its own (the server then says which limit, for that content)."""
    max_bytes = int(limits.get("max_body_bytes", 2_000_000) * BODY_MARGIN)
    max_tokens = limits.get("max_processed_tokens", 2_000_000)
    base = len(msgspec.json.encode({**body, "inputs": []}))
    tree = len(msgspec.json.encode(body.get("scoring", {})))  # bounds the question tree's tokens per content
    chunks, start, size, tokens = [], 0, base, tree
    for i, item in enumerate(inputs):
        item_bytes = len(msgspec.json.encode(item)) + 1
        item_tokens = item_bytes + tree
        full = i - start >= max_inputs or size + item_bytes > max_bytes or tokens + item_tokens > max_tokens
        if full and i > start:
            chunks.append(range(start, i))
            start, size, tokens = i, base, tree
        size, tokens = size + item_bytes, tokens + item_tokens
    if start < len(inputs):
        chunks.append(range(start, len(inputs)))
    return chunks


def split_on(error) -> bool:
    """Whether a chunk's error means "too large": send its halves instead."""
    return getattr(error, "code", None) in SPLIT_CODES or getattr(error, "status", None) == 413


def halves(chunk: range) -> tuple[range, range]:
    middle = chunk.start + len(chunk) // 2
    return range(chunk.start, middle), range(middle, chunk.stop)


def merge(answers: Sequence[tuple[range, ScoreResponse]]) -> Batch:
    """The chunks' answers as one `Batch`, in input order."""
    inputs: list[InputResult] = []
    totals = [0, 0, 0]
    for chunk, answer in sorted(answers, key=lambda pair: pair[0].start):
        for local, result in enumerate(answer.inputs):
            inputs.append(msgspec.structs.replace(result, index=chunk.start + local))
        usage = answer.usage
        totals = [totals[0] + usage.input_tokens, totals[1] + usage.output_tokens, totals[2] + usage.questions]
    return Batch(inputs=inputs, usage=Usage(*totals), requests=len(answers))
