"""POST /v1/messages, Anthropic's Messages API: what chat completions does (routes/chat.py), in Anthropic's shapes.

    with `scoring`     `system` and `messages` are one content, scored as /v1/score scores it (server/scoring.py);
    (or `packs`)       the scores come back in `scoring` and `packs` beside an empty `content`: nothing is generated
    without either     an answer is generated (server/generating.py); with `stream: true` as Anthropic's stream
                       events (messages_stream.py), with X-Conversation-Id kept and cancellable as chat's are

Image blocks are read when scoring (messages_content.py). Errors are Anthropic's envelope (messages_errors.py); the
token may come as `x-api-key`, as Anthropic's SDKs send it (auth.py).
"""

from __future__ import annotations

import uuid
from typing import Annotated

from litestar import Request, post
from litestar.params import Body
from litestar.response import Stream

from spinfc.runtime.launch.generate import Sampling
from spinfc.server.announce import withdraw
from spinfc.server.context import CallContext, call_context
from spinfc.server.conversation import keep_as
from spinfc.server.errors import ApiError
from spinfc.server.generating import prepared, streamed
from spinfc.server.hangup import while_connected
from spinfc.server.messages_content import spinfc_messages
from spinfc.server.messages_errors import handle
from spinfc.server.messages_stream import MessageFrames, stop_reason
from spinfc.server.openapi import BODY_ROUTE, errors
from spinfc.server.routes.chat import MAX_COMPLETION_TOKENS, stop_strings, text_of
from spinfc.server.scoring import score_request
from spinfc.server.service import ServiceDep
from spinfc.wire.messages import MessagesErrorResponse, MessagesRequest, MessagesResponse, MessagesUsage, TextOut
from spinfc.wire.schemas import ScoreRequest

REFUSED = {"top_k": "this server samples with `temperature` and `top_p`", "tools": "this server calls no tools",
           "tool_choice": "this server calls no tools", "thinking": "the served models do not think aloud"}


@post("/v1/messages", status_code=200, responses=errors(*BODY_ROUTE, envelope=MessagesErrorResponse),
      exception_handlers={Exception: handle})
async def messages(data: Annotated[MessagesRequest, Body(title="An Anthropic Messages API request")],
                   service: ServiceDep, request: Request) -> MessagesResponse:
    """A Message; with `stream: true`, Anthropic's stream events."""
    ctx = call_context(request, data.limits, data.features)
    refuse_unsupported(data)
    keep = keep_as(request, service, streamed=bool(data.stream))
    turns = spinfc_messages(data)
    scoring = data.scoring is not None or bool(data.packs)
    if not scoring:  # what can be checked without the model is checked first
        withdraw(request.scope)  # generated, not scored: no pass waits for it
        sampling = sampling_of(data, ctx)
        chat = [{"role": m.role, "content": text_of(m.content, at)} for m, at in zip(turns, paths(data))]
    service.ready_engine()
    service.check_model(data.model)
    if scoring:
        return await while_connected(request, service, scored(turns, data, service, ctx))
    ctx.policy(service.longest_token).prechecks.messages(chat, "messages")  # before the prompt is tokenized
    if data.stream:  # the stream notices a client that leaves itself (generating.py)
        generator, prompt, place = await prepared(chat, service, ctx, sampling)
        return streamed(MessageFrames(service), service, generator, prompt, sampling, place, keep)
    return await while_connected(request, service, generated(chat, service, ctx, sampling))


def paths(data: MessagesRequest) -> list[str]:
    """Each turn's JSON path, as spinfc_messages orders them (`system` first)."""
    return ["system"] * (data.system is not None) + [f"messages[{i}]" for i in range(len(data.messages))]


def refuse_unsupported(data: MessagesRequest) -> None:
    if data.stream and (data.scoring is not None or data.packs):
        raise ApiError(400, "stream_not_supported", "scores are not streamed: send a scoring request with `stream` "
                       "false or omitted and read the whole answer", param="stream")
    for name, why in REFUSED.items():
        if getattr(data, name) is not None:
            raise ApiError(400, "unsupported_parameter", f"`{name}` is not supported: {why}; omit it", param=name)


def sampling_of(data: MessagesRequest, ctx: CallContext) -> Sampling:
    ctx.policy(None).check_generates()
    if data.max_tokens > MAX_COMPLETION_TOKENS:
        raise ApiError(400, "max_tokens_exceeded", f"max_tokens {data.max_tokens:,} is over this server's limit of "
                       f"{MAX_COMPLETION_TOKENS:,} generated tokens: ask for fewer", param="max_tokens")
    return Sampling(max_tokens=data.max_tokens, temperature=1.0 if data.temperature is None else data.temperature,
                    top_p=1.0 if data.top_p is None else data.top_p,
                    stop=stop_strings(data.stop_sequences, "stop_sequences"))


def message(service, content: list[TextOut], reason, stop: str | None, usage: MessagesUsage,
            **extra) -> MessagesResponse:
    return MessagesResponse(id=f"msg_{uuid.uuid4().hex}", type="message", role="assistant", content=content,
                            model=service.model_name, stop_reason=reason, stop_sequence=stop, usage=usage, **extra)


async def generated(chat: list[dict], service, ctx: CallContext, sampling: Sampling) -> MessagesResponse:
    generator, prompt, place = await prepared(chat, service, ctx, sampling)
    with place:
        answer = await generator.run(prompt, sampling)
    usage = MessagesUsage(input_tokens=answer.prompt_tokens, output_tokens=len(answer.tokens))
    return message(service, [TextOut(type="text", text=answer.text)], stop_reason(answer), answer.stop_sequence, usage)


async def scored(turns, data: MessagesRequest, service, ctx: CallContext) -> MessagesResponse:
    """The /v1/score path on `system` and `messages` as one content."""
    request = ScoreRequest(messages=turns, scoring=data.scoring, packs=data.packs or None)
    outcome = await score_request(service, ctx, request)
    scored = outcome.answered.scored
    usage = MessagesUsage(input_tokens=scored.input_tokens, output_tokens=scored.output_tokens,
                          questions=outcome.answered.questions)
    extra = {"scoring": outcome.answered.own[0]}
    if data.packs:
        extra["packs"] = outcome.answered.packs[0]
    if outcome.debug is not None:
        extra["debug"] = outcome.debug
    return message(service, [], "end_turn", None, usage, **extra)  # nothing generated: no text block
