"""A generated answer as server-sent events (`stream: true`), in OpenAI's chunk format:

    data: {"object": "chat.completion.chunk", "choices": [{"delta": {"role": "assistant", "content": ""}, ...}]}
    data: {... "choices": [{"delta": {"content": "The capital"}, "finish_reason": null}]}     one per settled piece
    data: {... "choices": [{"delta": {}, "finish_reason": "stop"}]}
    data: {... "choices": [], "usage": {...}}                                                  with include_usage
    data: [DONE]

The pieces joined are the answer a non-streamed request gets. Text that could still begin a stop string is held
back until it cannot (runtime/launch/generate.py `settled`). An error after the first event (the status is already 200)
is sent as one event holding OpenAI's error envelope, which the SDKs raise, and the stream ends without [DONE]; so
is the end of a stream cut by the shutdown deadline (code `shutting_down`, server/shutdown.py). A client that hangs
up ends the stream (Litestar stops the iterator), which stops the generation and frees the admission place.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import AsyncIterator

import msgspec
from litestar.response import ServerSentEvent

from spinfc.runtime.admit.chat_format import ChatPrompt
from spinfc.runtime.admit.generator import Generator
from spinfc.runtime.launch.generate import Generation, Sampling
from spinfc.server.errors import to_api_error
from spinfc.server.hangup import before_deadline
from spinfc.wire.schemas import (
    ChatChunkChoice,
    ChatCompletionChunk,
    ChatDelta,
    ChatUsage,
    ErrorBody,
    ErrorResponse,
)


def stream_answer(service, generator: Generator, prompt: ChatPrompt, sampling: Sampling, include_usage: bool,
                  place: contextlib.ExitStack) -> ServerSentEvent:
    """The SSE response; `place` (holding an admission place) is closed when the stream ends, however it ends."""
    chunk_id, created = f"chatcmpl-{uuid.uuid4().hex}", int(time.time())

    def chunk(choices: list[ChatChunkChoice], usage: ChatUsage | msgspec.UnsetType = msgspec.UNSET) -> str:
        return msgspec.json.encode(ChatCompletionChunk(
            id=chunk_id, object="chat.completion.chunk", created=created, model=service.model_name,
            system_fingerprint=service.fingerprint, choices=choices, usage=usage,
        )).decode()

    async def events() -> AsyncIterator[str]:
        try:
            yield chunk([ChatChunkChoice(index=0, delta=ChatDelta(role="assistant", content=""))])
            final: Generation | None = None
            async with contextlib.aclosing(generator.stream(prompt, sampling)) as pieces:  # closed: generation stops
                async for item in before_deadline(pieces, service):  # the shutdown deadline ends it: ShuttingDown
                    if isinstance(item, str):
                        yield chunk([ChatChunkChoice(index=0, delta=ChatDelta(content=item))])
                    else:
                        final = item
            yield chunk([ChatChunkChoice(index=0, delta=ChatDelta(), finish_reason=final.finish_reason)])
            if include_usage:
                done = len(final.tokens)
                yield chunk([], ChatUsage(prompt_tokens=final.prompt_tokens, completion_tokens=done,
                                          total_tokens=final.prompt_tokens + done))
            yield "[DONE]"
        except Exception as error:  # the status line is sent: say what went wrong in the stream itself
            api = to_api_error(error)
            yield msgspec.json.encode(ErrorResponse(ErrorBody(
                message=api.message, type="server_error" if api.status >= 500 else "invalid_request_error",
                code=api.code, param=api.param))).decode()
        finally:
            place.close()

    return ServerSentEvent(events(), headers={"Cache-Control": "no-cache"})
