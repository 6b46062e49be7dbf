"""X-Conversation-Id: which kept stream (server/streams/) a streamed generation goes to, and who owns it.

    keep_as(request, service, streamed)   (id, owner) for a request sent with the header, else None; refused: 400
                                          invalid_conversation_id, streams_disabled, conversation_id_needs_stream
    check_id(value, param)                an id as the header or a path gives it: 1 to 128 characters of letters,
                                          digits and . _ : - (a UUID fits)

Nothing is kept without the header. The owner is the token the request presented (auth.owner_of).
"""

from __future__ import annotations

import re

from litestar import Request

from spinfc.server.auth import owner_of
from spinfc.server.errors import ApiError
from spinfc.server.sse import CONVERSATION_HEADER

ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")


def check_id(value: str, param: str) -> str:
    if not ID.fullmatch(value):
        raise ApiError(400, "invalid_conversation_id", f"conversation id {value[:140]!r} is not one: send 1 to 128 "
                       "letters, digits and . _ : - (a UUID fits)", param=param)
    return value


def keep_as(request: Request, service, streamed: bool) -> tuple[str, str] | None:
    value = request.headers.get(CONVERSATION_HEADER)
    if value is None:
        return None
    check_id(value, CONVERSATION_HEADER)
    if not service.streams.on:
        raise ApiError(400, "streams_disabled", f"this server keeps no streams (--stream-count 0): send the request "
                       f"without {CONVERSATION_HEADER}, or start the server with --stream-count above 0",
                       param=CONVERSATION_HEADER)
    if not streamed:
        raise ApiError(400, "conversation_id_needs_stream", f"{CONVERSATION_HEADER} keeps a streamed generation: "
                       "send `stream: true`, or leave the header out", param=CONVERSATION_HEADER)
    return value, owner_of(request)
