"""A generated answer as Anthropic's stream events (`stream: true` on /v1/messages; server/generating.py runs it):

    event: message_start        {"message": {..., "content": [], "stop_reason": null, "usage": {"input_tokens"}}}
    event: content_block_start  {"index": 0, "content_block": {"type": "text", "text": ""}}
    event: ping
    event: content_block_delta  {"index": 0, "delta": {"type": "text_delta", "text": "The capital"}}   per piece
    event: content_block_stop   {"index": 0}
    event: message_delta        {"delta": {"stop_reason": "end_turn", "stop_sequence": null}, "usage": {...}}
    event: message_stop

An error after the first event is `event: error` with Anthropic's envelope (messages_errors.py), which the SDK
raises, and the stream ends there.
"""

from __future__ import annotations

import uuid

import msgspec

from spinfc.runtime.admit.chat_format import ChatPrompt
from spinfc.runtime.launch.generate import Generation
from spinfc.server.errors import ApiError
from spinfc.server.messages_errors import envelope
from spinfc.server.sse import frame
from spinfc.wire.messages import MessagesResponse, MessagesUsage, StopReason


def stop_reason(answer: Generation) -> StopReason:
    """Anthropic's name for why the answer ended."""
    if answer.finish_reason == "stop":
        return "stop_sequence" if answer.stop_sequence is not None else "end_turn"
    return "max_tokens" if answer.finish_reason == "length" else "cancelled"


def event(kind: str, **fields) -> bytes:
    return frame(msgspec.json.encode({"type": kind, **fields}).decode(), kind)


class MessageFrames:
    route = "messages"

    def __init__(self, service) -> None:
        self.service, self.id = service, f"msg_{uuid.uuid4().hex}"

    def opening(self, prompt: ChatPrompt) -> list[bytes]:
        start = MessagesResponse(id=self.id, type="message", role="assistant", content=[],
                                 model=self.service.model_name, stop_reason=None, stop_sequence=None,
                                 usage=MessagesUsage(input_tokens=len(prompt.tokens), output_tokens=0))
        return [event("message_start", message=start),
                event("content_block_start", index=0, content_block={"type": "text", "text": ""}),
                event("ping")]

    def piece(self, text: str) -> bytes:
        return event("content_block_delta", index=0, delta={"type": "text_delta", "text": text})

    def closing(self, final: Generation) -> list[bytes]:
        return [event("content_block_stop", index=0),
                event("message_delta", delta={"stop_reason": stop_reason(final), "stop_sequence": final.stop_sequence},
                      usage={"output_tokens": len(final.tokens)}),
                event("message_stop")]

    def error(self, error: ApiError) -> bytes:
        return frame(msgspec.json.encode(envelope(error)).decode(), "error")
