"""Which requests the engine takes: at most `--queue` waiting beside the one running, none while draining.

    admit()     a request that will use the engine (score, decisions, chat) enters; beyond queue + 1 requests
                at once it is 429 concurrency_limit with Retry-After; while draining it is 503 draining
    drain()     POST /v0/drain: /readyz turns 503 and new work is refused; requests already admitted finish
    undrain()   DELETE /v0/drain: back to normal

The engine packs the contents of every admitted request into shared passes, so "running" is not one request on
the GPU but whatever the current pass holds; the cap counts requests admitted and not yet answered. Retry-After is
the mean time recent requests took (rounded up, at least 1 s): about when a place frees.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Iterator

from spinfc.server.errors import ApiError

SMOOTHING = 0.2  # weight of the newest request in the running mean of request time


class Admission:
    def __init__(self, queue: int) -> None:
        self.capacity = queue + 1  # the one running and `queue` waiting
        self.active = 0
        self.draining = False
        self.mean_seconds = 1.0
        self._lock = threading.Lock()

    def retry_after(self) -> str:
        return str(max(1, math.ceil(self.mean_seconds)))

    @contextlib.contextmanager
    def admit(self) -> Iterator[None]:
        """Hold a place for one request while the block runs; raises 503 draining or 429 concurrency_limit."""
        with self._lock:
            if self.draining:
                raise ApiError(503, "draining", "this server is draining (POST /v0/drain) and takes no new work: "
                               "send the request to another server", headers={"Retry-After": self.retry_after()})
            if self.active >= self.capacity:
                raise ApiError(429, "concurrency_limit", f"{self.active} requests are already running or waiting "
                               f"(--queue {self.capacity - 1}): retry after Retry-After seconds, and send more "
                               "contents per request rather than more requests",
                               headers={"Retry-After": self.retry_after()})
            self.active += 1
        started = time.monotonic()
        try:
            yield
        finally:
            seconds = time.monotonic() - started
            with self._lock:
                self.active -= 1
                self.mean_seconds += SMOOTHING * (seconds - self.mean_seconds)

    def drain(self) -> None:
        self.draining = True

    def undrain(self) -> None:
        self.draining = False
