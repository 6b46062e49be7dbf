"""The kept streams (server/streams/: streamed generations sent with X-Conversation-Id), for their owner only.

    POST   /v1/streams/lookup   {"conversation_id"}: the stream's state (live or done) and the bytes kept so far
    GET    /v1/stream/{id}      ?offset=N: the stream's bytes from N (what a dropped connection had not received),
                                then its live tail until it ends
    DELETE /v1/stream/{id}      forget it (a live one's generation is stopped first)

Refused with one named error each: 400 invalid_conversation_id, 404 stream_not_found, 403 not_stream_owner (another
token started it), 410 stream_expired (a bound or the TTL let it go), 400 invalid_offset.
"""

from __future__ import annotations

from typing import Annotated

from litestar import HttpMethod, Request, Response, delete, get, post, route
from litestar.params import Body, FromPath, Parameter
from litestar.response import Stream

from spinfc.server.auth import owner_of
from spinfc.server.conversation import check_id
from spinfc.server.errors import ApiError
from spinfc.server.openapi import error_spec, errors
from spinfc.server.service import ServiceDep
from spinfc.server.sse import kept_response
from spinfc.server.streams import KeptStream
from spinfc.wire.streams import StreamInfo, StreamLookup

REFUSALS = {
    **errors(401, 413, 415),
    400: error_spec("a conversation id that is not one (invalid_conversation_id), an offset past the bytes kept "
                    "(invalid_offset), or a body that breaks the format"),
    403: error_spec("the stream was started with another token (not_stream_owner)"),
    404: error_spec("no kept stream has that conversation id (stream_not_found)"),
    410: error_spec("the stream is no longer kept: its TTL passed or a bound let it go (stream_expired)"),
}


def info(stream: KeptStream, status: str | None = None) -> StreamInfo:
    return StreamInfo(id=stream.id, object="stream", route=stream.route,
                      status=status or ("live" if stream.live else "done"), bytes=len(stream.data),
                      created=stream.created)


@post("/v1/streams/lookup", status_code=200, sync_to_thread=False, responses=REFUSALS)
def lookup_stream(data: Annotated[StreamLookup, Body(title="Which kept stream")], service: ServiceDep,
                  request: Request) -> StreamInfo:
    """A kept stream's state: whether it still generates, and how many bytes a reader may resume from."""
    id = check_id(data.conversation_id, "conversation_id")
    return info(service.streams.find(id, owner_of(request), "conversation_id"))


@get("/v1/stream/{id:str}", sync_to_thread=False, media_type="text/event-stream", responses=REFUSALS)
def read_stream(id: FromPath[str], service: ServiceDep, request: Request,
                offset: Annotated[int, Parameter(ge=0, description="the bytes already read")] = 0) -> Stream:
    """The kept stream's events from byte `offset`, then its live tail: no byte lost or repeated."""
    stream = service.streams.find(check_id(id, "id"), owner_of(request))
    if offset > len(stream.data):
        raise ApiError(400, "invalid_offset", f"offset {offset:,} is past the {len(stream.data):,} bytes the stream "
                       f"of conversation {id!r} holds: send the count of bytes already read (0 to "
                       f"{len(stream.data):,})", param="offset")
    return kept_response(stream, offset)


@delete("/v1/stream/{id:str}", status_code=200, sync_to_thread=False, responses=REFUSALS)
def delete_stream(id: FromPath[str], service: ServiceDep, request: Request) -> StreamInfo:
    """Forget a kept stream; one still generating is stopped first (its readers get `stream_deleted`)."""
    return info(service.streams.delete(check_id(id, "id"), owner_of(request)), "deleted")


ALLOW = ", ".join(sorted({*read_stream.http_methods, *delete_stream.http_methods, "OPTIONS"}))


@route("/v1/stream/{id:str}", http_method=HttpMethod.OPTIONS, include_in_schema=False, sync_to_thread=False)
def stream_options(id: FromPath[str]) -> Response:
    """OPTIONS /v1/stream/{id}: both methods of the path (Litestar's own answer lists the first handler's alone)."""
    return Response(None, status_code=204, headers={"Allow": ALLOW})
