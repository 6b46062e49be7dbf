"""The scheduler's queues (scheduler.py decides over them): what waits, admitted once, and what a delivered unit
leaves behind.

    inbox        jobs put there from any thread (`add`); the worker admits them (`_admit`) at its next decision, or
                 as they come while it waits (`_wait`: an idle wait calls `on_idle` once nothing has come for
                 `idle_seconds`, the engine's trim of the C heap, allocator.py)
    units        a request's contents as `Unit`s, oldest first; a floor cached (`floor_cache`) is not queued again,
                 and one queued by another request (`floors_queued`) is shared
    reads        completions' prompts waiting for their token logprobs (`PromptRead`)
    turns        generations, taking turns a token at a time (turns.py)
"""

from __future__ import annotations

import collections
import itertools
import logging
import queue
from collections.abc import Callable

import numpy as np

from spinfc.passes.plan_packing import floor_first
from spinfc.runtime.extract.budget import decode_work
from spinfc.runtime.extract.scheduling import Decoding
from spinfc.runtime.schedule.stats import EngineStats
from spinfc.runtime.schedule.turns import Generating, Turns
from spinfc.runtime.schedule.work import Job, PromptRead, Unit

log = logging.getLogger("spinfc.engine")


class PassFailed(Exception):
    """The forward pass holding this request's content raised; the message carries the original error."""


class EngineClosed(Exception):
    """The engine stopped before this request ran."""


class Queues:
    def __init__(self, stats: EngineStats, floor_cache_size: int = 256, on_idle: Callable[[], object] | None = None,
                 idle_seconds: float = 0.25):
        self.stats, self.on_idle, self.idle_seconds = stats, on_idle, idle_seconds
        self.inbox: queue.SimpleQueue[Job | PromptRead | Generating | None] = queue.SimpleQueue()
        self.units: list[Unit] = []  # waiting contents, oldest first
        self.reads: collections.deque[PromptRead] = collections.deque()  # completions' prompts waiting
        self.turns = Turns()
        self.floors_queued: dict[str, Unit] = {}
        self.floor_cache: collections.OrderedDict = collections.OrderedDict()
        self.floor_cache_size = floor_cache_size
        self.closed = False  # close() was called (its mark, None, came through the inbox)
        self._seq = itertools.count()

    def add(self, job: Job | PromptRead | Generating) -> None:
        """Queue a job (any thread)."""
        job.seq = next(self._seq)
        self.inbox.put(job)

    def _admit(self, first=queue.Empty) -> None:
        """Every job in the inbox (after `first`, taken off it already) into the queues; None marks close()."""
        job = first
        while True:
            if job is None:
                self.closed = True
            elif job is not queue.Empty and not job.done:
                try:
                    self._admit_job(job)
                except Exception as error:  # the job's units (if any) are dropped once it is done
                    log.exception("a request could not be admitted")
                    job.fail(PassFailed(f"the request could not be queued: {type(error).__name__}: {error}"))
            try:
                job = self.inbox.get_nowait()
            except queue.Empty:
                return

    def _wait(self, seconds: float | None) -> None:
        """Admit what arrives within `seconds` (None: however long it takes, `on_idle` called once nothing has come
        for `idle_seconds`)."""
        idle = seconds is None and self.on_idle is not None
        try:
            first = self.inbox.get(timeout=self.idle_seconds if idle else seconds)
        except queue.Empty:
            if not idle:
                return
            self.on_idle()
            first = self.inbox.get()
        self._admit(first)

    def _admit_job(self, job: Job | PromptRead | Generating) -> None:
        if isinstance(job, Generating):
            self.turns.admit(job)
            return
        if isinstance(job, PromptRead):
            job.scores, job.remaining = [None] * len(job.prompts), len(job.prompts)
            if job.prompts:
                self.reads.append(job)
            else:
                job.finish()
            return
        compiled = job.compiled
        key, first = compiled.floor_key, floor_first(compiled.program)
        inputs = [self._unit(compiled, c, job) for c in compiled.inputs]
        if not first:  # the inputs, then the floor: the queue order `--emit plan` shows
            self.units.extend(inputs)
        cached = self.floor_cache.get(key)
        if cached is not None:
            self.floor_cache.move_to_end(key)
            self.stats.floor_hits += 1
            job.floor_cached = True
            job.scores[compiled.floor] = cached
        elif key in self.floors_queued:
            self.stats.floor_hits += 1
            self.floors_queued[key].consumers.append((job, compiled.floor))
        else:
            self.stats.floor_misses += 1
            self.floors_queued[key] = unit = self._unit(compiled, compiled.floor, job, key)
            self.units.append(unit)
        if first:  # extraction reads the floor's contexts: the floor runs first
            self.units.extend(inputs)
        job.remaining = len(compiled.segments) - len(job.scores)
        if job.remaining == 0:
            job.finish()

    def _unit(self, compiled, content: int, job: Job, key: str | None = None) -> Unit:
        segment = compiled.segments[content]
        job.processed_tokens += segment.length
        decode = decode_work(compiled.program, 1) if compiled.extracts and key is None else 0
        with self.stats.lock:
            self.stats.queued_tokens += segment.length
            self.stats.queued_decode += decode
        return Unit(segment, compiled.arrays[content], compiled.score_map, [(job, content)], floor_key=key,
                    decode=decode)

    def _forget(self, unit: Unit) -> bool:
        if unit.floor_key is not None and self.floors_queued.get(unit.floor_key) is unit:
            del self.floors_queued[unit.floor_key]
        with self.stats.lock:
            self.stats.queued_tokens -= unit.segment.length
            self.stats.queued_decode -= unit.decode
        return False

    def _deliver(self, unit: Unit, scores) -> None:
        self._forget(unit)
        if unit.floor_key is not None:
            self.floor_cache[unit.floor_key] = scores
            while len(self.floor_cache) > self.floor_cache_size:
                self.floor_cache.popitem(last=False)
        unit.deliver(scores)

    def _scores(self, unit: Unit, logprobs: np.ndarray, scheme: str | None):
        """The unit's option scores from its reads' logprobs; None (and the unit failed) when they do not add up, or
        when one is not finite (a half-precision product overflowed: never reported as a score)."""
        error = None
        if not np.isfinite(logprobs).all():
            log.error("a pass returned non-finite logprobs (%s)", scheme)
            error = PassFailed(
                f"the model's scores overflowed in {scheme or 'its dtype'} on this content: "
                "start the server with --dtype bfloat16 (or float32), whose range holds it, and send it again")
        else:
            try:
                return unit.score_map.scores(logprobs)
            except Exception as failure:
                log.exception("results of a pass could not be assembled")
                error = PassFailed(f"results could not be assembled: {failure}")
        self._forget(unit)
        unit.fail(error)
        return None

    def _decode_ended(self, decoding: Decoding) -> None:
        """A decode that ended (or was withdrawn): its units' scores (or its error) go to their requests."""
        if not decoding.done:  # withdrawn
            decoding.close()
        error = decoding.error
        for unit, unit_scores in zip(decoding.units, decoding.results()):
            if error is not None:
                self._forget(unit)
                unit.fail(PassFailed(f"extraction failed: {type(error).__name__}: {error}"))
            elif unit_scores is not None and unit.wanted():
                self._deliver(unit, unit_scores)
            else:
                self._forget(unit)
