"""One kept stream: the bytes a streamed generation sent, as it sent them, for whoever reads them from an offset.

    fill(frames)        the producer (a task of its own): every frame appended as it comes, so the generation goes
                        on when the client that started it hangs up; the stream ends when the frames do
    read_from(offset)   a reader: the bytes from `offset` on, then each frame as it is appended, until the stream
                        ends. Readers come and go (a dropped connection, a reconnect); none of them steers the
                        generation
    cancel              the generation's cancel token (POST /v1/chat/completions/control): it ends at its next step
                        with stop reason `cancelled`, which the frames send as the stream's last events
    drop(error)         the registry's: the generation stopped, `error` sent as the last frame (the route's format)

A reader never sees a byte twice or misses one: it reads `data` by offset, and `data` is only ever appended to.
Everything here runs on the event loop, but `cancel`, which the engine's thread reads.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Callable

import attrs

from spinfc.server.errors import ApiError


@attrs.define(eq=False)
class KeptStream:
    id: str  # the X-Conversation-Id it was started with
    owner: str  # who may read, cancel or delete it (auth.owner_of: a digest of the token that started it)
    route: str  # "chat.completions" or "messages": the format of its frames
    frame_error: Callable[[ApiError], bytes]  # an error as the last frame of this route's stream
    grew: Callable[["KeptStream"], None]  # the registry's bounds, checked after each append
    used: float  # when it was last written or read, on the registry's clock (its TTL runs from there)
    created: int = attrs.field(factory=lambda: int(time.time()))
    data: bytearray = attrs.field(factory=bytearray)
    live: bool = True  # its generation has not ended
    cancel: threading.Event = attrs.field(factory=threading.Event)
    task: asyncio.Task | None = None  # the producer
    _changed: asyncio.Event = attrs.field(factory=asyncio.Event)

    def start(self, frames: AsyncIterator[bytes]) -> None:
        """Run the producer: `frames` into the stream, whoever reads it."""
        self.task = asyncio.get_running_loop().create_task(self.fill(frames), name=f"spinfc-stream-{self.id}")

    async def fill(self, frames: AsyncIterator[bytes]) -> None:
        try:
            async for frame in frames:
                self.append(frame)
        finally:
            self.end()

    def append(self, frame: bytes) -> None:
        if not self.live:
            return
        self.data += frame
        self._wake()
        self.grew(self)

    def end(self) -> None:
        self.live = False
        self._wake()

    def drop(self, error: ApiError) -> None:
        """Stop the generation (its producer cancelled: the admission place freed) and end the stream with `error`."""
        if not self.live:
            return
        if self.task is not None and not self.task.done():
            self.task.cancel()
        self.data += self.frame_error(error)
        self.end()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()  # the next change wakes the readers waiting from now on

    async def read_from(self, offset: int) -> AsyncIterator[bytes]:
        """The bytes from `offset`, then the live tail, until the stream ends."""
        while True:
            if offset < len(self.data):
                chunk = bytes(self.data[offset:])
                offset += len(chunk)
                yield chunk
            elif not self.live:
                return
            else:
                await self._changed.wait()
