"""Driving an ASGI app's lifespan by hand: the router starts and stops a model's app as the server would (the ASGI
lifespan protocol: `lifespan.startup`, then later `lifespan.shutdown`), so the app runs exactly as `spinfc serve`
runs it alone, its background model load included."""

from __future__ import annotations

import asyncio


class AppLifespan:
    """`await start()` returns once the app finished its startup (raises if it failed); `await stop()` once it
    finished its shutdown."""

    def __init__(self, app) -> None:
        self.app = app
        self._to_app: asyncio.Queue = asyncio.Queue()
        self._from_app: asyncio.Queue = asyncio.Queue()
        self._task: asyncio.Task | None = None

    async def start(self) -> None:
        scope = {"type": "lifespan", "asgi": {"version": "3.0", "spec_version": "2.0"}, "state": {}}
        self._task = asyncio.create_task(self.app(scope, self._to_app.get, self._from_app.put), name="app-lifespan")
        await self._to_app.put({"type": "lifespan.startup"})
        message = await self._reply()
        if message["type"] != "lifespan.startup.complete":
            raise RuntimeError(message.get("message") or "the app's startup failed")

    async def stop(self) -> None:
        if self._task is None or self._task.done():
            return
        await self._to_app.put({"type": "lifespan.shutdown"})
        await self._reply()
        await self._task

    async def _reply(self) -> dict:
        getting = asyncio.ensure_future(self._from_app.get())
        done, _ = await asyncio.wait({getting, self._task}, return_when=asyncio.FIRST_COMPLETED)
        if getting in done:
            return getting.result()
        getting.cancel()
        self._task.result()  # raises what the lifespan raised
        return {"type": "lifespan.startup.failed", "message": "the app's lifespan ended before answering"}
