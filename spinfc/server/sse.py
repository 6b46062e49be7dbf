"""Server-sent events as bytes: each event framed once (Litestar's `ServerSentEventMessage`), so the bytes a client
reads are the bytes a kept stream holds, and an offset into one is an offset into the other.

    frame(data, event)          one event: `event: <event>` (when named) and `data: <data>`, then a blank line
    sse_response(body)          bytes as a text/event-stream response
    kept_response(kept, offset) a kept stream (streams/kept.py) from `offset`, then its live tail
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from litestar.response import ServerSentEventMessage, Stream

from spinfc.server.streams import KeptStream

# Litestar's SSE headers, and the media type: a route whose return type is not a Response (chat, messages: JSON
# unless streamed) would otherwise send its JSON media type over the Stream's own
HEADERS = {"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache", "Connection": "keep-alive",
           "X-Accel-Buffering": "no"}
CONVERSATION_HEADER = "X-Conversation-Id"


def frame(data: str, event: str | None = None) -> bytes:
    return ServerSentEventMessage(data=data, event=event).encode()


def sse_response(body: AsyncIterator[bytes], headers: dict[str, str] | None = None) -> Stream:
    return Stream(body, media_type="text/event-stream", headers={**HEADERS, **(headers or {})})


def kept_response(kept: KeptStream, offset: int) -> Stream:
    """The stream's bytes from `offset`; its headers say which stream and from where."""
    return sse_response(kept.read_from(offset), {CONVERSATION_HEADER: kept.id, "X-Stream-Offset": str(offset)})
