"""The router: several models behind one server, each loaded when a request first needs it.

    unloaded --request/load--> loading --ready--> ready --idle past ttl / swapped out / unload--> unloading
        ^                         |                                                               |
        +-------- failed <--------+ (the waiting requests get the reason; the next one retries)   +--> unloaded

A model's server is the app `spinfc serve` runs for it alone (`create_app` on its settings), started and stopped
through its ASGI lifespan, so a score through the router is the score of that model served alone. A request pins
its model while it runs (`acquire` ... `release`): a pinned model is never unloaded. Before a load, the router makes
room: resident models that hold no request are unloaded, least recently used first, until the new model's size
(measured at its last load, else estimated from its weights) fits the memory budget beside the rest; when the rest
are pinned, the load waits for them. Every transition is a `model_status` event to the subscribers (GET /models/sse).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Callable

from spinfc.router import memory
from spinfc.router.config import ModelEntry, RouterConfig
from spinfc.router.lifespan import AppLifespan
from spinfc.server.errors import ApiError

log = logging.getLogger("spinfc.router")
TICK_S = 1.0  # how often the TTL is checked
POLL_S = 0.1  # a wait for requests to finish looks again this often (a notification can come between two looks)


class ModelSlot:
    """One configured model: its state, its app while loaded, and what was measured of it."""

    def __init__(self, entry: ModelEntry) -> None:
        self.entry = entry
        self.state = "unloaded"  # unloaded | loading | ready | unloading | failed
        self.app = None
        self.lifespan: AppLifespan | None = None
        self.pins = 0  # requests running on it
        self.last_used = time.monotonic()
        self.memory_bytes: int | None = None  # measured at its last load
        self.load_seconds: float | None = None  # likewise
        self.error: str | None = None
        self.attempt: asyncio.Future | None = None  # the load in progress: its result is the app
        self.loading_since: float | None = None
        self.waiting_for: str | None = None  # what its load waits for (room held by running requests)

    @property
    def name(self) -> str:
        return self.entry.name

    @property
    def device(self) -> str:
        return self.entry.settings.engine.resolved_device()

    def size(self) -> int:
        """Bytes it takes, or is expected to take, resident."""
        if self.memory_bytes is not None:
            return self.memory_bytes
        estimate = memory.estimate(self.entry.settings.engine.model, self.device)
        return estimate if estimate is not None else 0

    def describe(self) -> dict:
        return {"model": self.name, "status": self.state, "in_flight": self.pins, "ttl": self.entry.ttl_s,
                "memory_bytes": self.memory_bytes, "load_seconds": self.load_seconds, "error": self.error}


class Router:
    def __init__(self, config: RouterConfig, create_app: Callable) -> None:
        self.config = config
        self.slots = {name: ModelSlot(entry) for name, entry in config.models.items()}
        self._create_app = create_app
        self._changed = asyncio.Condition()  # pins, states
        self._loads = asyncio.Lock()  # one load (and its room-making) at a time
        self._subscribers: set[asyncio.Queue] = set()
        self._ticker: asyncio.Task | None = None

    # ---- what requests do ---------------------------------------------------------------------------------------

    def slot(self, name: str | None) -> ModelSlot:
        """The slot a request's `model` names (None: the default), or a 400 naming the models there are."""
        names = ", ".join(self.slots)
        if name is None:
            if self.config.default is None:
                raise ApiError(400, "model_required", f"this server routes several models ({names}): name one in "
                               "`model`", param="model")
            name = self.config.default
        if name not in self.slots:
            raise ApiError(400, "model_not_served", f"this server routes {names}, not {name!r}: send one of those "
                           "names in `model` (GET /v1/models lists them)", param="model")
        return self.slots[name]

    async def acquire(self, slot: ModelSlot):
        """The app of `slot` once it is ready, pinned until `release`; loads it first (and makes room) when it is
        not resident. A load that does not finish within the load timeout is a 503 with a Retry-After from its
        measured load time; a load that failed is a 503 model_failed with the reason (the next request retries)."""
        deadline = time.monotonic() + self.config.load_timeout_s
        while True:
            if slot.state == "ready":
                slot.pins += 1
                slot.last_used = time.monotonic()
                return slot.app
            if slot.state in ("unloaded", "failed"):
                self._begin_load(slot)
            left = deadline - time.monotonic()
            if slot.state == "loading":
                try:
                    await asyncio.wait_for(asyncio.shield(slot.attempt), max(left, 0.0))
                except TimeoutError:
                    raise self._still_loading(slot) from None
                except Exception as error:  # noqa: BLE001  (the load's own failure, answered to every waiter)
                    raise ApiError(503, "model_failed", f"the model {slot.name!r} failed to load: {error}; the next "
                                   "request tries again (GET /slots shows its state)",
                                   headers={"Retry-After": "5"}) from None
                continue
            await self._wait_changed(left)  # unloading: once it is unloaded, the next turn loads it again
            if time.monotonic() >= deadline:
                raise self._still_loading(slot)

    async def release(self, slot: ModelSlot) -> None:
        slot.pins -= 1
        slot.last_used = time.monotonic()
        await self._notify()

    @contextlib.asynccontextmanager
    async def use(self, slot: ModelSlot):
        app = await self.acquire(slot)
        try:
            yield app
        finally:
            await self.release(slot)

    # ---- load and unload ----------------------------------------------------------------------------------------

    def _begin_load(self, slot: ModelSlot) -> None:
        slot.state, slot.error, slot.loading_since = "loading", None, time.monotonic()
        slot.attempt = asyncio.get_running_loop().create_future()
        slot.attempt.add_done_callback(lambda f: f.exception())  # a failure nobody awaited is not logged as lost
        asyncio.create_task(self._load(slot, slot.attempt), name=f"load-{slot.name}")

    async def load(self, slot: ModelSlot) -> None:
        """Load `slot` (POST /models/load), waiting as a request would but pinning nothing."""
        await self.acquire(slot)
        await self.release(slot)

    async def _load(self, slot: ModelSlot, attempt: asyncio.Future) -> None:
        async with self._loads:
            await self._publish(slot)
            app = None
            try:
                await self._make_room(slot)
                slot.waiting_for = None
                before = memory.in_use(slot.device)
                app = self._create_app(slot.entry.settings)
                slot.lifespan = AppLifespan(app)
                await slot.lifespan.start()
                service = app.state.service
                while service.status not in ("ready", "failed"):
                    await asyncio.sleep(0.05)
                if service.status == "failed":
                    raise RuntimeError(service.error or "the model could not be loaded")
                slot.memory_bytes = max(memory.in_use(slot.device) - before, 0) or slot.memory_bytes
                slot.load_seconds = time.monotonic() - slot.loading_since
                slot.app, slot.state, slot.last_used = app, "ready", time.monotonic()
                log.info("router: %s ready in %.1f s (%s)", slot.name, slot.load_seconds,
                         _gib(slot.memory_bytes))
                attempt.set_result(app)
            except Exception as error:  # noqa: BLE001  (any load failure is the model's state, not the router's)
                slot.error = f"{type(error).__name__}: {error}" if not isinstance(error, RuntimeError) else str(error)
                log.error("router: %s failed to load: %s", slot.name, slot.error)
                await self._stop_app(slot)
                slot.state = "failed"
                attempt.set_exception(RuntimeError(slot.error))
            await self._publish(slot)
            await self._notify()

    async def _make_room(self, slot: ModelSlot) -> None:
        """Unload idle residents, least recently used first, until `slot` fits the budget beside the rest; wait
        for pinned ones to finish when only they are left to unload."""
        need, waited_until = slot.size(), time.monotonic() + self.config.load_timeout_s
        while True:
            others = [s for s in self.slots.values() if s is not slot and s.state in ("ready", "unloading")]
            used = sum(s.size() for s in others)
            if used + need <= self.config.memory_bytes:
                return
            if not others:
                log.warning("router: %s (%s) alone is over the memory budget (%s): loading it anyway", slot.name,
                            _gib(need), _gib(self.config.memory_bytes))
                return
            idle = sorted((s for s in others if s.state == "ready" and s.pins == 0), key=lambda s: s.last_used)
            if idle:
                log.info("router: unloading %s to make room for %s", idle[0].name, slot.name)
                await self.unload(idle[0])
                continue
            busy = ", ".join(f"{s.name} ({s.pins} in flight)" for s in others)
            slot.waiting_for = f"room in the memory budget held by {busy}"
            if time.monotonic() >= waited_until:
                raise RuntimeError(f"no room within the memory budget ({_gib(self.config.memory_bytes)}) while "
                                   f"{busy} kept running for {self.config.load_timeout_s:.0f} s")
            await self._wait_changed(POLL_S)

    async def unload(self, slot: ModelSlot) -> None:
        """Unload `slot` once the requests it holds have finished (new ones wait, then load it again)."""
        if slot.state != "ready":
            return
        slot.state = "unloading"
        await self._publish(slot)
        while slot.pins > 0:
            await self._wait_changed(POLL_S)
        await self._stop_app(slot)
        slot.state = "unloaded"
        await self._publish(slot)
        await self._notify()

    async def _stop_app(self, slot: ModelSlot) -> None:
        app, lifespan, slot.lifespan, slot.app = slot.app or (slot.lifespan and slot.lifespan.app), slot.lifespan, \
            None, None
        if lifespan is not None:
            with contextlib.suppress(Exception):
                await lifespan.stop()
        service = getattr(getattr(app, "state", None), "service", None)
        if service is not None:  # a stopped app may outlive its unload (Litestar keeps references to its apps):
            service.engine = service.generator = None  # its model must not
        del app, lifespan, service
        await asyncio.to_thread(memory.give_back, slot.device)

    # ---- the TTL, start and stop --------------------------------------------------------------------------------

    async def start(self) -> None:
        self._ticker = asyncio.create_task(self._tick(), name="router-ttl")

    async def stop(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._ticker
        for slot in self.slots.values():
            if slot.state in ("ready", "unloading"):
                await self._stop_app(slot)
                slot.state = "unloaded"

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(TICK_S)
            now = time.monotonic()
            for slot in self.slots.values():
                ttl = slot.entry.ttl_s
                if ttl > 0 and slot.state == "ready" and slot.pins == 0 and now - slot.last_used >= ttl:
                    log.info("router: %s idle for %.0f s (ttl %s s): unloading", slot.name, now - slot.last_used, ttl)
                    await self.unload(slot)

    # ---- events -------------------------------------------------------------------------------------------------

    def subscribe(self) -> asyncio.Queue:
        queue: asyncio.Queue = asyncio.Queue(maxsize=1024)
        self._subscribers.add(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue) -> None:
        self._subscribers.discard(queue)

    async def _publish(self, slot: ModelSlot) -> None:
        event = {"model": slot.name, "status": slot.state, "time": time.time()}
        if slot.state == "failed":
            event["error"] = slot.error
        for queue in list(self._subscribers):
            with contextlib.suppress(asyncio.QueueFull):  # a subscriber that reads nothing loses events, not us
                queue.put_nowait(event)

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def _wait_changed(self, timeout_s: float) -> None:
        async with self._changed:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), max(timeout_s, 0.0))

    def _still_loading(self, slot: ModelSlot) -> ApiError:
        took = slot.load_seconds or self.config.load_timeout_s
        elapsed = time.monotonic() - (slot.loading_since or time.monotonic())
        retry = max(1, math.ceil(took - elapsed)) if slot.state == "loading" else 1
        why = f" (waiting for {slot.waiting_for})" if slot.waiting_for else ""
        return ApiError(503, "model_loading", f"the model {slot.name!r} is {slot.state}{why} and was not ready "
                        f"within {self.config.load_timeout_s:.0f} s: retry after {retry} s",
                        headers={"Retry-After": str(retry)})


def _gib(value: int | None) -> str:
    return "size unknown" if value is None else f"{value / 2**30:.2f} GiB"
