"""The engine's scheduler: it owns the queues and makes every decision. `schedule()` returns the next piece of work
(work.py: a pass, a collect, a decode slice, a prompt pass, a generation step, a wait), the engine runs it, and
`deliver(work, result)` takes its result back: scores to their requests, floors and decodes started, jobs finished.

    admit     jobs from the inbox (any thread puts them there): a request's contents become `Unit`s (a floor
              cached, or queued by another request, is shared); a completion's prompts a `PromptRead`
    choose    the oldest work first: a prompt pass where a completion is oldest, else a pass of the queued units
              (`PassSizing.next_pass`); a decode slice in turn with either while decodes run (at most
              `decode_limit` at once: an extraction pass waits while that many decode); a generation's step (one
              token, turns.py) after each of those while generations run
    wait      on an idle device a part-empty pass waits for requests on their way (`PassSizing.waits_for_more`, up
              to `longest_wait`; the first pass after a quiet spell LINGER even before one is seen arriving)
    overlap   chosen at start (`overlap`: the device's launches return before the pass has run, CUDA): the next
              pass goes behind the one in flight only once arrivals fill it (FULL, with more left over); a
              part-full one waits for the pass in flight to end and is launched before that pass's scores are
              delivered, so the device waits for no results
    withdraw  work nobody waits for any more is dropped before it runs; a decode of withdrawn requests is stopped
"""

from __future__ import annotations

import collections
import logging
import time
from collections.abc import Callable

import attrs
import numpy as np

from spinfc.runtime.extract.budget import DecodeMemory
from spinfc.runtime.extract.grammars import Vocabulary
from spinfc.runtime.extract.scheduling import (Decoding, extraction_prompt_rows, extracts, floor_scores, floors_first,
                                              free_lane)
from spinfc.runtime.launch.generate import Cancelled
from spinfc.runtime.launch.prompt_logprobs import prompt_program
from spinfc.runtime.schedule.queues import EngineClosed, PassFailed, Queues  # noqa: F401 (re-exported)
from spinfc.runtime.schedule.sizing import DECODE_ROW_COST, FULL, PassSizing  # noqa: F401 (re-exported)
from spinfc.runtime.schedule.stats import EngineStats  # noqa: F401 (re-exported)
from spinfc.runtime.schedule.work import (  # noqa: F401 (floor_key re-exported)
    Collect, DecodeSlice, Failed, GenerateStep, Job, Launched, Pass, PromptPass, PromptRead, Unit, Wait, floor_key)
from spinfc.shapes import Shapes

log = logging.getLogger("spinfc.engine")

# Where shapes are fixed, how long the first pass after a quiet spell (nothing queued, nothing running) waits for a
# request to start arriving when it would launch mostly empty and none is on its way: requests sent together reach
# the server a few milliseconds apart, and a pass launched with the first alone can cost a larger last pass.
LINGER = 0.005
# An extraction decode runs in slices while other work waits: each slice as long as the last pass took (at least
# this), so a score or a decode behind it waits about a pass per slice, not the whole decode.
DECODE_SLICE = 0.02


@attrs.define(eq=False)
class Flight:
    """A pass launched on an asynchronous device and not yet collected (or collected, its scores held back until
    the next launch: `logprobs`)."""

    units: list[Unit]
    pending: object  # runner.Pending
    logprobs: np.ndarray | None = None


