"""POST /v1/chat/completions, OpenAI-compatible.

    with `scoring`     the messages are one content, scored exactly as /v1/score scores them (server/scoring.py: one
    (or `packs`)       read, shared passes, the same limits, features and packs); the scores come back in `scoring`
                       (the shape of /v1/score's `results`) and `packs` beside an empty assistant message: nothing
                       is generated
    without either     an answer is generated from the model's chat template (or the plain transcript of
                       spinfc.runtime.admit.chat_format), greedy or sampled, on the generation thread (runtime/launch/generate.py);
                       with `stream: true` it is sent as server-sent events as it is generated, and with the
                       X-Conversation-Id header kept for a reconnect and cancellable (server/generating.py)
"""

from __future__ import annotations

import time
import uuid
from typing import Annotated

from litestar import Request, post
from litestar.params import Body
from litestar.response import Stream

from spinfc.runtime.launch.generate import Sampling
from spinfc.server.announce import withdraw
from spinfc.server.chat_stream import ChatFrames
from spinfc.server.context import CallContext, call_context
from spinfc.server.conversation import keep_as
from spinfc.server.errors import ApiError
from spinfc.server.generating import prepared, streamed
from spinfc.server.hangup import while_connected
from spinfc.server.logprobs import Pieces, chat_logprobs, ids_in
from spinfc.server.openapi import BODY_ROUTE, errors
from spinfc.server.scoring import score_request
from spinfc.server.service import ServiceDep
from spinfc.wire.schemas import (
    ChatChoice,
    ChatCompletion,
    ChatMessage,
    ChatRequest,
    ChatUsage,
    ScoreRequest,
    StreamOptions,
)

DEFAULT_MAX_TOKENS = 256
MAX_COMPLETION_TOKENS = 2048  # a CPU generates a few dozen tokens a second with the embedded models
MAX_STOP_STRINGS = 16


@post("/v1/chat/completions", status_code=200, responses=errors(*BODY_ROUTE))
async def chat_completions(data: Annotated[ChatRequest, Body(title="A chat completion request")],
                           service: ServiceDep, request: Request) -> ChatCompletion:
    """A ChatCompletion; with `stream: true`, the answer as server-sent events (server/chat_stream.py)."""
    ctx = call_context(request, data.limits, data.features)
    refuse_unsupported(data)
    keep = keep_as(request, service, streamed=bool(data.stream))
    scoring = data.scoring is not None or bool(data.packs)
    if not scoring:  # what can be checked without the model is checked first (an empty `messages` is body.py's)
        withdraw(request.scope)  # generated, not scored: no pass waits for it
        sampling = sampling_of(data, ctx)
        messages = [{"role": m.role, "content": text_of(m.content, f"messages[{i}]")}
                    for i, m in enumerate(data.messages)]
    service.ready_engine()
    service.check_model(data.model)
    if scoring:
        return await while_connected(request, service, scored(data, service, ctx))
    ctx.policy(service.longest_token).prechecks.messages(messages, "messages")  # before the prompt is tokenized
    stream = (data.stream_options or StreamOptions()) if data.stream else None
    top = (data.top_logprobs or 0) if data.logprobs else None
    if stream is not None:  # a stream notices a client that leaves itself (generating.py) and stops the generation
        return await generated(messages, service, ctx, sampling, stream, top, keep)
    return await while_connected(request, service, generated(messages, service, ctx, sampling, stream, top))


def refuse_unsupported(data: ChatRequest) -> None:
    """400 for a field this server cannot honour, rather than an answer that silently ignores it."""
    if data.stream and (data.scoring is not None or data.packs):
        raise ApiError(400, "stream_not_supported", "scores are not streamed: send a scoring request with `stream` "
                       "false or omitted and read the whole answer", param="stream")
    if data.stream_options is not None and not data.stream:
        raise ApiError(400, "invalid_stream_options", "`stream_options` is only read with `stream: true`: remove "
                       "it, or stream", param="stream_options")
    refuse_logprobs(data)
    refused = {"n": (data.n, 1),
               "frequency_penalty": (data.frequency_penalty, 0), "presence_penalty": (data.presence_penalty, 0)}
    for name, (value, supported) in refused.items():
        if value is not None and value != supported:
            raise ApiError(400, "unsupported_parameter", f"`{name}` {value!r} is not supported: this server "
                           f"answers with {name} = {supported!r} only; omit it", param=name)


def refuse_logprobs(data: ChatRequest) -> None:
    """`logprobs` are those of generated tokens: not of a scoring request (nothing is generated), not streamed."""
    if data.top_logprobs is not None and not data.logprobs:
        raise ApiError(400, "conflicting_fields", "`top_logprobs` needs `logprobs: true`", param="top_logprobs")
    if data.logprobs and (data.scoring is not None or data.packs):
        raise ApiError(400, "unsupported_parameter", "`logprobs` are the generated tokens', and a scoring request "
                       "generates nothing: remove `logprobs` (the scores are in `scoring`), or POST /v1/completions "
                       "with echo and logprobs for the prompt's own", param="logprobs")
    if data.logprobs and data.stream:
        raise ApiError(400, "unsupported_parameter", "`logprobs` are not streamed by this server: send `stream` "
                       "false or omit `logprobs`", param="logprobs")


