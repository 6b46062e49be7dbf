"""The engine's counters since it started, for health and metrics routes (and admission's measured rate)."""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time

import attrs

log = logging.getLogger("spinfc.engine")


@attrs.define
class EngineStats:
    """Counters since an engine started, for health and metrics routes. The worker thread writes the pass
    counters; the request counters change under `lock`, from whichever thread ends a request."""

    passes: int = 0
    rows_used: int = 0  # rows holding a token, over all passes
    rows_total: int = 0  # rows launched over all passes (the budget each, or the used blocks when trimmed)
    reads: int = 0
    prompt_passes: int = 0  # completions' prompt passes (their token logprobs)
    requests_done: int = 0
    requests_failed: int = 0
    floor_hits: int = 0
    floor_misses: int = 0
    queued: int = 0  # requests submitted and not yet answered (or given up)
    queued_tokens: int = 0  # rows of work admitted by the worker and not yet run (what admission bounds)
    rate: float | None = None  # rows per second of pass time, smoothed over recent passes (None before the first)
    decode_steps: int = 0  # extraction: model steps over all passes (runtime/extract/decode.py)
    decode_rows: int = 0  # extraction: beams fed over all steps
    queued_decode: int = 0  # extraction: decode rows admitted and not yet decoded, at most (extract/budget.py)
    decode_rate: float | None = None  # extraction: decode rows per second, smoothed (None before the first decode)
    lock: threading.Lock = attrs.field(factory=threading.Lock, repr=False)

    def settled(self, future: concurrent.futures.Future) -> None:
        """Count a request's end, from whichever thread ends it."""
        with self.lock:
            self.queued -= 1
            if not future.cancelled() and future.exception() is not None:
                self.requests_failed += 1
            elif not future.cancelled():
                self.requests_done += 1

    def observe_pass(self, rows: int, seconds: float, smoothing: float = 0.3) -> None:
        """Count a pass of `rows` launched rows that took `seconds` (the measured rate admission's Retry-After uses)."""
        if seconds > 0:
            rate = rows / seconds
            self.rate = rate if self.rate is None else self.rate + smoothing * (rate - self.rate)

    def observe_decode(self, rows: int, seconds: float, smoothing: float = 0.3) -> None:
        """Count a pass's decode of `rows` beam rows that took `seconds` (its slices together)."""
        if seconds > 0 and rows > 0:
            rate = rows / seconds
            self.decode_rate = rate if self.decode_rate is None else self.decode_rate + smoothing * (
                rate - self.decode_rate)

    @property
    def fill_ratio(self) -> float:
        return self.rows_used / self.rows_total if self.rows_total else 0.0

    def collected(self, units, pending, on_pass=None) -> float:
        """Count a pass of `units` collected (`runner.Pending`); tell `on_pass(rows used, rows launched, seconds)`
        (metrics); the seconds it took."""
        seconds = time.perf_counter() - pending.started
        used = sum(unit.segment.length for unit in units)
        self.rows_used += used
        self.rows_total += pending.rows
        self.reads += pending.reads
        self.observe_pass(pending.rows, seconds)
        if on_pass is not None:
            try:  # an observer (metrics) that fails must not turn a good pass into a failed one
                on_pass(used, pending.rows, seconds)
            except Exception:
                log.exception("the on_pass observer failed")
        return seconds
