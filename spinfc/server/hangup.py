"""Work that stops when nobody waits for it: a client that hangs up, or the shutdown deadline.

    await while_connected(request, service, work)    the work's result; if the client disconnects first the work
                                                      is cancelled (its engine job withdrawn, its admission place
                                                      freed) and 499 client_closed_request ends the call; if the
                                                      shutdown deadline passes first, 503 shutting_down
    async for item in before_deadline(items, service) the items until the shutdown deadline, then ShuttingDown

Cancelling is what withdraws the work: `Engine.score` awaits the engine's future, and a cancelled await cancels
that future, which drops the request's contents not yet run (runtime/engine.py); `admit()` gives the place back
as the cancellation unwinds through it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

from litestar import Request

from spinfc.server.errors import ApiError

T = TypeVar("T")


class ShuttingDown(ApiError):
    def __init__(self) -> None:
        super().__init__(503, "shutting_down", "the server is shutting down and stopped this request before it was "
                         "answered (its --shutdown-timeout passed, or it was told to exit now): send it again, to "
                         "another server")


async def _disconnected(request: Request) -> None:
    """Return when the client hangs up. The body has been read, so the next ASGI message is the disconnect."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def while_connected(request: Request, service, work: Awaitable[T]) -> T:
    """`work`'s result, unless the client disconnects or the shutdown deadline passes first (then it is cancelled).

    `work` runs in the caller's own task, with two watcher tasks that cancel it: so it starts at once, not at a
    later turn of the event loop, and a request hands its work on (the compile thread's queue) in the same step
    as its route runs, ahead of the requests that arrived after it (a task made for it would start behind every
    other request of a burst)."""
    task = asyncio.current_task()
    reason: list[str] = []  # what cancelled the work: "gone" or "deadline"

    async def watch(kind: str, event: Callable[[], Awaitable]) -> None:
        try:
            await event()  # made here: a watcher cancelled before it starts leaves no coroutine never awaited
        except asyncio.CancelledError:
            raise
        except Exception:  # the connection cannot be read any more: the client is as good as gone
            kind = "gone"
        if not reason:
            reason.append(kind)
            task.cancel()

    watchers = (asyncio.ensure_future(watch("gone", lambda: _disconnected(request))),
                asyncio.ensure_future(watch("deadline", service.shutdown.deadline)))
    try:
        return await work  # cancelled, it unwinds first: the engine job withdrawn, the admission place freed
    except asyncio.CancelledError:
        if reason:
            task.uncancel()  # the watchers' cancellation, answered below
        elif service.shutdown.begun_at is None:
            raise
        else:  # uvicorn cancels what is left when it stops (a second signal): answer 503 all the same
            reason.append("deadline")
    finally:
        for watcher in watchers:
            watcher.cancel()
    if reason[0] == "gone":
        raise ApiError(499, "client_closed_request", "the client closed the connection before the answer; the "
                       "request was withdrawn")
    raise ShuttingDown()


async def before_deadline(items: AsyncIterator[T], service) -> AsyncIterator[T]:
    """`items` one by one until the shutdown deadline passes; then the pending step is cancelled and
    `ShuttingDown` is raised. Closed or cancelled early (a client that left), it cancels the step in flight first,
    so `items` is not running when its owner closes it (its clean-up stops the generation)."""
    deadline = asyncio.ensure_future(service.shutdown.deadline())
    step = None
    try:
        while True:
            step = asyncio.ensure_future(anext(items))
            done, _ = await asyncio.wait({step, deadline}, return_when=asyncio.FIRST_COMPLETED)
            if step not in done:
                raise ShuttingDown()
            try:
                item = step.result()
            except StopAsyncIteration:
                return
            yield item
    finally:
        deadline.cancel()
        if step is not None and not step.done():
            step.cancel()
            with contextlib.suppress(BaseException):
                await step
