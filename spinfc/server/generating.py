"""A generated answer for a route (chat completions, messages): admitted, its prompt built and checked, then run whole
or streamed in the route's format.

    prepared(messages, ...)            (generator, prompt, place): the admission place held until the answer ends
    streamed(format, ..., keep)        the answer as server-sent events in `format` (chat_stream.py's ChatFrames,
                                       messages_stream.py's MessageFrames); with `keep` (X-Conversation-Id:
                                       conversation.py) kept in the registry, generated whoever reads it, and
                                       cancellable (the registry's cancel token)

A stream's events: `format.opening(prompt)`, one `format.piece(text)` per settled piece, `format.closing(final)`.
An error after the first event (the status is already 200) is `format.error(...)` as the last event; so is the end
of a stream cut by the shutdown deadline (shutting_down). Without `keep`, a client that hangs up ends the stream
(Litestar stops the iterator), which stops the generation and frees the admission place; with it, the generation
goes on, for a reader that comes back (GET /v1/stream/{id}).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import AsyncIterator
from typing import Protocol

from litestar.response import Stream

from spinfc.runtime.admit.chat_format import ChatPrompt
from spinfc.runtime.admit.generator import Generator
from spinfc.runtime.launch.generate import Generation, Sampling
from spinfc.server.context import CallContext
from spinfc.server.errors import ApiError, to_api_error
from spinfc.server.hangup import before_deadline
from spinfc.server.sse import kept_response, sse_response


class StreamFormat(Protocol):
    route: str  # which route's frames: "chat.completions" or "messages"

    def opening(self, prompt: ChatPrompt) -> list[bytes]: ...

    def piece(self, text: str) -> bytes: ...

    def closing(self, final: Generation) -> list[bytes]: ...

    def error(self, error: ApiError) -> bytes: ...


async def prepared(messages: list[dict], service, ctx: CallContext,
                   sampling: Sampling) -> tuple[Generator, ChatPrompt, contextlib.ExitStack]:
    """The generator and the prompt of `messages` ([{"role", "content": str}]), checked against the call's limits,
    with `place` holding the request's admission place: the caller closes it when the answer ends."""
    generator = service.generator
    if generator is None or not generator.available:
        raise ApiError(400, "generation_not_available", f"the model {service.model_name!r} cannot generate in this "
                       "server; send a `scoring` block instead")
    policy = ctx.policy(service.longest_token)
    with contextlib.ExitStack() as place:
        place.enter_context(service.admission.admit("generate", sampling.max_tokens))
        prompt = await generator.prepare(
            messages, check=lambda prompt: policy.check_prompt_tokens("messages", len(prompt.tokens)))
        return generator, prompt, place.pop_all()


def streamed(format: StreamFormat, service, generator: Generator, prompt: ChatPrompt, sampling: Sampling,
             place: contextlib.ExitStack, keep: tuple[str, str] | None) -> Stream:
    """The SSE response; `place` is closed when the stream ends, however it ends. `keep`: (conversation id, owner)."""
    with place:  # closed here only when the stream cannot be kept (409 stream_in_progress, 429 too_many_streams)
        kept = service.streams.open(*keep, format.route, format.error) if keep is not None else None
        frames = events(format, service, generator, prompt, sampling, kept.cancel if kept else None, place.pop_all())
    if kept is None:
        return sse_response(frames)
    kept.start(frames)
    return kept_response(kept, 0)


async def events(format: StreamFormat, service, generator: Generator, prompt: ChatPrompt, sampling: Sampling,
                 cancel: threading.Event | None, place: contextlib.ExitStack) -> AsyncIterator[bytes]:
    try:
        for opening in format.opening(prompt):
            yield opening
        final: Generation | None = None
        async with contextlib.aclosing(generator.stream(prompt, sampling, cancel)) as pieces:  # closed: it stops
            async for item in before_deadline(pieces, service):  # the shutdown deadline ends it: ShuttingDown
                if isinstance(item, str):
                    yield format.piece(item)
                else:
                    final = item
        for closing in format.closing(final):
            yield closing
    except Exception as error:  # the status line is sent: say what went wrong in the stream itself
        yield format.error(to_api_error(error))
    finally:
        place.close()