class Scheduler(Queues):
    def __init__(self, shapes: Shapes, model, stats: EngineStats, *, decode_limit: int, ran: Callable,
                 expecting: Callable[[], bool] = lambda: False, on_pass: Callable | None = None,
                 floor_cache_size: int = 256, on_idle: Callable[[], object] | None = None,
                 idle_seconds: float = 0.25):
        """`ran(pending)`: whether a launched pass has run (the runner's); `expecting()`: whether requests are on
        their way (compiling); `on_pass(rows used, rows launched, seconds)` after each pass (metrics); `on_idle()`
        once nothing has been queued or running for `idle_seconds` (the engine hands free memory back then)."""
        self.sizing, self.shapes, self.model, self.stats = PassSizing(shapes), shapes, model, stats
        self.decode_limit, self.ran, self.expecting, self.on_pass = decode_limit, ran, expecting, on_pass
        self.overlap = False  # set once at start (`Engine.start`): the runner's launches are asynchronous
        super().__init__(stats, floor_cache_size, on_idle, idle_seconds)
        self.decodings: collections.deque[Decoding] = collections.deque()  # taking turns, the next in turn first
        self.decode_memory = DecodeMemory()  # what their beams hold together
        self.vocabulary: Vocabulary | None = None  # the model's tokenizer and grammars, built for the first decode
        self.flights: collections.deque[Flight] = collections.deque()  # launched, not yet collected (two at most)
        self.held: Flight | None = None  # collected, its scores delivered after the next launch
        self.quiet, self.decode_next, self.gathering = True, False, None
        self.turn_next = False  # a generation steps next: the device ran other work since its last step
        self.pass_seconds = 0.0  # how long the last pass took (a decode slice's length)

    # ---- schedule ------------------------------------------------------------------------------------------

    def schedule(self):
        """The next piece of work; None once closed and nothing is in flight."""
        self._admit()
        self.units = [u for u in self.units if u.wanted() or self._forget(u)]
        self.reads = collections.deque(r for r in self.reads if r.wanted() and r.next < len(r.prompts))
        oldest = Collect(self.flights[0]) if self.flights else None  # the device to itself: collect first
        if self.closed:
            return oldest
        chosen = self._chosen()
        if self.turns.ready() and (self.turn_next or not (chosen or self.reads or self.decodings)):
            self.turn_next = oldest is not None  # still its turn once the pass in flight is collected
            return oldest or GenerateStep(self.turns.next())
        if self.decodings and (self.decode_next or not (chosen or self.reads)):
            return oldest or self._decode_slice()
        if self.reads and (not self.units or self.reads[0].seq < self.units[0].seq):
            return oldest or self._prompt_pass()
        if oldest is not None:  # launched behind it only once arrivals fill it, with more left over
            if len(self.flights) == 1 and chosen and len(chosen) < len(self.units) and \
                    self.sizing.full([self.units[i] for i in chosen]):
                return self._pass(chosen)
            return Wait(0.001, oldest.flight) if not self.ran(oldest.flight.pending) else oldest
        if not chosen:
            self.quiet = self.quiet or not (self.units or self.decodings)
            return Wait(None if self.held is None else 0.0)
        return self._gathered() or self._pass(chosen)

    def _chosen(self) -> list[int]:
        """The queued units the next pass would hold (while `decode_limit` decodes run or are coming, none that
        extracts: its decode would wait for one of theirs to end)."""
        if not self.units:
            return []
        if self._decode_room():
            return floors_first(self.units, self.sizing.next_pass(self.units))
        free = [i for i, unit in enumerate(self.units) if not extracts(unit)]
        return [free[k] for k in self.sizing.next_pass([self.units[i] for i in free])] if free else []

    def _decode_room(self) -> bool:
        """Whether one more pass's decode may start (a pass in flight that keeps its keys and values will start one)."""
        coming = sum(1 for f in (*self.flights, self.held) if f is not None and any(map(extracts, f.units)))
        return len(self.decodings) + coming < self.decode_limit

    def _gathered(self) -> Wait | None:
        """A wait for requests on their way while the pass would launch part-empty (the module's docstring)."""
        now, lingers = time.perf_counter(), self.quiet and self.shapes.fixed
        if self.gathering is None and not self.decodings and not self.turns.active and \
                (self.expecting() or lingers) and \
                not self.sizing.full(self.units, of_launch=True):
            self.gathering = (now + self.sizing.longest_wait(self.units, self.stats.rate),
                              now + (LINGER if lingers else 0.0))
        if self.gathering is None:
            return None
        deadline, lingering = self.gathering
        if (self.expecting() or now < lingering) and self.sizing.waits_for_more(self.units) and now < deadline:
            return Wait(max(0.0, min(0.005, deadline - now)))
        return None

    def _pass(self, chosen: list[int]) -> Pass:
        taken = set(chosen)
        units = [self.units[i] for i in chosen]
        self.units = [unit for i, unit in enumerate(self.units) if i not in taken]
        self.quiet, self.gathering, self.decode_next = False, None, bool(self.decodings)
        keeps = any(map(extracts, units))
        return Pass(units, keeps, [extraction_prompt_rows(u) for u in units] if keeps else [])

    def _decode_slice(self) -> DecodeSlice:
        """The next decode in turn, for a slice: until it ends, or, while other work waits, for as long as the last
        pass took (DECODE_SLICE at least), or until the memory its next group needs is held by the others."""
        decoding, length = self.decodings[0], max(DECODE_SLICE, self.pass_seconds)
        self.decode_next = False

        def enough(seconds: float) -> bool:
            return not decoding.wanted() or (seconds >= length and (
                len(self.decodings) > 1 or not self.inbox.empty() or bool(self.reads)
                or any(self._decode_room() or not extracts(unit) for unit in self.units)))

        return DecodeSlice(decoding, enough)

    def _prompt_pass(self) -> PromptPass:
        """The oldest completions' prompts (of the oldest one's `top`) that fit one pass, each in its own span."""
        top, picked, lengths = self.reads[0].top, [], []
        for read in (r for r in self.reads if r.top == top):
            while read.next < len(read.prompts):
                n = len(read.prompts[read.next])
                if picked and not self.sizing.holds_prompts([*lengths, n]):
                    break
                picked.append((read, read.next))
                lengths.append(n)
                read.next += 1
            if read.next < len(read.prompts):
                break
        self.quiet, self.decode_next = False, bool(self.decodings)
        shapes = self.shapes
        program = prompt_program([read.prompts[k] for read, k in picked], getattr(self.model, "name", ""),
                                 budget=shapes.budget, block=shapes.prompt_block, largest=shapes.largest)
        return PromptPass(picked, program, top)

    # ---- deliver -------------------------------------------------------------------------------------------

    def deliver(self, work, result) -> None:
        """Take back what running `work` gave: a failure to its requests, a launch in flight, a pass's scores (held
        back for the next launch on an overlapping device), a decode's turn, prompts' scores, a generation's turn
        (`result`: whether it ended); or wait."""
        # a generation steps after each forward of other work (its turn, as a decode slice's)
        self.turn_next = isinstance(work, (Pass, PromptPass, DecodeSlice)) or \
            (self.turn_next and not isinstance(work, GenerateStep))
        if isinstance(result, Failed):
            self._failed(work, result.error)
        elif isinstance(work, Pass) and result.logprobs is None:  # in flight: collected later
            self.flights.append(Flight(work.units, result.pending))
        elif isinstance(work, (Pass, Collect)):
            flight = work.flight if isinstance(work, Collect) else Flight(work.units, result.pending)
            if isinstance(work, Collect):
                self.flights.remove(flight)
            flight.logprobs = result.logprobs
            self.pass_seconds = self.stats.collected(flight.units, flight.pending, self.on_pass)
            # held back for the launch that waited for it, unless one went behind it already (or none waits, or
            # a decode needs the device)
            if self.overlap and self.units and not self.flights and flight.pending.kept is None and \
                    not self.decodings:
                self.held = flight
                return
            self._deliver_pass(flight)
        elif isinstance(work, DecodeSlice):
            if not result and work.decoding.wanted():  # `advance` is True once the decode has ended
                self.decodings.rotate(-1)  # a slice done, more to decode: the next one's turn
            else:
                self._decode_ended(self.decodings.popleft())
        elif isinstance(work, GenerateStep):
            self.turns.stepped(work.generating, result)
        elif isinstance(work, PromptPass):
            self.stats.prompt_passes += 1
            for (read, k), scores in zip(work.reads, result):
                read.scores[k] = scores
                read.remaining -= 1
                if read.remaining == 0:
                    read.finish()
        if self.held is not None:
            held, self.held = self.held, None
            self._deliver_pass(held)
        if isinstance(work, Wait) and work.seconds != 0:
            self._wait(work.seconds)

    def _deliver_pass(self, flight: Flight) -> None:
        """Each unit's scores of a collected pass to its requests; its extraction units' to their decode."""
        units, pending, offset, scores = flight.units, flight.pending, 0, []
        for unit, start in zip(units, pending.starts):
            n = len(unit.arrays.read_row)
            for job, content in unit.consumers:
                job.placements.append((pending.index, content, start, unit.segment.length))
            scores.append(self._scores(unit, flight.logprobs[offset:offset + n], getattr(self.model, "scheme", None)))
            offset += n
        decoded = []
        if pending.kept is not None:  # floors with their prompt contexts now; contents wait for their decode
            scores = [floor_scores(unit, unit_scores, start, pending.kept)
                      if unit.floor_key is not None and extracts(unit) and unit_scores is not None else unit_scores
                      for unit, unit_scores, start in zip(units, scores, pending.starts)]
            decoded = [k for k, unit in enumerate(units)
                       if unit.floor_key is None and extracts(unit) and scores[k] is not None]
        for k, (unit, unit_scores) in enumerate(zip(units, scores)):
            if unit_scores is not None and k not in decoded:
                self._deliver(unit, unit_scores)
        if decoded:
            self.vocabulary = self.vocabulary or Vocabulary.of(self.model)
            self.decodings.append(Decoding(
                self.model, self.vocabulary, [units[k] for k in decoded], [scores[k] for k in decoded],
                [pending.starts[k] for k in decoded], pending.kept, self.stats, self.decode_memory,
                free_lane(self.decodings)))
            self.decode_next = True  # its first slice before the next pass

    def _failed(self, work, error: Exception) -> None:
        """Work that raised: a pass of several contents is retried with each alone (ahead of newer work), so only
        the request whose content fails gets the error."""
        if isinstance(work, Collect):
            self.flights.remove(work.flight)
            work = Pass(work.flight.units, False)
        if isinstance(work, GenerateStep):  # the model's error, or `Cancelled` (its caller stopped waiting)
            self.turns.failed(work.generating, error)
        elif isinstance(work, PromptPass):
            for read, _ in work.reads:
                read.fail(PassFailed(f"the prompts' pass failed: {type(error).__name__}: {error}"))
        elif isinstance(work, Pass) and len(work.units) > 1:
            log.warning("a pass of %d contents failed (%r); retrying each alone", len(work.units), error)
            for unit in work.units:
                unit.solo = True
            self.units = list(work.units) + self.units
        elif isinstance(work, Pass):
            log.exception("a pass failed", exc_info=error)
            self._forget(work.units[0])
            work.units[0].fail(PassFailed(f"the forward pass failed: {type(error).__name__}: {error}"))
        else:
            raise error

    def close(self) -> None:
        """After the loop: decodes stopped where they are, and every request still waiting told."""
        ended = EngineClosed("the engine shut down before this request ran")
        if self.held is not None:
            self._deliver_pass(self.held)
        for flight in self.flights:
            self.units += flight.units
        self.held, self.flights = None, collections.deque()
        while self.decodings:
            decoding = self.decodings.popleft()
            decoding.close()
            self.units += decoding.units
        self._admit()
        self.turns.close(Cancelled("the server is shutting down"))
        for waiting in [*self.units, *self.reads]:
            waiting.fail(ended)
        self.units, self.reads = [], collections.deque()