def completion(service, content: str, finish: str, usage: ChatUsage, **extra) -> ChatCompletion:
    return ChatCompletion(
        id=f"chatcmpl-{uuid.uuid4().hex}", object="chat.completion", created=int(time.time()),
        model=service.model_name, system_fingerprint=service.fingerprint,
        choices=[ChatChoice(index=0, message=ChatMessage(role="assistant", content=content), finish_reason=finish)],
        usage=usage, **extra,
    )


async def scored(data: ChatRequest, service, ctx: CallContext) -> ChatCompletion:
    """The /v1/score path (server/scoring.py, the runtime's one scoring entry) on the messages as one content."""
    request = ScoreRequest(messages=data.messages, scoring=data.scoring, packs=data.packs or None)
    outcome = await score_request(service, ctx, request)
    answered = outcome.answered
    tokens, drawn = answered.scored.input_tokens, answered.scored.output_tokens
    usage = ChatUsage(prompt_tokens=tokens, completion_tokens=drawn, total_tokens=tokens + drawn,
                      questions=answered.questions)
    answer = completion(service, "", "stop", usage, scoring=answered.own[0])
    if data.packs:
        answer.packs = answered.packs[0]
    if outcome.debug is not None:
        answer.debug = outcome.debug
    return answer


def sampling_of(data: ChatRequest, ctx: CallContext) -> Sampling:
    """How to generate the answer; 400 when generation is off or a field is out of bounds."""
    ctx.policy(None).check_generates()
    if data.max_tokens is not None and data.max_completion_tokens is not None \
            and data.max_tokens != data.max_completion_tokens:
        raise ApiError(400, "conflicting_fields", "`max_tokens` and `max_completion_tokens` disagree: send one of "
                       "them", param="max_completion_tokens")
    max_tokens = data.max_completion_tokens or data.max_tokens or DEFAULT_MAX_TOKENS
    if max_tokens > MAX_COMPLETION_TOKENS:
        raise ApiError(400, "max_tokens_exceeded", f"max_tokens {max_tokens:,} is over this server's limit of "
                       f"{MAX_COMPLETION_TOKENS:,} generated tokens: ask for fewer",
                       param="max_completion_tokens" if data.max_completion_tokens else "max_tokens")
    return Sampling(
        max_tokens=max_tokens, temperature=1.0 if data.temperature is None else data.temperature,
        top_p=1.0 if data.top_p is None else data.top_p, seed=data.seed, stop=stop_strings(data.stop),
    )


async def generated(messages: list[dict], service, ctx: CallContext, sampling: Sampling,
                    stream: StreamOptions | None, top: int | None = None,
                    keep: tuple[str, str] | None = None) -> ChatCompletion | Stream:
    """An answer generated from `messages` ([{"role", "content": str}]); with `stream`, as server-sent events
    (with `keep`, kept under that conversation id and owner); with `top` (0 or more), each generated token's
    logprob and `top` most likely tokens."""
    generator, prompt, place = await prepared(messages, service, ctx, sampling)
    if stream is not None:  # the stream holds the admission place until it ends
        return streamed(ChatFrames(service, stream.include_usage), service, generator, prompt, sampling, place, keep)
    with place:
        answer = await generator.run(prompt, sampling, top_logprobs=top)
    completion_tokens = len(answer.tokens)
    usage = ChatUsage(prompt_tokens=answer.prompt_tokens, completion_tokens=completion_tokens,
                      total_tokens=answer.prompt_tokens + completion_tokens)
    result = completion(service, answer.text, answer.finish_reason, usage)
    if top is not None:  # token texts on the generation thread, which owns its tokenizer
        result.choices[0].logprobs = await generator.call(lambda tokenizer: chat_logprobs(
            Pieces(tokenizer, ids_in([], [answer.logprobs])), answer.logprobs, top))
    return result


def stop_strings(stop: str | list[str] | None, field: str = "stop") -> tuple[str, ...]:
    """The request's stop strings (its `field`): none, one, or a list of at most 16 non-empty strings."""
    stops = [] if stop is None else [stop] if isinstance(stop, str) else list(stop)
    if len(stops) > MAX_STOP_STRINGS:
        raise ApiError(400, "invalid_stop", f"{len(stops)} stop strings: send at most {MAX_STOP_STRINGS}",
                       param=field)
    for i, text in enumerate(stops):
        if not text:
            raise ApiError(400, "invalid_stop", "a stop string is empty: it would end every answer before it "
                           "starts; remove it", param=field if isinstance(stop, str) else f"{field}[{i}]")
    return tuple(stops)


def text_of(content, at: str = "messages") -> str:
    """A message's text: the string, or its text parts joined with a blank line (as /v1/score reads them); `at` is
    the message's JSON path."""
    if isinstance(content, str):
        return content
    for j, part in enumerate(content):
        if part.type != "text":
            raise ApiError(400, "unsupported_content", f"a content part of type {part.type!r}: this server reads "
                           "text parts only ({\"type\": \"text\", \"text\": ...})", param=f"{at}.content[{j}].type")
        if part.text is None:
            raise ApiError(400, "missing_field", f"missing `text` in `{at}.content[{j}]`: add it, e.g. "
                           '{"type": "text", "text": "..."}', param=f"{at}.content[{j}].text")
    return "\n\n".join(part.text for part in content)
