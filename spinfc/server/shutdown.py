"""Stopping the server: a deadline for the work in flight, and a second signal that does not wait.

    first SIGTERM or SIGINT   uvicorn stops taking connections; the work in flight has --shutdown-timeout seconds
                              to finish. At the deadline a stream gets a last event, the error `shutting_down`, and
                              ends; a request still waiting for its scores is answered 503 shutting_down.
    second one (either)       the deadline passes now: every request still in flight is answered 503 shutting_down
                              (a stream gets its last event) within FLUSH_S, and the process exits.

`Shutdown` is the clock (one per app, on the `Service`); `GracefulServer` is uvicorn's server with these signals.
uvicorn's own `timeout_graceful_shutdown` is set a little past the deadline, so it only catches what the deadline
could not end (a connection stuck sending).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import threading
import time

import uvicorn

log = logging.getLogger("spinfc.server")

BACKSTOP_S = 5  # after the deadline, uvicorn cancels whatever still runs
FLUSH_S = 0.5  # after a second signal, what the answers in flight have to be written before uvicorn stops
FORCED_EXIT_S = 3  # after a second signal, the process ends even if a thread will not let it


class Shutdown:
    """The shutdown clock: `begin()` (any thread) starts it; `deadline()` returns once `timeout_s` have passed."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self.begun_at: float | None = None
        self.forced = False  # a second signal: exit without waiting for the work in flight
        self._loop: asyncio.AbstractEventLoop | None = None
        self._passed = asyncio.Event()

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """The event loop the server runs in (called from the app's lifespan; an app served again, as tests do,
        gets a new loop and a new event: an asyncio.Event belongs to the first loop that waits on it)."""
        self._loop = loop
        self._passed = asyncio.Event()

    def begin(self) -> None:
        """Start the clock, once; safe from a signal handler or another thread."""
        if self.begun_at is not None:
            return
        self.begun_at = time.monotonic()
        log.info("shutting down: work in flight has %s s to finish (--shutdown-timeout)", self.timeout_s)
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.call_later, self.timeout_s, self._passed.set)

    def expire(self) -> None:
        """Let the deadline pass now (a second signal): every request still waiting is answered at once, and the
        app's close does not wait for the engine's pass in flight (`forced`)."""
        self.forced = True
        self.begin()
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._passed.set)

    @property
    def passed(self) -> bool:
        return self._passed.is_set()

    async def deadline(self) -> None:
        """Return once the shutdown began and its deadline passed (never, while the server runs)."""
        await self._passed.wait()


class GracefulServer(uvicorn.Server):
    """uvicorn's server whose first SIGTERM/SIGINT starts `shutdown` and whose second one forces the exit."""

    def __init__(self, config: uvicorn.Config, shutdown: Shutdown) -> None:
        config.timeout_graceful_shutdown = shutdown.timeout_s + BACKSTOP_S
        super().__init__(config)
        self.clock = shutdown  # not `shutdown`: uvicorn.Server has a method of that name
        self._owns_signals = False  # uvicorn takes SIGTERM/SIGINT only when it runs in the main thread

    async def serve(self, sockets=None) -> None:
        self._owns_signals = threading.current_thread() is threading.main_thread()
        await super().serve(sockets)

    def handle_exit(self, sig: int, frame) -> None:
        second = self.should_exit
        if not second:
            super().handle_exit(sig, frame)
            self.clock.begin()
            return
        # uvicorn's own second SIGINT would force the exit with the answers unwritten: the deadline passes now
        # instead, so every request in flight is answered 503 shutting_down, and FLUSH_S later the exit is forced
        # (a second SIGTERM means the same)
        log.warning("a second %s: answering the work in flight 503 shutting_down and exiting",
                    signal.Signals(sig).name)
        self._captured_signals.append(sig)  # raised again once uvicorn has stopped, as its own handler records it
        self.clock.expire()
        loop = self.clock._loop
        if loop is not None:
            loop.call_soon_threadsafe(loop.call_later, FLUSH_S, setattr, self, "force_exit", True)
        else:
            self.force_exit = True
        if self._owns_signals:  # the process's own signal: end it even if a thread will not stop
            timer = threading.Timer(FORCED_EXIT_S, os._exit, args=(128 + sig,))
            timer.daemon = True
            timer.start()


async def on_daemon_thread(work) -> None:
    """Run `work()` on a daemon thread and wait for it. Unlike `asyncio.to_thread`, a cancelled wait (a forced exit
    tearing the loop down) leaves the thread behind instead of holding the process until it ends."""
    loop = asyncio.get_running_loop()
    finished = loop.create_future()

    def run() -> None:
        try:
            work()
        finally:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
                loop.call_soon_threadsafe(lambda: finished.done() or finished.set_result(None))

    threading.Thread(target=run, name="spinfc-close", daemon=True).start()
    await finished
