"""Which requests the engine takes: admission by queued work, none while draining.

    admit()     a request that will use the engine (score, decisions, chat) enters while the work queued in the
                engine (tokens admitted and not yet run) is under `--max-queued-tokens` (default: four passes);
                beyond it 429 queue_full with Retry-After; a request that decodes (generation, or a score found
                to extract: `check_decode`) counts the decode work ahead of it too; beyond `--queue` requests at once (when set)
                429 concurrency_limit; while draining 503 draining
    drain()     POST /v0/drain: /readyz turns 503 and new work is refused; requests already admitted finish
    undrain()   DELETE /v0/drain: back to normal

The engine packs the contents of every admitted request into shared passes, so many small requests fill passes as
well as one large one: the bound counts tokens, not requests. Decode work counts in the same bound at its bounded
cost (extraction: beams x max_tokens of every slot of every input; generation: max_tokens of every answer), each
decoded token weighed as DECODE_ROW_COST pass rows. What is counted is the work queued *ahead* of the request in
the fair schedule (Service.work_ahead): a score waits for the scoring rows queued (decode yields a slice to every
pass); generations take turns token by token, so a generation of n tokens waits for at most n of each other's;
extraction decodes run one after another. Retry-After is the queued work over the measured
rate (rows per second of pass time, from the warm-up pass on), about when the queue has room again; before any pass
was measured, a cautious estimate.
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Callable, Iterator

from spinfc.server.errors import ApiError

UNMEASURED_SECONDS = 5  # Retry-After before any pass was measured (no warm-up): a cautious guess, not 1 s
MAX_RETRY_AFTER = 600


class Admission:
    def __init__(self, queue: int | None, max_queued_tokens: int | None = None) -> None:
        """`queue`: requests accepted while one is running (None: no cap); `max_queued_tokens`: the work bound
        (None until the engine's budget is known: `bind`)."""
        self.capacity = None if queue is None else queue + 1  # the one running and `queue` waiting
        self.max_queued_tokens = max_queued_tokens
        self.active = 0
        self.draining = False
        self._work: Callable[[str, int], tuple[int, float | None]] = lambda kind, cost: (0, None)
        self._lock = threading.Lock()

    def bind(self, work: Callable[[str, int], tuple[int, float | None]], budget: int) -> None:
        """Read the queued work from the engine: `work(kind, cost)` -> (the work queued ahead of a request of that
        kind and decode cost, in pass rows; rows per second or None): Service.work_ahead. The default bound is four
        passes of `budget` rows."""
        self._work = work
        if self.max_queued_tokens is None:
            self.max_queued_tokens = 4 * budget

    def retry_after(self, kind: str = "score", cost: int = 0) -> str:
        """Seconds until the work ahead has run at the measured rate (at least 1)."""
        queued, rate = self._work(kind, cost)
        if not rate:
            return str(UNMEASURED_SECONDS)
        return str(min(MAX_RETRY_AFTER, max(1, math.ceil(queued / rate))))

    def check_decode(self, kind: str, cost: int) -> None:
        """Inside `admit()`'s place: 429 queue_full when the work ahead of this decode work (`kind` "extract" or
        "generate", `cost` its decode tokens at most) is at the bound while another request holds a place. A
        request found to decode once its body is read (a /v1/score with <*> or <gen> slots) is checked here."""
        with self._lock:
            self._refuse_when_full(kind, cost, active=2)

    def _refuse_when_full(self, kind: str, cost: int, active: int) -> None:
        """429 queue_full when the work ahead is at the bound and at least `active` requests hold places."""
        queued, _ = self._work(kind, cost)
        if self.max_queued_tokens is not None and queued >= self.max_queued_tokens and self.active >= active:
            raise ApiError(429, "queue_full", f"{queued:,} tokens of work are queued ahead of this request, at the "
                           f"server's bound of {self.max_queued_tokens:,} (--max-queued-tokens): retry after "
                           "Retry-After seconds", headers={"Retry-After": self.retry_after(kind, cost)})

    @contextlib.contextmanager
    def admit(self, kind: str = "score", cost: int = 0) -> Iterator[None]:
        """Hold a place for one request while the block runs; raises 503 draining or 429 queue_full /
        concurrency_limit. `kind` and `cost`: what it asks for (a score; a generation of `cost` tokens)."""
        with self._lock:
            if self.draining:
                raise ApiError(503, "draining", "this server is draining (POST /v0/drain) and takes no new work: "
                               "send the request to another server", headers={"Retry-After": self.retry_after()})
            self._refuse_when_full(kind, cost, active=1)
            if self.capacity is not None and self.active >= self.capacity:
                raise ApiError(429, "concurrency_limit", f"{self.active} requests are already running or waiting "
                               f"(--queue {self.capacity - 1}): retry after Retry-After seconds, and send more "
                               "contents per request rather than more requests",
                               headers={"Retry-After": self.retry_after()})
            self.active += 1
        try:
            yield
        finally:
            with self._lock:
                self.active -= 1

    def drain(self) -> None:
        self.draining = True

    def undrain(self) -> None:
        self.draining = False
