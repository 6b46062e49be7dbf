"""The kept streams, by conversation id: bounded in count and bytes, least recently used out, a TTL, owner-checked.

    open(id, owner, ...)   a new kept stream for a streamed generation sent with X-Conversation-Id; a finished
                           one under the same id (the conversation's previous turn) is replaced
    find(id, owner)        the stream, for its owner only; refused: 404 stream_not_found, 403 not_stream_owner,
                           410 stream_expired
    delete(id, owner)      find, then forget it (a live one's generation is stopped first)

Bounds (`--stream-count`, `--stream-bytes`, `--stream-ttl`; a count of 0 keeps nothing):

    count   at the limit, a new stream pushes out the least recently used finished one; when every kept stream
            is live, the new one is 429 too_many_streams (a live stream is never pushed out for a newer one)
    bytes   over the limit, finished streams go first, least recently used first; then live ones (their
            generation stopped, their last event `stream_evicted`): the memory held is bounded whatever runs
    TTL     a finished stream not read for `ttl` seconds is forgotten (a live one does not expire)

A stream forgotten by a bound leaves its id and owner behind (at most `count` of them, oldest out), so asking for
it again is 410 stream_expired, saying why, rather than 404. Every check runs when the registry is called: no
timer, and a clock given for tests.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable

from spinfc.server.errors import ApiError
from spinfc.server.streams.kept import KeptStream

EVICTED = "it was pushed out to keep the kept streams within --stream-count / --stream-bytes"


class StreamRegistry:
    def __init__(self, count: int, max_bytes: int, ttl: float, clock: Callable[[], float] = time.monotonic):
        self.count, self.max_bytes, self.ttl, self.clock = count, max_bytes, ttl, clock
        self.streams: collections.OrderedDict[str, KeptStream] = collections.OrderedDict()  # least recently used first
        self.gone: collections.OrderedDict[str, tuple[str, str]] = collections.OrderedDict()  # id -> (owner, why)

    @property
    def on(self) -> bool:
        return self.count > 0

    @property
    def bytes(self) -> int:
        """The bytes the kept streams hold (at most `count` of them: summed when asked, never out of step)."""
        return sum(len(stream.data) for stream in self.streams.values())

    def open(self, id: str, owner: str, route: str, frame_error: Callable[[ApiError], bytes]) -> KeptStream:
        self._expire()
        held = self.streams.get(id)
        if held is not None:
            self._check_owner(id, held.owner, owner, "X-Conversation-Id")
            if held.live:
                raise ApiError(409, "stream_in_progress", f"conversation {id!r} has a generation streaming: read it "
                               f"(GET /v1/stream/{id}), cancel it (POST /v1/chat/completions/control) or wait for "
                               "it to end before starting the next one", param="X-Conversation-Id")
            self._forget(held)
        if len(self.streams) >= self.count:
            finished = [s for s in self.streams.values() if not s.live]
            if not finished:
                raise ApiError(429, "too_many_streams", f"the server keeps {self.count} streams and every one is "
                               "still generating: retry when one ends, or send the request without "
                               "X-Conversation-Id (not kept)", headers={"Retry-After": "5"})
            self._evict(finished[0])
        self.gone.pop(id, None)
        stream = KeptStream(id=id, owner=owner, route=route, frame_error=frame_error, grew=self._grew,
                            used=self.clock())
        self.streams[id] = stream
        return stream

    def find(self, id: str, owner: str, param: str = "id") -> KeptStream:
        """The stream of conversation `id` for `owner`; `param` names where the id came from (for the errors)."""
        self._expire()
        stream = self.streams.get(id)
        if stream is None:
            if id in self.gone:
                was, why = self.gone[id]
                self._check_owner(id, was, owner, param)
                raise ApiError(410, "stream_expired", f"the stream of conversation {id!r} is no longer kept: {why}; "
                               "send the request again", param=param)
            raise ApiError(404, "stream_not_found", f"no kept stream has conversation id {id!r}: a stream is kept "
                           "only when its request sent X-Conversation-Id with `stream: true`", param=param)
        self._check_owner(id, stream.owner, owner, param)
        self._touch(stream)
        return stream

    def delete(self, id: str, owner: str) -> KeptStream:
        stream = self.find(id, owner)
        stream.drop(ApiError(410, "stream_deleted", f"the stream of conversation {id!r} was deleted (DELETE "
                             f"/v1/stream/{id}) while it was generating"))
        self._forget(stream)
        return stream

    def close(self) -> None:
        """Stop every live stream's generation (the server is stopping)."""
        for stream in list(self.streams.values()):
            stream.drop(ApiError(503, "shutting_down", "the server is shutting down: send the request again, to "
                                 "another server"))

    # ---- the bounds ---------------------------------------------------------------------------------------------

    def _check_owner(self, id: str, kept_for: str, owner: str, param: str) -> None:
        if kept_for != owner:
            raise ApiError(403, "not_stream_owner", f"conversation {id!r} was started with another token: only the "
                           "token (Authorization: Bearer or x-api-key) that started a stream may read, cancel or "
                           "delete it", param=param)

    def _touch(self, stream: KeptStream) -> None:
        stream.used = self.clock()
        self.streams.move_to_end(stream.id)

    def _grew(self, stream: KeptStream) -> None:
        self._touch(stream)
        while self.bytes > self.max_bytes and self.streams:
            finished = [s for s in self.streams.values() if not s.live]
            self._evict(finished[0] if finished else next(iter(self.streams.values())))

    def _expire(self) -> None:
        now = self.clock()
        for stream in [s for s in self.streams.values() if not s.live and now - s.used >= self.ttl]:
            self._forget(stream, f"it ended and was not read for --stream-ttl ({self.ttl:g} s)")

    def _evict(self, stream: KeptStream) -> None:
        stream.drop(ApiError(410, "stream_evicted", f"the stream of conversation {stream.id!r} was stopped: {EVICTED}"))
        self._forget(stream, EVICTED)

    def _forget(self, stream: KeptStream, why: str | None = None) -> None:
        if self.streams.get(stream.id) is not stream:
            return
        del self.streams[stream.id]
        if why is not None:
            self.gone[stream.id] = (stream.owner, why)
            while len(self.gone) > self.count:
                self.gone.popitem(last=False)
