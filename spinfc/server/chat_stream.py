"""A generated answer as server-sent events (`stream: true`), in OpenAI's chunk format (server/generating.py runs it):

    data: {"object": "chat.completion.chunk", "choices": [{"delta": {"role": "assistant", "content": ""}, ...}]}
    data: {... "choices": [{"delta": {"content": "The capital"}, "finish_reason": null}]}     one per settled piece
    data: {... "choices": [{"delta": {}, "finish_reason": "stop"}]}              "cancelled": stopped by its owner
    data: {... "choices": [], "usage": {...}}                                                  with include_usage
    data: [DONE]

The pieces joined are the answer a non-streamed request gets. Text that could still begin a stop string is held
back until it cannot (runtime/launch/generate.py `settled`). An error after the first event is one event holding
OpenAI's error envelope, which the SDKs raise, and the stream ends without [DONE].
"""

from __future__ import annotations

import time
import uuid

import msgspec

from spinfc.runtime.admit.chat_format import ChatPrompt
from spinfc.runtime.launch.generate import Generation
from spinfc.server.errors import ApiError
from spinfc.server.sse import frame
from spinfc.wire.schemas import (
    ChatChunkChoice,
    ChatCompletionChunk,
    ChatDelta,
    ChatUsage,
    ErrorBody,
    ErrorResponse,
)


class ChatFrames:
    route = "chat.completions"

    def __init__(self, service, include_usage: bool) -> None:
        self.service, self.include_usage = service, include_usage
        self.id, self.created = f"chatcmpl-{uuid.uuid4().hex}", int(time.time())

    def chunk(self, choices: list[ChatChunkChoice], usage: ChatUsage | msgspec.UnsetType = msgspec.UNSET) -> bytes:
        return frame(msgspec.json.encode(ChatCompletionChunk(
            id=self.id, object="chat.completion.chunk", created=self.created, model=self.service.model_name,
            system_fingerprint=self.service.fingerprint, choices=choices, usage=usage,
        )).decode())

    def opening(self, prompt: ChatPrompt) -> list[bytes]:
        return [self.chunk([ChatChunkChoice(index=0, delta=ChatDelta(role="assistant", content=""))])]

    def piece(self, text: str) -> bytes:
        return self.chunk([ChatChunkChoice(index=0, delta=ChatDelta(content=text))])

    def closing(self, final: Generation) -> list[bytes]:
        frames = [self.chunk([ChatChunkChoice(index=0, delta=ChatDelta(), finish_reason=final.finish_reason)])]
        if self.include_usage:
            done = len(final.tokens)
            frames.append(self.chunk([], ChatUsage(prompt_tokens=final.prompt_tokens, completion_tokens=done,
                                                   total_tokens=final.prompt_tokens + done)))
        return [*frames, frame("[DONE]")]

    def error(self, error: ApiError) -> bytes:
        return frame(msgspec.json.encode(ErrorResponse(ErrorBody(
            message=error.message, type="server_error" if error.status >= 500 else "invalid_request_error",
            code=error.code, param=error.param))).decode())
